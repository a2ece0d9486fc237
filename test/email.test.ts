/**
 * Live-mode email over real SMTP: a local smtp-server receives what the delivery job sends through
 * nodemailer. Covers the envelope and the MIME message (recipients, sender, subject, both parts,
 * X-Message-Id), the `sent` end state (SMTP has no delivery report), sender ownership
 * (SENDER_NOT_CONFIGURED), a 550 to RCPT TO (INVALID_RECIPIENT), usage per recipient, and that
 * test-mode email stays in the sandbox.
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { expectError, eventually } from './helpers/assertions.ts';

type Received = { mailFrom: string | undefined; rcptTo: string[]; raw: string };
type MessageView = {
  id: string; channel: string; to: string | string[]; from: string; status: string; error_code: string | null; error_message: string | null;
  subject: string; html: string | null; text: string | null; status_history: { status: string; at: string }[];
  sent_at: string | null; delivered_at: string | null; failed_at: string | null;
};

const SENDER = 'noreply@acme.test';

let smtp: SMTPServer;
const received: Received[] = [];
let t: TestApp;
let org: TestOrg;

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onRcptTo(address, _session, callback) {
      if (address.address === 'reject@acme.test') {
        const err = new Error('no such user');
        (err as Error & { responseCode: number }).responseCode = 550;
        return callback(err);
      }
      return callback();
    },
    onData(stream, session, callback) {
      let raw = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => { raw += chunk; });
      stream.on('end', () => {
        received.push({
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined,
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw,
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const { port } = smtp.server.address() as AddressInfo;
  t = await startTestApp({ workers: true, clock: systemClock, env: { SMTP_URL: `smtp://127.0.0.1:${port}` } });
  org = await t.createOrg('enterprise', 'Acme');
  const sender = await t.rest('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'email', address: SENDER } });
  expect(sender.status, sender.text).toBe(201);
  expect(sender.body.data).toMatchObject({ channel: 'email', address: SENDER, is_default: true, mode: 'live' });
});

afterAll(async () => {
  await t?.close();
  if (smtp) await new Promise<void>((resolve) => smtp.close(() => resolve()));
});

// ---------------------------------------------------------------------------------------------
// helpers



/** Header value by name from a raw message (first occurrence, unfolded). */
function header(raw: string, name: string): string | undefined {
  const head = raw.split(/\r?\n\r?\n/)[0]!.replace(/\r?\n[ \t]+/g, ' ');
  const line = head.split(/\r?\n/).find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}

function receivedFor(messageId: string): Received[] {
  return received.filter((r) => header(r.raw, 'X-Message-Id') === messageId);
}

async function getMessage(key: string, id: string): Promise<MessageView> {
  const res = await t.rest<{ data: MessageView }>('GET', `/v1/messages/${id}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

function untilStatus(key: string, id: string, status: string): Promise<MessageView> {
  return eventually(`${id} ${status}`, async () => {
    const m = await getMessage(key, id);
    return m.status === status ? m : undefined;
  });
}

async function sendEmail(key: string, body: Record<string, unknown>): Promise<MessageView> {
  const res = await t.rest<{ data: MessageView }>('POST', '/v1/messages/email', { key, body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

async function messageCount(o: TestOrg): Promise<number> {
  const { rows } = await t.db.query('select count(*)::int as n from messages where organization_id = $1', [o.orgId]);
  return rows[0].n as number;
}

// ---------------------------------------------------------------------------------------------

describe('live email over SMTP', () => {
  it('one message to two recipients arrives once, with envelope, headers, both parts and X-Message-Id; ends sent', async () => {
    const accepted = await sendEmail(org.liveKey, {
      to: ['alice@example.com', 'Bob@Example.com'],
      subject: 'Your invoice is ready',
      html: '<p>Hello <b>team</b>, the invoice is attached.</p>',
      text: 'Hello team, the invoice is attached.',
    });
    expect(accepted).toMatchObject({ channel: 'email', status: 'queued', from: SENDER, to: ['alice@example.com', 'bob@example.com'], subject: 'Your invoice is ready' });
    const id = accepted.id;
    expect(id).toMatch(/^msg_/);

    const [mail] = await eventually('the SMTP server to receive the message', () => {
      const got = receivedFor(id);
      return got.length > 0 ? got : undefined;
    });
    expect(mail!.mailFrom).toBe(SENDER);
    expect(mail!.rcptTo).toEqual(['alice@example.com', 'bob@example.com']);
    const raw = mail!.raw;
    expect(header(raw, 'From')).toBe(SENDER);
    expect(header(raw, 'To')).toBe('alice@example.com, bob@example.com');
    expect(header(raw, 'Subject')).toBe('Your invoice is ready');
    expect(header(raw, 'X-Message-Id')).toBe(id);
    expect(header(raw, 'Message-ID')).toBe(`<${id}@acme.test>`);
    expect(header(raw, 'Content-Type')).toMatch(/^multipart\/alternative/);
    expect(raw).toMatch(/Content-Type: text\/plain/);
    expect(raw).toContain('Hello team, the invoice is attached.');
    expect(raw).toMatch(/Content-Type: text\/html/);
    expect(raw).toContain('<p>Hello <b>team</b>, the invoice is attached.</p>');

    const sent = await untilStatus(org.liveKey, id, 'sent');
    expect(sent.status_history.map((h) => h.status)).toEqual(['queued', 'sent']);
    expect(sent.sent_at).toEqual(expect.any(String));
    expect(sent.delivered_at).toBeNull();
    expect(sent.error_code).toBeNull();
    expect(sent).toMatchObject({ html: '<p>Hello <b>team</b>, the invoice is attached.</p>', text: 'Hello team, the invoice is attached.' });
    const { rows } = await t.db.query('select provider, provider_message_id, mode from messages where id = $1', [id]);
    expect(rows[0]).toEqual({ provider: 'smtp', provider_message_id: `<${id}@acme.test>`, mode: 'live' });
    // Sent exactly once: no duplicate reached the server.
    expect(receivedFor(id)).toHaveLength(1);
    const { rows: events } = await t.db.query('select type from events where resource_id = $1 order by sequence', [id]);
    expect(events.map((e) => e.type)).toEqual(['message.queued', 'message.sent']);
  });

  it('records one email.recipient usage entry with quantity 2 for the two-recipient message', async () => {
    const accepted = await sendEmail(org.liveKey, { to: ['carol@example.com', 'dave@example.com'], subject: 'Usage', text: 'Counting recipients' });
    const { rows } = await t.db.query('select organization_id, mode, context, kind, quantity from usage_entries where resource_id = $1', [accepted.id]);
    expect(rows).toEqual([{ organization_id: org.orgId, mode: 'live', context: 'messaging', kind: 'email.recipient', quantity: 2 }]);
    await untilStatus(org.liveKey, accepted.id, 'sent');
    // Delivery does not record usage again.
    const again = await t.db.query('select count(*)::int as n from usage_entries where resource_id = $1', [accepted.id]);
    expect(again.rows[0].n).toBe(1);
  });

  it('GraphQL sendEmail goes out the same way', async () => {
    const res = await t.gql<{ sendEmail: { id: string; status: string; from: string; recipients: string[] } }>(
      'mutation E($input: SendEmailInput!) { sendEmail(input: $input) { id status from recipients } }',
      { input: { to: ['erin@example.com'], subject: 'From GraphQL', text: 'Plain text only', from: 'NoReply@Acme.test' } }, { key: org.liveKey },
    );
    expect(res.body.errors).toBeUndefined();
    const m = res.body.data!.sendEmail;
    expect(m).toMatchObject({ status: 'queued', from: SENDER, recipients: ['erin@example.com'] });
    const [mail] = await eventually('the GraphQL email', () => {
      const got = receivedFor(m.id);
      return got.length > 0 ? got : undefined;
    });
    expect(mail!.rcptTo).toEqual(['erin@example.com']);
    expect(header(mail!.raw, 'Subject')).toBe('From GraphQL');
    expect(header(mail!.raw, 'Content-Type')).toMatch(/^text\/plain/);
    expect(mail!.raw).toContain('Plain text only');
    await untilStatus(org.liveKey, m.id, 'sent');
  });

  it('a 550 to RCPT TO for the only recipient → failed with INVALID_RECIPIENT; nothing delivered', async () => {
    const accepted = await sendEmail(org.liveKey, { to: 'reject@acme.test', subject: 'Bounce me', text: 'Nobody home' });
    expect(accepted.status).toBe('queued');
    const failed = await untilStatus(org.liveKey, accepted.id, 'failed');
    expect(failed.error_code).toBe('INVALID_RECIPIENT');
    expect(failed.error_message).toMatch(/550/);
    expect(failed.failed_at).toEqual(expect.any(String));
    expect(failed.sent_at).toBeNull();
    expect(failed.status_history.map((h) => h.status)).toEqual(['queued', 'failed']);
    expect(receivedFor(accepted.id)).toEqual([]);
    const { rows } = await t.db.query("select type, data->>'error_code' as error_code from events where resource_id = $1 order by sequence", [accepted.id]);
    expect(rows).toEqual([{ type: 'message.queued', error_code: null }, { type: 'message.failed', error_code: 'INVALID_RECIPIENT' }]);
  });
});

describe('live email senders', () => {
  it('no registered sender → 422 SENDER_NOT_CONFIGURED; nothing stored or sent', async () => {
    const bare = await t.createOrg('enterprise', 'No sender');
    const before = received.length;
    const res = await t.rest('POST', '/v1/messages/email', { key: bare.liveKey, body: { to: ['x@example.com'], subject: 'Hi', text: 'Hi' } });
    expect(expectError(res, 422, 'SENDER_NOT_CONFIGURED').error.details.channel).toBe('email');
    // Even a from of the sandbox or of another organization does not help.
    for (const from of ['sandbox@sandbox.test', SENDER]) {
      const withFrom = await t.rest('POST', '/v1/messages/email', { key: bare.liveKey, body: { to: ['x@example.com'], subject: 'Hi', text: 'Hi', from } });
      expect(expectError(withFrom, 422, 'SENDER_NOT_CONFIGURED').error.details.field).toBe('from');
    }
    expect(await messageCount(bare)).toBe(0);
    expect(received.length).toBe(before);
  });

  it('a from the organization does not own → 422 SENDER_NOT_CONFIGURED', async () => {
    const before = await messageCount(org);
    for (const from of ['someone-else@acme.test', 'sandbox@sandbox.test']) {
      const res = await t.rest('POST', '/v1/messages/email', { key: org.liveKey, body: { to: ['x@example.com'], subject: 'Hi', text: 'Hi', from } });
      expect(expectError(res, 422, 'SENDER_NOT_CONFIGURED').error.details.field).toBe('from');
    }
    expect(await messageCount(org)).toBe(before);
  });

  it('a live sender is not a test-mode sender: test keys keep the sandbox sender', async () => {
    const res = await t.rest('POST', '/v1/messages/email', { key: org.testKey, body: { to: ['x@example.com'], subject: 'Hi', text: 'Hi', from: SENDER } });
    expectError(res, 422, 'SENDER_NOT_CONFIGURED');
  });
});

describe('test-mode email', () => {
  it('goes to the sandbox, never to the SMTP server, and is delivered', async () => {
    const accepted = await sendEmail(org.testKey, { to: ['frank@example.com', 'grace@example.com'], subject: 'Sandbox only', html: '<p>sandbox</p>' });
    expect(accepted).toMatchObject({ status: 'queued', from: 'sandbox@sandbox.test' });
    const delivered = await untilStatus(org.testKey, accepted.id, 'delivered');
    expect(delivered.status_history.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);
    expect(delivered.delivered_at).toEqual(expect.any(String));
    const { rows } = await t.db.query('select provider, mode from messages where id = $1', [accepted.id]);
    expect(rows[0]).toEqual({ provider: 'sandbox', mode: 'test' });
    const sandbox = await t.db.query('select provider, recipients from sandbox_sends where idempotency_key = $1', [accepted.id]);
    expect(sandbox.rows).toEqual([{ provider: 'sandbox', recipients: ['frank@example.com', 'grace@example.com'] }]);
    expect(receivedFor(accepted.id)).toEqual([]);
    expect(received.some((r) => r.raw.includes('Sandbox only') || r.rcptTo.includes('frank@example.com'))).toBe(false);
    const usage = await t.db.query('select mode, kind, quantity from usage_entries where resource_id = $1', [accepted.id]);
    expect(usage.rows).toEqual([{ mode: 'test', kind: 'email.recipient', quantity: 2 }]);
  });

  it('live channels without a provider answer 503 CHANNEL_UNAVAILABLE', async () => {
    const res = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+14155552671', body: 'hi' } });
    expect(expectError(res, 503, 'CHANNEL_UNAVAILABLE').error.details.channel).toBe('sms');
  });
});
