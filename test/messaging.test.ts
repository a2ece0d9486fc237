/**
 * Messaging end to end over HTTP, against the real database with real pg-boss workers and the
 * sandbox providers: every channel and request shape on REST and its GraphQL twin, validation,
 * SMS segmentation, the delivery lifecycle (and its magic recipients), retry, RCS → SMS fallback,
 * WhatsApp template and 24-hour session rules, senders, listing filters and pagination,
 * durability (usage, events, a delivery job that runs twice), provider callbacks and the event
 * outbox. The 24-hour window runs on a second app with a manual clock.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { openSandboxPayload } from './helpers/sandbox.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { expectError, expectGqlError, eventually } from './helpers/assertions.ts';

type StatusChange = { status: string; at: string; error_code?: string };
type MessageView = {
  id: string; message_id: string; channel: string; direction: string; to: string | string[]; from: string; status: string;
  encoding?: string | null; segments?: number | null; error_code: string | null; fallback?: { channel: string; reason: string; at: string };
  original_message_id?: string; created_at: string; sent_at: string | null; delivered_at: string | null; read_at: string | null;
  failed_at: string | null; body?: string | null; status_history?: StatusChange[]; template_id?: string | null;
  type?: string; template?: unknown; media?: Record<string, unknown>; subject?: string; html?: string | null; text?: string | null;
  card?: Record<string, unknown>; cards?: unknown[]; suggestions?: unknown[]; media_url?: string; button?: Record<string, unknown>;
  metadata?: Record<string, unknown>; webhook_url?: string | null;
};

const LIFECYCLE_ENV = {
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
  SANDBOX_READ_AFTER_MS: '50',
  SANDBOX_TEMPLATE_REVIEW_MS: '50',
  MESSAGING_SEND_ATTEMPTS: '2',
  MESSAGING_RETRY_DELAY_SECONDS: '1',
};

const MAGIC = {
  invalidRecipient: '+15005550001',
  providerError: '+15005550002',
  noRcs: '+15005550003',
  noReports: '+15005550004',
  bounce: 'bounce@sandbox.test',
  sandboxSms: '+15005550006',
};

const STATUS_RANK: Record<string, number> = { queued: 0, sent: 1, delivered: 2, read: 3, failed: 4 };

// ---------------------------------------------------------------------------------------------
// helpers shared by both apps

let seq = 0;
/** A fresh, valid US number per call, so exact-recipient filters and sessions never collide. */
const phone = () => `+1415555${String(1000 + ++seq).padStart(4, '0')}`;
const email = (name = 'user') => `${name}.${++seq}@example.com`;



const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


const MESSAGE_FIELDS = 'id channel direction to recipients from status body encoding segments errorCode templateId originalMessageId fallback content createdAt deliveredAt statusHistory { status at errorCode }';

// ---------------------------------------------------------------------------------------------

describe('messaging (system clock, pg-boss workers, sandbox providers)', () => {
  let t: TestApp;
  let org: TestOrg;

  beforeAll(async () => {
    t = await startTestApp({ workers: true, clock: systemClock, env: LIFECYCLE_ENV });
    org = await t.createOrg('enterprise', 'Messaging org');
  });
  afterAll(async () => { await t?.close(); });

  const post = (path: string, body: unknown, key = org.testKey) => t.rest<{ data: MessageView }>('POST', path, { key, body });
  const gql = (query: string, variables?: Record<string, unknown>, key = org.testKey) => t.gql<any>(query, variables, { key });

  async function send(channel: string, body: unknown, key = org.testKey): Promise<MessageView> {
    const res = await post(`/v1/messages/${channel}`, body, key);
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  }

  async function getMessage(id: string, key = org.testKey): Promise<MessageView> {
    const res = await t.rest<{ data: MessageView }>('GET', `/v1/messages/${id}`, { key });
    expect(res.status, res.text).toBe(200);
    return res.body.data;
  }

  /** Waits on the messages table (no HTTP, so polling never touches the rate limits). */
  async function waitForStatus(id: string, status: string): Promise<void> {
    await eventually(`${id} to be ${status}`, async () => {
      const r = await t.db.query<{ status: string }>('select status from messages where id = $1', [id]);
      const current = r.rows[0]?.status;
      if (current === status) return true;
      // A terminal state other than the wanted one will not change: fail fast with what we saw.
      if (current !== undefined && (current === 'failed' || current === 'read') && current !== status) {
        throw new Error(`${id} ended ${current}, expected ${status}`);
      }
      return undefined;
    });
  }

  async function openSession(to: string, key = org.testKey): Promise<void> {
    const res = await t.rest('POST', '/v1/sandbox/inbound', { key, body: { channel: 'whatsapp', from: to, body: 'hello' } });
    expect(res.status, res.text).toBe(201);
  }

  async function counts(orgId: string): Promise<{ messages: number; usage: number; events: number }> {
    const r = await t.db.query<{ messages: number; usage: number; events: number }>(
      `select (select count(*)::int from messages where organization_id = $1) as messages,
              (select count(*)::int from usage_entries where organization_id = $1) as usage,
              (select count(*)::int from events where organization_id = $1 and type in ('message.queued', 'message.received')) as events`, [orgId]);
    return r.rows[0]!;
  }

  async function createApprovedTemplate(name: string, content: string, key = org.testKey): Promise<string> {
    const res = await t.rest('POST', '/v1/messages/templates', { key, body: { channel: 'whatsapp', name, content, language: 'en', category: 'utility' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.status).toBe('pending_approval');
    const id = res.body.data.id as string;
    await eventually(`template ${name} approved`, async () => {
      const r = await t.db.query<{ status: string }>('select status from message_templates where id = $1', [id]);
      return r.rows[0]?.status === 'approved' ? true : undefined;
    });
    const got = await t.rest('GET', `/v1/messages/templates/${id}`, { key });
    expect(got.body.data.status).toBe('approved');
    return id;
  }

  function expectAccepted(m: MessageView, channel: string, to: string | string[]): void {
    expect(m.message_id).toMatch(/^msg_/);
    expect(m.id).toBe(m.message_id);
    expect(m.channel).toBe(channel);
    expect(m.to).toEqual(to);
    expect(m.status).toBe('queued');
    expect(m.direction).toBe('outbound');
    expect(Number.isNaN(Date.parse(m.created_at))).toBe(false);
    expect(m.status_history?.map((h) => h.status)).toEqual(['queued']);
  }

  // -------------------------------------------------------------------------------------------
  describe('accepting each channel and request shape', () => {
    it('SMS on REST and sendSms on GraphQL', async () => {
      const to = phone();
      const m = await send('sms', { to, body: 'Your code is 1234', metadata: { order: 'A-1' }, webhook_url: 'https://example.com/hook' });
      expectAccepted(m, 'sms', to);
      expect(m).toMatchObject({ body: 'Your code is 1234', from: MAGIC.sandboxSms, encoding: 'GSM-7', segments: 1, metadata: { order: 'A-1' }, webhook_url: 'https://example.com/hook' });

      // National formatting with separators is normalized to E.164.
      const spaced = await send('sms', { to: `${to.slice(0, 2)} (${to.slice(2, 5)}) ${to.slice(5, 8)}-${to.slice(8)}`, body: 'hi' });
      expect(spaced.to).toBe(to);

      const g = await gql(`mutation($to: String!) { sendSms(input: { to: $to, body: "Hello from GraphQL", metadata: { k: "v" } }) { ${MESSAGE_FIELDS} } }`, { to });
      expect(g.status, g.text).toBe(200);
      expect(g.body.errors).toBeUndefined();
      const s = g.body.data.sendSms;
      expect(s).toMatchObject({ channel: 'sms', direction: 'outbound', to, status: 'queued', body: 'Hello from GraphQL', encoding: 'GSM-7', segments: 1, from: MAGIC.sandboxSms });
      expect(s.id).toMatch(/^msg_/);
      expect(s.statusHistory.map((h: StatusChange) => h.status)).toEqual(['queued']);
      expect((await getMessage(s.id)).metadata).toEqual({ k: 'v' });
    });

    it('WhatsApp: text object, type text + body, media, template (REST) and sendWhatsApp (GraphQL)', async () => {
      const to = phone();
      await openSession(to);
      const a = await send('whatsapp', { to, text: { body: 'Hi there' } });
      expectAccepted(a, 'whatsapp', to);
      expect(a).toMatchObject({ type: 'text', body: 'Hi there', from: MAGIC.sandboxSms });

      const b = await send('whatsapp', { to, type: 'text', body: 'Typed text' });
      expect(b).toMatchObject({ type: 'text', body: 'Typed text', status: 'queued' });

      const c = await send('whatsapp', { to, media: { type: 'image', url: 'https://example.com/a.jpg', mime_type: 'image/jpeg', size_bytes: 5 * 1024 * 1024, caption: 'A photo' } });
      expect(c).toMatchObject({ type: 'media', body: 'A photo', media: { type: 'image', url: 'https://example.com/a.jpg', mime_type: 'image/jpeg', size_bytes: 5 * 1024 * 1024 } });

      const d = await send('whatsapp', { to, type: 'document', media: { url: 'https://example.com/terms.pdf', filename: 'terms.pdf' } });
      expect(d).toMatchObject({ type: 'media', media: { type: 'document', url: 'https://example.com/terms.pdf' } });

      const tplId = await createApprovedTemplate('shape_welcome', 'Welcome {{1}}!');
      const stranger = phone(); // no inbound: templates need no session
      const e = await send('whatsapp', { to: stranger, template: { name: 'shape_welcome', language: 'en', components: [{ type: 'body', parameters: [{ type: 'text', text: 'Ana' }] }] } });
      expect(e).toMatchObject({ type: 'template', body: 'Welcome Ana!', template_id: tplId, to: stranger });
      const f = await send('whatsapp', { to: stranger, type: 'template', template: { name: 'shape_welcome', language: { code: 'en' }, components: [{ type: 'BODY', parameters: [{ type: 'text', text: 'Bo' }] }] } });
      expect(f).toMatchObject({ type: 'template', body: 'Welcome Bo!' });

      const g = await gql(`mutation($to: String!) {
        text: sendWhatsApp(input: { to: $to, text: { body: "GraphQL text" } }) { ${MESSAGE_FIELDS} }
        media: sendWhatsApp(input: { to: $to, type: "image", media: { url: "https://example.com/b.png", mimeType: "image/png", sizeBytes: 1000 } }) { ${MESSAGE_FIELDS} }
        tpl: sendWhatsApp(input: { to: $to, template: { name: "shape_welcome", language: "en", components: [{ type: "body", parameters: [{ type: "text", text: "Cy" }] }] } }) { ${MESSAGE_FIELDS} }
      }`, { to });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.text).toMatchObject({ channel: 'whatsapp', to, status: 'queued', body: 'GraphQL text', content: { type: 'text' } });
      expect(g.body.data.media).toMatchObject({ channel: 'whatsapp', content: { type: 'media', media: { type: 'image', mime_type: 'image/png', size_bytes: 1000 } } });
      expect(g.body.data.tpl).toMatchObject({ body: 'Welcome Cy!', templateId: tplId });
    });

    it('email: to as a string and as an array, html and/or text (REST) and sendEmail (GraphQL)', async () => {
      const one = email();
      const a = await send('email', { to: one.toUpperCase(), subject: 'Hello', text: 'Plain body' });
      expectAccepted(a, 'email', one);
      expect(a).toMatchObject({ subject: 'Hello', text: 'Plain body', html: null, body: 'Plain body', from: 'sandbox@sandbox.test' });

      const [x, y] = [email('x'), email('y')];
      const b = await send('email', { to: [x, y, x], subject: 'Both', html: '<p>Hi</p>', text: 'Hi' });
      expectAccepted(b, 'email', [x, y]);
      expect(b).toMatchObject({ html: '<p>Hi</p>', text: 'Hi' });

      const c = await send('email', { to: [one], subject: 'Html only', html: '<b>only</b>' });
      expect(c).toMatchObject({ to: one, html: '<b>only</b>', text: null, body: null });

      const g = await gql(`mutation($to: [String!]!) { sendEmail(input: { to: $to, subject: "From GraphQL", html: "<i>x</i>" }) { ${MESSAGE_FIELDS} } }`, { to: [x, y] });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.sendEmail).toMatchObject({ channel: 'email', status: 'queued', to: x, recipients: [x, y], content: { subject: 'From GraphQL', html: '<i>x</i>' } });
    });

    it('RCS: text with suggestions, rich_card, carousel (REST) and sendRcs (GraphQL)', async () => {
      const to = phone();
      const a = await send('rcs', { to, body: 'Pick one', suggestions: [{ type: 'reply', text: 'Yes' }, { type: 'action', text: 'Open', url: 'https://example.com' }] });
      expectAccepted(a, 'rcs', to);
      expect(a).toMatchObject({ type: 'text', body: 'Pick one', from: 'sandbox_rcs_agent', suggestions: [{ type: 'reply', text: 'Yes' }, { type: 'action', text: 'Open', url: 'https://example.com' }] });

      const b = await send('rcs', { to, type: 'rich_card', card: { title: 'Sale', description: '50% off', media_url: 'https://example.com/sale.png' } });
      expect(b).toMatchObject({ type: 'rich_card', card: { title: 'Sale', description: '50% off', media_url: 'https://example.com/sale.png' } });

      const cards = [{ title: 'One' }, { title: 'Two', description: 'second' }];
      const c = await send('rcs', { to, type: 'carousel', cards });
      expect(c).toMatchObject({ type: 'carousel', cards });

      const g = await gql(`mutation($to: String!) {
        card: sendRcs(input: { to: $to, type: "rich_card", card: { title: "GQL card", mediaUrl: "https://example.com/c.png" } }) { ${MESSAGE_FIELDS} }
        carousel: sendRcs(input: { to: $to, type: "carousel", cards: [{ title: "A" }, { title: "B" }, { title: "C" }] }) { ${MESSAGE_FIELDS} }
      }`, { to });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.card).toMatchObject({ channel: 'rcs', status: 'queued', content: { type: 'rich_card', card: { title: 'GQL card', media_url: 'https://example.com/c.png' } } });
      expect(g.body.data.carousel.content.cards).toHaveLength(3);
    });

    it('Viber: body, media_url, button (REST) and sendViber (GraphQL)', async () => {
      const to = phone();
      const a = await send('viber', { to, body: 'Viber text' });
      expectAccepted(a, 'viber', to);
      expect(a).toMatchObject({ body: 'Viber text', from: 'SandboxViber' });
      const b = await send('viber', { to, media_url: 'https://example.com/v.jpg' });
      expect(b).toMatchObject({ media_url: 'https://example.com/v.jpg', body: null });
      const c = await send('viber', { to, body: 'Tap', button: { text: 'Open', url: 'https://example.com/go' } });
      expect(c).toMatchObject({ body: 'Tap', button: { text: 'Open', url: 'https://example.com/go' } });

      const g = await gql(`mutation($to: String!) { sendViber(input: { to: $to, body: "GQL", button: { text: "Go", url: "https://example.com" } }) { ${MESSAGE_FIELDS} } }`, { to });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.sendViber).toMatchObject({ channel: 'viber', to, status: 'queued', body: 'GQL', content: { button: { text: 'Go', url: 'https://example.com' } } });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('validation', () => {
    it('rejects invalid requests with the spec codes and stores nothing', async () => {
      const v = await t.createOrg('enterprise', 'Validation org');
      const before = await counts(v.orgId);
      const cases: [string, unknown, string, string?][] = [
        ['sms', { to: '415-555-0100', body: 'x' }, 'INVALID_PHONE_NUMBER', 'to'],
        ['sms', { to: '+12', body: 'x' }, 'INVALID_PHONE_NUMBER', 'to'],
        ['whatsapp', { to: 'nope', text: { body: 'x' } }, 'INVALID_PHONE_NUMBER', 'to'],
        ['email', { to: 'not-an-email', subject: 's', text: 'x' }, 'INVALID_EMAIL', 'to'],
        ['email', { to: ['ok@example.com', 'bad@'], subject: 's', text: 'x' }, 'INVALID_EMAIL', 'to.1'],
        ['sms', { to: phone(), body: 'a'.repeat(1601) }, 'MESSAGE_TOO_LONG', 'body'],
        ['rcs', { to: phone(), type: 'carousel', cards: Array.from({ length: 11 }, (_, i) => ({ title: `c${i}` })) }, 'VALIDATION_ERROR', 'cards'],
        ['rcs', { to: phone(), type: 'carousel', cards: [{ title: 'only one' }] }, 'VALIDATION_ERROR', 'cards'],
        ['whatsapp', { to: phone(), media: { type: 'image', url: 'https://example.com/big.jpg', size_bytes: 5 * 1024 * 1024 + 1 } }, 'MEDIA_TOO_LARGE', 'media.size_bytes'],
        ['whatsapp', { to: phone(), type: 'video', media: { url: 'https://example.com/v.mp4', size_bytes: 16 * 1024 * 1024 + 1 } }, 'MEDIA_TOO_LARGE', 'media.size_bytes'],
        ['sms', { body: 'no recipient' }, 'MISSING_REQUIRED_FIELD', 'to'],
        ['sms', { to: phone() }, 'MISSING_REQUIRED_FIELD', 'body'],
        ['viber', { to: phone() }, 'MISSING_REQUIRED_FIELD', 'body'],
        ['email', { subject: 's', text: 'x' }, 'MISSING_REQUIRED_FIELD', 'to'],
        ['whatsapp', { to: phone() }, 'MISSING_REQUIRED_FIELD', 'text'],
        ['rcs', { to: phone(), type: 'rich_card' }, 'MISSING_REQUIRED_FIELD', 'card'],
        // PostgreSQL cannot store NUL in text or jsonb: refused up front, not a 500 from the database.
        ['sms', { to: phone(), body: 'nul \u0000 inside' }, 'VALIDATION_ERROR', 'body'],
        ['sms', { to: phone(), body: 'ok', metadata: { note: 'a\u0000b' } }, 'VALIDATION_ERROR', 'metadata.note'],
      ];
      for (const [channel, body, code, field] of cases) {
        const res = await post(`/v1/messages/${channel}`, body, v.testKey);
        const err = expectError(res, 422, code);
        if (field !== undefined) expect(err.error.details.field, `${channel} ${code}`).toBe(field);
      }

      // The GraphQL twins answer the same codes.
      const g1 = await gql('mutation { sendSms(input: { to: "12345", body: "x" }) { id } }', undefined, v.testKey);
      expect(expectGqlError(g1, 'INVALID_PHONE_NUMBER').extensions.status).toBe(422);
      const g2 = await gql('mutation($b: String!) { sendSms(input: { to: "+14155550100", body: $b }) { id } }', { b: 'x'.repeat(1601) }, v.testKey);
      expectGqlError(g2, 'MESSAGE_TOO_LONG');
      const g3 = await gql('mutation { sendEmail(input: { to: ["a@b"], subject: "s", text: "x" }) { id } }', undefined, v.testKey);
      expectGqlError(g3, 'INVALID_EMAIL');
      const g4 = await gql('mutation { sendSms(input: { to: "+14155550100" }) { id } }', undefined, v.testKey);
      expect(expectGqlError(g4, 'MISSING_REQUIRED_FIELD').extensions.details?.field).toBe('body');
      const g5 = await gql('mutation($b: String!) { sendSms(input: { to: "+14155550100", body: $b }) { id } }', { b: 'x\u0000y' }, v.testKey);
      expect(expectGqlError(g5, 'VALIDATION_ERROR').extensions.details?.field).toBe('body');

      expect(await counts(v.orgId)).toEqual(before);
      expect(before.messages).toBe(0);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('SMS encoding and segments', () => {
    const cases: [string, string, 'GSM-7' | 'UCS-2', number][] = [
      ['160 GSM-7 characters', 'a'.repeat(160), 'GSM-7', 1],
      ['161 GSM-7 characters', 'a'.repeat(161), 'GSM-7', 2],
      ['306 GSM-7 characters', 'a'.repeat(306), 'GSM-7', 2],
      ['307 GSM-7 characters', 'a'.repeat(307), 'GSM-7', 3],
      ['€ + 158 (160 septets)', `€${'a'.repeat(158)}`, 'GSM-7', 1],
      ['€ + 159 (161 septets)', `€${'a'.repeat(159)}`, 'GSM-7', 2],
      ['70 Arabic letters', 'م'.repeat(70), 'UCS-2', 1],
      ['71 Arabic letters', 'م'.repeat(71), 'UCS-2', 2],
      ['35 emoji (70 UTF-16 units)', '😀'.repeat(35), 'UCS-2', 1],
      ['36 emoji (72 UTF-16 units)', '😀'.repeat(36), 'UCS-2', 2],
      ['1600 characters', 'a'.repeat(1600), 'GSM-7', 11],
    ];
    it.each(cases)('%s', async (_label, body, encoding, segments) => {
      const m = await send('sms', { to: phone(), body });
      expect({ encoding: m.encoding, segments: m.segments }).toEqual({ encoding, segments });
      const got = await getMessage(m.id);
      expect({ encoding: got.encoding, segments: got.segments, body: got.body }).toEqual({ encoding, segments, body });
    });

    it('GraphQL sendSms reports the same encoding and segments', async () => {
      const g = await gql('mutation($b: String!) { sendSms(input: { to: "+14155550100", body: $b }) { encoding segments } }', { b: 'م'.repeat(71) });
      expect(g.body.data.sendSms).toEqual({ encoding: 'UCS-2', segments: 2 });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('lifecycle', () => {
    it('an SMS is sent, then delivered, with its status history and times', async () => {
      const m = await send('sms', { to: phone(), body: 'lifecycle' });
      await waitForStatus(m.id, 'delivered');
      const got = await getMessage(m.id);
      expect(got.status).toBe('delivered');
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);
      const times = got.status_history!.map((h) => Date.parse(h.at));
      expect(times.every((x, i) => i === 0 || x >= times[i - 1]!)).toBe(true);
      expect(got.sent_at).not.toBeNull();
      expect(got.delivered_at).not.toBeNull();
      expect(got.read_at).toBeNull();
      expect(got.error_code).toBeNull();
      expect(Date.parse(got.delivered_at!)).toBeGreaterThanOrEqual(Date.parse(got.sent_at!));
      const row = await t.db.query<{ provider: string; provider_message_id: string }>('select provider, provider_message_id from messages where id = $1', [m.id]);
      expect(row.rows[0]).toMatchObject({ provider: 'sandbox', provider_message_id: expect.stringMatching(/^SBX[0-9a-f]{24}$/) });

      // GraphQL sees the same record.
      const g = await gql(`query($id: ID!) { message(id: $id) { ${MESSAGE_FIELDS} } node(id: $id) { ... on Message { status } } }`, { id: m.id });
      expect(g.body.data.message.status).toBe('delivered');
      expect(g.body.data.message.statusHistory.map((h: StatusChange) => h.status)).toEqual(['queued', 'sent', 'delivered']);
      expect(g.body.data.node.status).toBe('delivered');
    });

    it('a WhatsApp message (inside the session) is read', async () => {
      const to = phone();
      await openSession(to);
      const m = await send('whatsapp', { to, text: { body: 'will be read' } });
      await waitForStatus(m.id, 'read');
      const got = await getMessage(m.id);
      expect(got.status).toBe('read');
      expect(got.read_at).not.toBeNull();
      expect(got.delivered_at).not.toBeNull();
      const statuses = got.status_history!.map((h) => h.status);
      expect(statuses.slice(0, 2)).toEqual(['queued', 'sent']);
      expect(statuses.at(-1)).toBe('read');
      // Never backwards: the history only climbs.
      expect(statuses.every((s, i) => i === 0 || STATUS_RANK[s]! > STATUS_RANK[statuses[i - 1]!]!)).toBe(true);
    });

    it('RCS and Viber messages are read too', async () => {
      const to = phone();
      const r = await send('rcs', { to, body: 'rcs' });
      const v = await send('viber', { to, body: 'viber' });
      await waitForStatus(r.id, 'read');
      await waitForStatus(v.id, 'read');
      expect((await getMessage(r.id)).read_at).not.toBeNull();
    });

    it(`${MAGIC.invalidRecipient} fails with INVALID_RECIPIENT without reaching the provider log`, async () => {
      const m = await send('sms', { to: MAGIC.invalidRecipient, body: 'x' });
      await waitForStatus(m.id, 'failed');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'INVALID_RECIPIENT', sent_at: null, delivered_at: null });
      expect(got.failed_at).not.toBeNull();
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'failed']);
      const sends = await t.db.query('select 1 from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sends.rowCount).toBe(0);
    });

    it(`${MAGIC.providerError} is retried, then fails with PROVIDER_ERROR`, async () => {
      const m = await send('sms', { to: MAGIC.providerError, body: 'x' });
      await waitForStatus(m.id, 'failed');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'PROVIDER_ERROR' });
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'failed']);
      // MESSAGING_SEND_ATTEMPTS=2: the job ran twice (one retry) and its last run completed.
      const job = await t.db.query<{ retry_count: number; state: string }>(
        `select retry_count, state from pgboss.job where name = 'messaging.deliver' and data->'data'->>'messageId' = $1`, [m.id]);
      expect(job.rows).toHaveLength(1);
      expect(job.rows[0]).toMatchObject({ retry_count: 1, state: 'completed' });
    });

    it(`${MAGIC.noReports} stays sent while others are delivered`, async () => {
      const silent = await send('sms', { to: MAGIC.noReports, body: 'x' });
      const control = await send('sms', { to: phone(), body: 'x' });
      await waitForStatus(control.id, 'delivered');
      await waitForStatus(silent.id, 'sent');
      await sleep(700); // longer than the delivery delay plus a report-poll interval
      const got = await getMessage(silent.id);
      expect(got.status).toBe('sent');
      expect(got.delivered_at).toBeNull();
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent']);
    });

    it(`${MAGIC.bounce} fails with BOUNCED after being sent`, async () => {
      const m = await send('email', { to: MAGIC.bounce, subject: 'x', text: 'x' });
      const ok = await send('email', { to: [email(), email()], subject: 'x', text: 'x' });
      await waitForStatus(m.id, 'failed');
      await waitForStatus(ok.id, 'delivered');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'BOUNCED' });
      expect(got.sent_at).not.toBeNull();
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'failed']);
      expect(got.status_history!.at(-1)!.error_code).toBe('BOUNCED');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('retry', () => {
    it('a failed message is sent again as a new message; others are a CONFLICT', async () => {
      const failed = await send('sms', { to: MAGIC.invalidRecipient, body: 'retry me', metadata: { n: 1 } });
      const delivered = await send('sms', { to: phone(), body: 'fine' });
      const sent = await send('sms', { to: MAGIC.noReports, body: 'stuck' });
      await waitForStatus(failed.id, 'failed');
      await waitForStatus(delivered.id, 'delivered');
      await waitForStatus(sent.id, 'sent');

      const res = await t.rest<{ data: MessageView }>('POST', `/v1/messages/${failed.id}/retry`, { key: org.testKey });
      expect(res.status, res.text).toBe(201);
      const retried = res.body.data;
      expect(retried.id).not.toBe(failed.id);
      expect(retried).toMatchObject({ original_message_id: failed.id, to: MAGIC.invalidRecipient, body: 'retry me', channel: 'sms', status: 'queued', metadata: { n: 1 } });
      expect(retried.status_history!.map((h) => h.status)).toEqual(['queued']);
      // The retry goes through delivery again (and fails again on this magic number).
      await waitForStatus(retried.id, 'failed');
      // The original is untouched.
      expect((await getMessage(failed.id)).status).toBe('failed');

      expectError(await t.rest('POST', `/v1/messages/${delivered.id}/retry`, { key: org.testKey }), 409, 'CONFLICT');
      expectError(await t.rest('POST', `/v1/messages/${sent.id}/retry`, { key: org.testKey }), 409, 'CONFLICT');
      expectError(await t.rest('POST', '/v1/messages/msg_01jd0000000000000000000000/retry', { key: org.testKey }), 404, 'NOT_FOUND');

      // GraphQL twin.
      const g = await gql(`mutation($id: ID!) { retryMessage(id: $id) { ${MESSAGE_FIELDS} } }`, { id: failed.id });
      expect(g.body.errors, g.text).toBeUndefined();
      expect(g.body.data.retryMessage).toMatchObject({ originalMessageId: failed.id, to: MAGIC.invalidRecipient, body: 'retry me', status: 'queued' });
      expect(g.body.data.retryMessage.id).not.toBe(retried.id);
      expectGqlError(await gql('mutation($id: ID!) { retryMessage(id: $id) { id } }', { id: delivered.id }), 'CONFLICT');
    });

    it('a retried email keeps all its recipients and content', async () => {
      const other = email();
      const failed = await send('email', { to: [MAGIC.bounce, other], subject: 'Sub', html: '<p>x</p>', text: 'x' });
      await waitForStatus(failed.id, 'failed');
      const res = await t.rest<{ data: MessageView }>('POST', `/v1/messages/${failed.id}/retry`, { key: org.testKey });
      expect(res.status, res.text).toBe(201);
      expect(res.body.data).toMatchObject({ to: [MAGIC.bounce, other], subject: 'Sub', html: '<p>x</p>', text: 'x', original_message_id: failed.id });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('RCS fallback', () => {
    it(`${MAGIC.noRcs} with fallback sms is delivered as an SMS and says so`, async () => {
      const m = await send('rcs', { to: MAGIC.noRcs, body: 'Fallback body €', fallback: { channel: 'sms' } });
      expect(m.status).toBe('queued');
      await waitForStatus(m.id, 'delivered');
      const got = await getMessage(m.id);
      expect(got.channel).toBe('rcs');
      expect(got.status).toBe('delivered');
      expect(got.fallback).toMatchObject({ channel: 'sms', reason: 'RCS_NOT_SUPPORTED' });
      expect(Number.isNaN(Date.parse(got.fallback!.at))).toBe(false);
      expect(got.from).toBe(MAGIC.sandboxSms);
      expect(got.encoding).toBe('GSM-7');
      expect(got.segments).toBe(1);
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);
      // Usage: the RCS message and the fallback's SMS segments.
      const usage = await t.db.query<{ kind: string; quantity: number }>('select kind, quantity from usage_entries where resource_id = $1 order by kind', [m.id]);
      expect(usage.rows).toEqual([{ kind: 'rcs.message', quantity: 1 }, { kind: 'sms.segment', quantity: 1 }]);
    });

    it('a rich card falls back to an SMS with the fallback body', async () => {
      const m = await send('rcs', { to: MAGIC.noRcs, type: 'rich_card', card: { title: 'T' }, fallback: { channel: 'sms', body: 'م'.repeat(71) } });
      await waitForStatus(m.id, 'delivered');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ body: 'م'.repeat(71), encoding: 'UCS-2', segments: 2, fallback: { channel: 'sms' } });
    });

    it('the SMS fallback respects the recipient\'s SMS opt-out', async () => {
      const other = await t.createOrg('enterprise', 'Opted-out fallback');
      const contact = await t.rest('POST', '/v1/contacts', { key: other.testKey, body: { phone: MAGIC.noRcs } });
      expect(contact.status, contact.text).toBe(201);
      const prefs = await t.rest('PUT', `/v1/contacts/${contact.body.data.id}/preferences`, { key: other.testKey, body: { sms: 'opted_out' } });
      expect(prefs.status, prefs.text).toBe(200);
      // RCS itself is allowed (no RCS opt-out); the fallback SMS is not.
      const m = await send('rcs', { to: MAGIC.noRcs, body: 'fallback to an opted-out number', fallback: { channel: 'sms' } }, other.testKey);
      await waitForStatus(m.id, 'failed');
      const got = await getMessage(m.id, other.testKey);
      expect(got).toMatchObject({ status: 'failed', error_code: 'RECIPIENT_OPTED_OUT' });
      expect(got.fallback).toBeUndefined();
      const sent = await t.db.query('select 1 from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sent.rowCount).toBe(0);
    });

    it(`${MAGIC.noRcs} without fallback fails with RCS_NOT_SUPPORTED`, async () => {
      const m = await send('rcs', { to: MAGIC.noRcs, body: 'no fallback' });
      await waitForStatus(m.id, 'failed');
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'RCS_NOT_SUPPORTED' });
      expect(got.fallback).toBeUndefined();
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('WhatsApp rules', () => {
    it('free-form text or media without an inbound message is TEMPLATE_NOT_APPROVED', async () => {
      const before = await counts(org.orgId);
      expectError(await post('/v1/messages/whatsapp', { to: phone(), text: { body: 'cold' } }), 422, 'TEMPLATE_NOT_APPROVED');
      expectError(await post('/v1/messages/whatsapp', { to: phone(), media: { type: 'image', url: 'https://example.com/a.jpg' } }), 422, 'TEMPLATE_NOT_APPROVED');
      expectGqlError(await gql('mutation { sendWhatsApp(input: { to: "+14155550100", text: { body: "cold" } }) { id } }'), 'TEMPLATE_NOT_APPROVED');
      // An inbound on another channel does not open the WhatsApp session.
      const to = phone();
      expect((await t.rest('POST', '/v1/sandbox/inbound', { key: org.testKey, body: { channel: 'sms', from: to, body: 'hi' } })).status).toBe(201);
      expectError(await post('/v1/messages/whatsapp', { to, text: { body: 'still cold' } }), 422, 'TEMPLATE_NOT_APPROVED');
      const after = await counts(org.orgId);
      expect(after.messages).toBe(before.messages + 1); // just the inbound SMS
    });

    it('draft and rejected templates are TEMPLATE_NOT_APPROVED; an approved one renders its parameters', async () => {
      const draft = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body: { channel: 'whatsapp', name: 'draft_note', content: 'Draft {{1}}', status: 'draft' } });
      expect(draft.status, draft.text).toBe(201);
      expect(draft.body.data.status).toBe('draft');

      const rejected = await t.rest('POST', '/v1/messages/templates', { key: org.testKey, body: { channel: 'whatsapp', name: 'reject_promo', content: 'Promo {{1}}' } });
      expect(rejected.status, rejected.text).toBe(201);
      await eventually('reject_promo rejected', async () => {
        const r = await t.db.query<{ status: string }>('select status from message_templates where id = $1', [rejected.body.data.id]);
        return r.rows[0]?.status === 'rejected' ? true : undefined;
      });
      const rejectedView = await t.rest('GET', `/v1/messages/templates/${rejected.body.data.id}`, { key: org.testKey });
      expect(rejectedView.body.data).toMatchObject({ status: 'rejected', rejection_reason: expect.any(String) });

      const approvedId = await createApprovedTemplate('order_shipped', 'Hi {{1}}, order {{2}} has shipped');

      const to = phone();
      const params = [{ type: 'body', parameters: [{ type: 'text', text: 'Ana' }, { type: 'text', text: 'A-17' }] }];
      const d = expectError(await post('/v1/messages/whatsapp', { to, template: { name: 'draft_note', language: 'en', components: params } }), 422, 'TEMPLATE_NOT_APPROVED');
      expect(d.error.details.status).toBe('draft');
      const r = expectError(await post('/v1/messages/whatsapp', { to, template: { name: 'reject_promo', language: 'en', components: params } }), 422, 'TEMPLATE_NOT_APPROVED');
      expect(r.error.details.status).toBe('rejected');

      const m = await send('whatsapp', { to, template: { name: 'order_shipped', language: 'en', components: params } });
      expect(m).toMatchObject({ body: 'Hi Ana, order A-17 has shipped', template_id: approvedId, type: 'template', status: 'queued' });
      await waitForStatus(m.id, 'read');
      const sent = await t.db.query<{ payload: { body: string } }>('select payload from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(openSandboxPayload(sent.rows[0]!.payload).body).toBe('Hi Ana, order A-17 has shipped');

      // A missing parameter is INVALID_TEMPLATE.
      expectError(await post('/v1/messages/whatsapp', { to, template: { name: 'order_shipped', language: 'en', components: [{ type: 'body', parameters: [{ type: 'text', text: 'only one' }] }] } }), 422, 'INVALID_TEMPLATE');

      // A failed template message is retried with the same template and parameters.
      const failed = await send('whatsapp', { to: '+15005550001', template: { name: 'order_shipped', language: 'en', components: params } });
      await waitForStatus(failed.id, 'failed');
      const retried = await t.rest('POST', `/v1/messages/${failed.id}/retry`, { key: org.testKey });
      expect(retried.status, retried.text).toBe(201);
      expect(retried.body.data).toMatchObject({ original_message_id: failed.id, body: 'Hi Ana, order A-17 has shipped', template_id: approvedId, status: 'queued' });

      // Listed among the WhatsApp templates with their statuses.
      const list = await t.rest('GET', '/v1/whatsapp/templates?limit=100', { key: org.testKey });
      const byName = Object.fromEntries((list.body.data as { name: string; status: string }[]).map((x) => [x.name, x.status]));
      expect(byName).toMatchObject({ draft_note: 'draft', reject_promo: 'rejected', order_shipped: 'approved' });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('senders', () => {
    it('live mode: SMS has no provider (503) and email has no SMTP (503)', async () => {
      const before = await counts(org.orgId);
      const s = expectError(await post('/v1/messages/sms', { to: phone(), body: 'live' }, org.liveKey), 503, 'CHANNEL_UNAVAILABLE');
      expect(s.error.details.channel).toBe('sms');
      expectError(await post('/v1/messages/email', { to: email(), subject: 's', text: 'live' }, org.liveKey), 503, 'CHANNEL_UNAVAILABLE');
      expectError(await post('/v1/messages/whatsapp', { to: phone(), text: { body: 'live' } }, org.liveKey), 503, 'CHANNEL_UNAVAILABLE');
      expectGqlError(await gql('mutation { sendSms(input: { to: "+14155550100", body: "live" }) { id } }', undefined, org.liveKey), 'CHANNEL_UNAVAILABLE');
      expect(await counts(org.orgId)).toEqual(before);
    });

    it('from must be an owned sender; added senders are used, the default when from is omitted', async () => {
      const s = await t.createOrg('enterprise', 'Senders org');
      const k = s.testKey;
      // Fresh test org: the sandbox sender is the default.
      expect((await send('sms', { to: phone(), body: 'x' }, k)).from).toBe(MAGIC.sandboxSms);
      expect((await send('sms', { to: phone(), body: 'x', from: MAGIC.sandboxSms }, k)).from).toBe(MAGIC.sandboxSms);

      const before = await counts(s.orgId);
      const notOwned = phone();
      const e = expectError(await post('/v1/messages/sms', { to: phone(), body: 'x', from: notOwned }, k), 422, 'SENDER_NOT_CONFIGURED');
      expect(e.error.details.field).toBe('from');
      expectError(await post('/v1/messages/email', { to: email(), subject: 's', text: 'x', from: 'someone@example.com' }, k), 422, 'SENDER_NOT_CONFIGURED');
      expect(await counts(s.orgId)).toEqual(before);

      const address = phone();
      const added = await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address } });
      expect(added.status, added.text).toBe(201);
      expect(added.body.data).toMatchObject({ channel: 'sms', address, is_default: true, mode: 'test' });

      const fromIt = await send('sms', { to: phone(), body: 'x', from: address }, k);
      expect(fromIt.from).toBe(address);
      await waitForStatus(fromIt.id, 'delivered');
      // The added sender is now the default.
      expect((await send('sms', { to: phone(), body: 'x' }, k)).from).toBe(address);
      // A second, explicitly non-default sender does not change that; a new default does.
      const second = phone();
      expect((await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address: second, is_default: false } })).status).toBe(201);
      expect((await send('sms', { to: phone(), body: 'x' }, k)).from).toBe(address);
      const third = phone();
      expect((await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address: third, is_default: true } })).status).toBe(201);
      expect((await send('sms', { to: phone(), body: 'x' }, k)).from).toBe(third);

      // Email sender, addressed case-insensitively.
      const mailFrom = email('noreply');
      expect((await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'email', address: mailFrom.toUpperCase() } })).body.data.address).toBe(mailFrom);
      expect((await send('email', { to: email(), subject: 's', text: 'x', from: mailFrom.toUpperCase() }, k)).from).toBe(mailFrom);

      // Duplicates are 409, also through GraphQL.
      expectError(await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address } }), 409, 'ALREADY_EXISTS');
      expectGqlError(await gql('mutation($a: String!) { addMessageSender(channel: sms, address: $a) { id } }', { a: address }, k), 'ALREADY_EXISTS');
      expectError(await t.rest('POST', '/v1/messages/senders', { key: k, body: { channel: 'sms', address: 'not a phone' } }), 422, 'INVALID_PHONE_NUMBER');

      const list = await t.rest('GET', '/v1/messages/senders?channel=sms', { key: k });
      expect(list.status).toBe(200);
      expect((list.body.data as { address: string; is_default: boolean }[]).map((x) => [x.address, x.is_default])).toEqual([[address, false], [second, false], [third, true]]);

      // Another organization cannot send from these senders.
      expectError(await post('/v1/messages/sms', { to: phone(), body: 'x', from: address }), 422, 'SENDER_NOT_CONFIGURED');

      // Removing a sender: it can no longer be used.
      const removed = await t.rest('DELETE', `/v1/messages/senders/${added.body.data.id}`, { key: k });
      expect(removed.status).toBe(204);
      expectError(await post('/v1/messages/sms', { to: phone(), body: 'x', from: address }, k), 422, 'SENDER_NOT_CONFIGURED');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('listing', () => {
    let l: TestOrg;
    const a = phone();
    const b = phone();
    const [x, y] = [email('x'), email('y')];
    const ids: Record<string, string> = {};

    beforeAll(async () => {
      l = await t.createOrg('enterprise', 'Listing org');
      const k = l.testKey;
      ids.sms1 = (await send('sms', { to: a, body: 'one' }, k)).id;
      ids.sms2 = (await send('sms', { to: a, body: 'two' }, k)).id;
      ids.sms3 = (await send('sms', { to: b, body: 'three' }, k)).id;
      ids.smsFailed = (await send('sms', { to: MAGIC.invalidRecipient, body: 'bad' }, k)).id;
      ids.email = (await send('email', { to: [x, y], subject: 's', text: 'mail' }, k)).id;
      const inbound = await t.rest('POST', '/v1/sandbox/inbound', { key: k, body: { channel: 'whatsapp', from: a, body: 'hi there' } });
      expect(inbound.status).toBe(201);
      ids.inbound = inbound.body.data.id;
      ids.wa = (await send('whatsapp', { to: a, text: { body: 'reply' } }, k)).id;
      ids.viber = (await send('viber', { to: b, body: 'vb' }, k)).id;
      await waitForStatus(ids.sms1, 'delivered');
      await waitForStatus(ids.sms2, 'delivered');
      await waitForStatus(ids.sms3, 'delivered');
      await waitForStatus(ids.smsFailed, 'failed');
      await waitForStatus(ids.email, 'delivered');
      await waitForStatus(ids.wa, 'read');
      await waitForStatus(ids.viber, 'read');
    });

    const list = async (query: string) => {
      const res = await t.rest<{ data: MessageView[]; meta: { pagination: { cursor: string | null; has_more: boolean } } }>('GET', `/v1/messages${query}`, { key: l.testKey });
      expect(res.status, res.text).toBe(200);
      return res.body;
    };
    const listIds = async (query: string) => (await list(query)).data.map((m) => m.id);
    const sorted = (...names: string[]) => names.map((n) => ids[n]!).sort().reverse();

    it('lists newest first, summaries without body', async () => {
      const page = await list('?limit=100');
      expect(page.data.map((m) => m.id)).toEqual(Object.values(ids).sort().reverse());
      expect(page.meta.pagination.has_more).toBe(false);
      for (const m of page.data) {
        expect(m).not.toHaveProperty('body');
        expect(m).not.toHaveProperty('status_history');
        expect(m).not.toHaveProperty('metadata');
        expect(m.message_id).toBe(m.id);
      }
      const sms1 = page.data.find((m) => m.id === ids.sms1)!;
      expect(sms1).toMatchObject({ channel: 'sms', direction: 'outbound', to: a, status: 'delivered', encoding: 'GSM-7', segments: 1 });
      expect(page.data.find((m) => m.id === ids.email)!.to).toEqual([x, y]);
    });

    it('filters by channel, status, exact recipient and direction', async () => {
      expect(await listIds('?channel=sms')).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed'));
      expect(await listIds('?channel=whatsapp')).toEqual(sorted('inbound', 'wa'));
      expect(await listIds('?status=failed')).toEqual(sorted('smsFailed'));
      expect(await listIds('?status=read')).toEqual(sorted('wa', 'viber'));
      expect(await listIds('?status=delivered&direction=outbound')).toEqual(sorted('sms1', 'sms2', 'sms3', 'email'));
      expect(await listIds('?direction=inbound')).toEqual(sorted('inbound'));
      expect(await listIds(`?to=${encodeURIComponent(a)}`)).toEqual(sorted('sms1', 'sms2', 'wa'));
      // A '+' sent unencoded arrives as a space; it is still the same number.
      expect(await listIds(`?to=${a}`)).toEqual(sorted('sms1', 'sms2', 'wa'));
      expect(await listIds(`?to=${encodeURIComponent(a)}&channel=sms`)).toEqual(sorted('sms1', 'sms2'));
      expect(await listIds(`?to=${encodeURIComponent(b)}`)).toEqual(sorted('sms3', 'viber'));
      expect(await listIds(`?to=${encodeURIComponent(y.toUpperCase())}`)).toEqual(sorted('email'));
      expect(await listIds(`?to=${encodeURIComponent(a.slice(0, -1))}`)).toEqual([]);
      expect(await listIds('?channel=rcs')).toEqual([]);
      expectError(await t.rest('GET', '/v1/messages?channel=fax', { key: l.testKey }), 422, 'VALIDATION_ERROR');
      expectError(await t.rest('GET', '/v1/messages?colour=red', { key: l.testKey }), 400, 'VALIDATION_ERROR');
    });

    it('pages with a cursor, also under a filter', async () => {
      const all = Object.values(ids).sort().reverse();
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let i = 0; i < 10; i++) {
        const page: Awaited<ReturnType<typeof list>> = await list(`?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(page.data.length).toBeLessThanOrEqual(3);
        seen.push(...page.data.map((m) => m.id));
        if (!page.meta.pagination.has_more) break;
        cursor = page.meta.pagination.cursor;
        expect(cursor).toBeTruthy();
      }
      expect(seen).toEqual(all);

      const first = await list('?channel=sms&limit=2');
      expect(first.data.map((m) => m.id)).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed').slice(0, 2));
      expect(first.meta.pagination.has_more).toBe(true);
      const second = await list(`?channel=sms&limit=2&cursor=${encodeURIComponent(first.meta.pagination.cursor!)}`);
      expect(second.data.map((m) => m.id)).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed').slice(2));
      expect(second.meta.pagination.has_more).toBe(false);
      // The cursor is bound to its filters.
      expectError(await t.rest('GET', `/v1/messages?channel=email&limit=2&cursor=${encodeURIComponent(first.meta.pagination.cursor!)}`, { key: l.testKey }), 400, 'INVALID_CURSOR');
    });

    it('GraphQL messages(...) returns the same results', async () => {
      const q = `query($channel: Channel, $status: MessageStatus, $to: String, $direction: MessageDirection, $first: Int, $after: String) {
        messages(channel: $channel, status: $status, to: $to, direction: $direction, first: $first, after: $after) {
          edges { node { id channel status to direction } } pageInfo { hasNextPage endCursor }
        }
      }`;
      const gIds = async (vars: Record<string, unknown>) => {
        const r = await gql(q, { first: 50, ...vars }, l.testKey);
        expect(r.body.errors, r.text).toBeUndefined();
        return (r.body.data.messages.edges as { node: { id: string } }[]).map((e) => e.node.id);
      };
      expect(await gIds({})).toEqual(await listIds('?limit=50'));
      expect(await gIds({ channel: 'sms' })).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed'));
      expect(await gIds({ status: 'failed' })).toEqual(sorted('smsFailed'));
      expect(await gIds({ to: a })).toEqual(sorted('sms1', 'sms2', 'wa'));
      expect(await gIds({ direction: 'inbound' })).toEqual(sorted('inbound'));
      expect(await gIds({ status: 'delivered', direction: 'outbound' })).toEqual(sorted('sms1', 'sms2', 'sms3', 'email'));

      const p1 = await gql(q, { channel: 'sms', first: 2 }, l.testKey);
      expect(p1.body.data.messages.pageInfo.hasNextPage).toBe(true);
      const p2 = await gql(q, { channel: 'sms', first: 2, after: p1.body.data.messages.pageInfo.endCursor }, l.testKey);
      expect([...p1.body.data.messages.edges, ...p2.body.data.messages.edges].map((e: { node: { id: string } }) => e.node.id)).toEqual(sorted('sms1', 'sms2', 'sms3', 'smsFailed'));
      expect(p2.body.data.messages.pageInfo.hasNextPage).toBe(false);
    });

    it('other organizations see none of these messages', async () => {
      const res = await t.rest('GET', `/v1/messages?to=${encodeURIComponent(a)}`, { key: org.testKey });
      expect(res.body.data).toEqual([]);
      expectError(await t.rest('GET', `/v1/messages/${ids.sms1}`, { key: org.testKey }), 404, 'NOT_FOUND');
      expectError(await t.rest('POST', `/v1/messages/${ids.smsFailed}/retry`, { key: org.testKey }), 404, 'NOT_FOUND');
      // Nor does the same organization's live mode.
      const live = await t.rest('GET', '/v1/messages', { key: l.liveKey });
      expect(live.body.data).toEqual([]);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('durability and idempotency', () => {
    it('each accepted message has exactly one usage entry and one message.queued event', async () => {
      const sms = await send('sms', { to: phone(), body: 'a'.repeat(200) });
      expect(sms.segments).toBe(2);
      const mail = await send('email', { to: [email(), email(), email()], subject: 's', text: 'x' });
      const viber = await send('viber', { to: phone(), body: 'v' });
      const expected: [string, string, number][] = [[sms.id, 'sms.segment', 2], [mail.id, 'email.recipient', 3], [viber.id, 'viber.message', 1]];
      for (const [id, kind, quantity] of expected) {
        const usage = await t.db.query('select kind, quantity, mode, context, organization_id from usage_entries where resource_id = $1', [id]);
        expect(usage.rows).toEqual([{ kind, quantity, mode: 'test', context: 'messaging', organization_id: org.orgId }]);
        const queued = await t.db.query(`select sequence from events where resource_id = $1 and type = 'message.queued'`, [id]);
        expect(queued.rows).toEqual([{ sequence: 1 }]);
      }
      // Delivery does not add usage.
      await waitForStatus(sms.id, 'delivered');
      const after = await t.db.query('select count(*)::int as n from usage_entries where resource_id = $1', [sms.id]);
      expect(after.rows[0].n).toBe(1);
    });

    it('concurrent sends are group-committed: each has its row, event, usage entry and job, and is delivered', async () => {
      const recipients = Array.from({ length: 40 }, () => phone());
      const accepted = await Promise.all(recipients.map((to, i) => send('sms', { to, body: `batch ${i}` })));
      const ids = accepted.map((m) => m.id);
      expect(new Set(ids).size).toBe(40);
      const counts = await t.db.query(
        `select (select count(*)::int from messages where id = any($1)) as messages,
                (select count(*)::int from events where resource_id = any($1) and type = 'message.queued') as events,
                (select count(*)::int from usage_entries where resource_id = any($1)) as usage,
                (select count(*)::int from pgboss.job where name = 'messaging.deliver' and data->'data'->>'messageId' = any($1)) as jobs`,
        [ids],
      );
      expect(counts.rows[0]).toEqual({ messages: 40, events: 40, usage: 40, jobs: 40 });
      for (const [i, m] of accepted.entries()) expect(m.to).toBe(recipients[i]);
      for (const id of ids) await waitForStatus(id, 'delivered');
    });

    it('a delivery job that runs again sends nothing more', async () => {
      const m = await send('sms', { to: phone(), body: 'once' });
      await waitForStatus(m.id, 'delivered');
      const scope = systemScope(org.orgId, 'test', 'enterprise', 'req_test_redeliver');
      const jobId = await t.app.jobs.enqueue('messaging.deliver', { messageId: m.id }, { scope });
      expect(jobId).toBeTruthy();
      await eventually('second delivery job to complete', async () => {
        const job = await t.app.jobs.boss.getJobById('messaging.deliver', jobId!);
        return job?.state === 'completed' ? true : undefined;
      });
      const sends = await t.db.query('select provider_message_id from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sends.rowCount).toBe(1);
      const got = await getMessage(m.id);
      expect(got.status).toBe('delivered');
      expect(got.status_history!.filter((h) => h.status === 'sent')).toHaveLength(1);
      const events = await t.db.query(`select count(*)::int as n from events where resource_id = $1 and type = 'message.sent'`, [m.id]);
      expect(events.rows[0].n).toBe(1);
    });

    it('a send repeated after a lost acknowledgement reuses the provider id (message id is the idempotency key)', async () => {
      // Simulates a worker that crashed after the provider accepted the send but before recording it.
      const m = await send('sms', { to: MAGIC.noReports, body: 'crash' });
      await waitForStatus(m.id, 'sent');
      const first = await t.db.query<{ provider_message_id: string }>('select provider_message_id from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(first.rowCount).toBe(1);
      await t.db.query(
        `update messages set status = 'queued', provider = null, provider_message_id = null, sent_at = null,
           status_history = jsonb_build_array(status_history->0) where id = $1`, [m.id]);
      const jobId = await t.app.jobs.enqueue('messaging.deliver', { messageId: m.id }, { scope: systemScope(org.orgId, 'test', 'enterprise', 'req_test_crash') });
      expect(jobId).toBeTruthy();
      await waitForStatus(m.id, 'sent');
      const sends = await t.db.query<{ provider_message_id: string }>('select provider_message_id from sandbox_sends where idempotency_key = $1', [m.id]);
      expect(sends.rows).toEqual(first.rows);
      const row = await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id]);
      expect(row.rows[0]!.provider_message_id).toBe(first.rows[0]!.provider_message_id);
    });

    it('events of a delivered message are queued, sent, delivered with increasing sequence', async () => {
      const m = await send('sms', { to: phone(), body: 'events' });
      await waitForStatus(m.id, 'delivered');
      const rows = await t.db.query<{ type: string; sequence: number; data: Record<string, unknown>; organization_id: string; mode: string }>(
        'select type, sequence, data, organization_id, mode from events where resource_id = $1 order by sequence, id', [m.id]);
      expect(rows.rows.map((r) => r.type)).toEqual(['message.queued', 'message.sent', 'message.delivered']);
      const seqs = rows.rows.map((r) => r.sequence);
      expect(seqs.every((s, i) => i === 0 || s > seqs[i - 1]!)).toBe(true);
      for (const r of rows.rows) {
        expect(r).toMatchObject({ organization_id: org.orgId, mode: 'test' });
        expect(r.data).toMatchObject({ message_id: m.id, channel: 'sms', direction: 'outbound' });
      }
      expect(rows.rows.map((r) => r.data.status)).toEqual(['queued', 'sent', 'delivered']);

      const failed = await send('sms', { to: MAGIC.invalidRecipient, body: 'x' });
      await waitForStatus(failed.id, 'failed');
      const f = await t.db.query<{ type: string; data: Record<string, unknown> }>('select type, data from events where resource_id = $1 order by sequence', [failed.id]);
      expect(f.rows.map((r) => r.type)).toEqual(['message.queued', 'message.failed']);
      expect(f.rows[1]!.data.error_code).toBe('INVALID_RECIPIENT');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('provider callbacks', () => {
    const sign = (raw: string, secret = t.config.providerSecret('sandbox')) => `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
    const callback = (payload: unknown, signature?: string, provider = 'sandbox') => {
      const raw = JSON.stringify(payload);
      return t.rest('POST', `/v1/providers/${provider}/callbacks`, {
        rawBody: raw, headers: { 'Content-Type': 'application/json', ...(signature === undefined ? { 'X-Provider-Signature': sign(raw) } : signature ? { 'X-Provider-Signature': signature } : {}) },
      });
    };

    it('status reports move a message forward, never backwards or out of delivered', async () => {
      const m = await send('sms', { to: MAGIC.noReports, body: 'callback' });
      await waitForStatus(m.id, 'sent');
      const row = await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id]);
      const pmid = row.rows[0]!.provider_message_id;
      expect(pmid).toMatch(/^SBX/);

      const delivered = await callback({ type: 'status', provider_message_id: pmid, status: 'delivered' });
      expect(delivered.status, delivered.text).toBe(200);
      expect(delivered.body.data).toEqual({ accepted: true, applied: true });
      const got = await getMessage(m.id);
      expect(got.status).toBe('delivered');
      expect(got.delivered_at).not.toBeNull();
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);

      const late = await callback({ type: 'status', provider_message_id: pmid, status: 'sent' });
      expect(late.status).toBe(200);
      expect(late.body.data.applied).toBe(false);
      const failed = await callback({ type: 'status', provider_message_id: pmid, status: 'failed', error_code: 'CARRIER_REJECTED' });
      expect(failed.body.data.applied).toBe(false);
      const read = await callback({ type: 'status', provider_message_id: pmid, status: 'read' });
      expect(read.body.data.applied).toBe(false); // SMS has no reads

      const after = await getMessage(m.id);
      expect(after).toMatchObject({ status: 'delivered', error_code: null, failed_at: null });
      expect(after.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', 'delivered']);

      const unknown = await callback({ type: 'status', provider_message_id: 'SBX000000000000000000000000', status: 'delivered' });
      expect(unknown.status).toBe(200);
      expect(unknown.body.data.applied).toBe(false);
    });

    it('concurrent duplicate and racing reports apply once each, in order: one history entry and one event per status', async () => {
      const m = await send('sms', { to: MAGIC.noReports, body: 'racing reports' });
      await waitForStatus(m.id, 'sent');
      const pmid = (await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id])).rows[0]!.provider_message_id;
      const reports = await Promise.all([
        ...Array.from({ length: 6 }, () => callback({ type: 'status', provider_message_id: pmid, status: 'delivered' })),
        ...Array.from({ length: 3 }, () => callback({ type: 'status', provider_message_id: pmid, status: 'failed', error_code: 'CARRIER_REJECTED' })),
      ]);
      expect(reports.every((r) => r.status === 200)).toBe(true);
      // Exactly one report won: either delivered or failed, never both, never twice.
      expect(reports.filter((r) => r.body.data.applied === true)).toHaveLength(1);
      const got = await getMessage(m.id);
      expect(got.status_history!.map((h) => h.status)).toEqual(['queued', 'sent', got.status]);
      const events = await t.db.query<{ type: string; sequence: number }>('select type, sequence from events where resource_id = $1 order by sequence', [m.id]);
      expect(events.rows).toEqual([{ type: 'message.queued', sequence: 1 }, { type: 'message.sent', sequence: 2 }, { type: `message.${got.status}`, sequence: 3 }]);
    });

    it('a failed report on a sent message fails it with the provider code', async () => {
      const m = await send('sms', { to: MAGIC.noReports, body: 'to fail' });
      await waitForStatus(m.id, 'sent');
      const pmid = (await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id])).rows[0]!.provider_message_id;
      const res = await callback({ type: 'status', provider_message_id: pmid, status: 'failed', error_code: 'CARRIER_REJECTED' });
      expect(res.body.data.applied).toBe(true);
      const got = await getMessage(m.id);
      expect(got).toMatchObject({ status: 'failed', error_code: 'CARRIER_REJECTED' });
      // Out of failed: nothing moves it.
      expect((await callback({ type: 'status', provider_message_id: pmid, status: 'delivered' })).body.data.applied).toBe(false);
      expect((await getMessage(m.id)).status).toBe('failed');
    });

    it('rejects a missing or wrong signature with 401 UNAUTHORIZED', async () => {
      const m = await send('sms', { to: MAGIC.noReports, body: 'sig' });
      await waitForStatus(m.id, 'sent');
      const pmid = (await t.db.query<{ provider_message_id: string }>('select provider_message_id from messages where id = $1', [m.id])).rows[0]!.provider_message_id;
      const payload = { type: 'status', provider_message_id: pmid, status: 'delivered' };
      expectError(await callback(payload, `sha256=${'0'.repeat(64)}`), 401, 'UNAUTHORIZED');
      expectError(await callback(payload, ''), 401, 'UNAUTHORIZED');
      expectError(await callback(payload, sign(JSON.stringify(payload), 'some-other-secret')), 401, 'UNAUTHORIZED');
      expectError(await callback(payload, sign(JSON.stringify({ ...payload, status: 'sent' }))), 401, 'UNAUTHORIZED');
      // Signed with the sandbox's secret but posted as another provider.
      expectError(await callback(payload, sign(JSON.stringify(payload)), 'othercarrier'), 401, 'UNAUTHORIZED');
      expect((await getMessage(m.id)).status).toBe('sent');
    });

    it('an inbound message goes to the organization that owns the receiving sender', async () => {
      const owner = await t.createOrg('enterprise', 'Inbound owner');
      const outsider = await t.createOrg('enterprise', 'Inbound outsider');
      const address = phone();
      expect((await t.rest('POST', '/v1/messages/senders', { key: owner.testKey, body: { channel: 'sms', address } })).status).toBe(201);
      const from = phone();
      const res = await callback({ type: 'inbound', channel: 'sms', from, to: address, body: 'STOP' });
      expect(res.status, res.text).toBe(200);
      const id = res.body.data.message_id as string;
      expect(id).toMatch(/^msg_/);

      const listed = await t.rest<{ data: MessageView[] }>('GET', '/v1/messages?direction=inbound', { key: owner.testKey });
      expect(listed.body.data.map((m) => m.id)).toEqual([id]);
      expect(listed.body.data[0]).toMatchObject({ direction: 'inbound', channel: 'sms', from, to: address, status: 'delivered' });
      expect((await getMessage(id, owner.testKey)).body).toBe('STOP');

      expect((await t.rest('GET', '/v1/messages?direction=inbound', { key: outsider.testKey })).body.data).toEqual([]);
      expect((await t.rest('GET', '/v1/messages?direction=inbound', { key: owner.liveKey })).body.data).toEqual([]);
      expectError(await t.rest('GET', `/v1/messages/${id}`, { key: outsider.testKey }), 404, 'NOT_FOUND');

      // No organization owns the address: 404, nothing stored.
      const before = await t.db.query('select count(*)::int as n from messages');
      expectError(await callback({ type: 'inbound', channel: 'sms', from, to: phone(), body: 'x' }), 404, 'NOT_FOUND');
      expect((await t.db.query('select count(*)::int as n from messages')).rows).toEqual(before.rows);
    });

    it('an inbound WhatsApp callback opens the session window', async () => {
      const owner = await t.createOrg('enterprise', 'WA inbound owner');
      const address = phone();
      expect((await t.rest('POST', '/v1/messages/senders', { key: owner.testKey, body: { channel: 'whatsapp', address } })).status).toBe(201);
      const customer = phone();
      expectError(await post('/v1/messages/whatsapp', { to: customer, text: { body: 'too early' } }, owner.testKey), 422, 'TEMPLATE_NOT_APPROVED');
      expect((await callback({ type: 'inbound', channel: 'whatsapp', from: customer, to: address, body: 'hi' })).status).toBe(200);
      const m = await send('whatsapp', { to: customer, text: { body: 'now allowed' } }, owner.testKey);
      expect(m.from).toBe(address);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('WhatsApp 24-hour window and queued messages (manual clock, no workers)', () => {
    let m: TestApp;
    let clock: ManualClock;
    let o: TestOrg;

    beforeAll(async () => {
      m = await startTestApp();
      clock = m.clock as ManualClock;
      o = await m.createOrg('enterprise', 'Manual clock org');
    });
    afterAll(async () => { await m?.close(); });
    beforeEach(() => { clock.advance(1_000); });

    const HOUR = 3600_000;
    const sendWa = (to: string, body = 'free-form') => m.rest('POST', '/v1/messages/whatsapp', { key: o.testKey, body: { to, text: { body } } });

    it('free-form is allowed within 24 h of the last inbound message and refused after', async () => {
      const customer = phone();
      const stranger = phone();
      const inbound = await m.rest('POST', '/v1/sandbox/inbound', { key: o.testKey, body: { channel: 'whatsapp', from: customer, body: 'hi' } });
      expect(inbound.status, inbound.text).toBe(201);
      expect(inbound.body.data).toMatchObject({ direction: 'inbound', channel: 'whatsapp', from: customer, status: 'delivered' });

      clock.advance(23 * HOUR);
      const ok = await sendWa(customer);
      expect(ok.status, ok.text).toBe(201);
      expect(ok.body.data.status).toBe('queued');
      expectError(await sendWa(stranger), 422, 'TEMPLATE_NOT_APPROVED');

      clock.advance(HOUR - 2_000);
      expect((await sendWa(customer)).status).toBe(201); // just under 24 h

      clock.advance(HOUR + 2_000); // T + 25 h
      const late = expectError(await sendWa(customer), 422, 'TEMPLATE_NOT_APPROVED');
      expect(late.error.details.session_open).toBe(false);
      expectError(await m.rest('POST', '/v1/messages/whatsapp', { key: o.testKey, body: { to: customer, media: { type: 'image', url: 'https://example.com/a.jpg' } } }), 422, 'TEMPLATE_NOT_APPROVED');
      expectGqlError(await m.gql('mutation($to: String!) { sendWhatsApp(input: { to: $to, text: { body: "late" } }) { id } }', { to: customer }, { key: o.testKey }), 'TEMPLATE_NOT_APPROVED');

      // A new inbound message reopens the window.
      clock.advance(1_000);
      expect((await m.gql('mutation($from: String!) { simulateInboundMessage(channel: whatsapp, from: $from, body: "back") { id direction } }', { from: customer }, { key: o.testKey })).body.data.simulateInboundMessage.direction).toBe('inbound');
      clock.advance(1_000);
      expect((await sendWa(customer)).status).toBe(201);
    });

    it('a template still pending approval is TEMPLATE_NOT_APPROVED', async () => {
      const tpl = await m.rest('POST', '/v1/messages/templates', { key: o.testKey, body: { channel: 'whatsapp', name: 'pending_one', content: 'Hello {{1}}' } });
      expect(tpl.status, tpl.text).toBe(201);
      expect(tpl.body.data.status).toBe('pending_approval');
      const res = expectError(await m.rest('POST', '/v1/messages/whatsapp', {
        key: o.testKey, body: { to: phone(), template: { name: 'pending_one', language: 'en', components: [{ type: 'body', parameters: [{ type: 'text', text: 'x' }] }] } },
      }), 422, 'TEMPLATE_NOT_APPROVED');
      expect(res.error.details.status).toBe('pending_approval');
    });

    it('retrying a queued message is a CONFLICT', async () => {
      const q = await m.rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: phone(), body: 'stays queued' } });
      expect(q.status).toBe(201);
      const got = await m.rest('GET', `/v1/messages/${q.body.data.id}`, { key: o.testKey });
      expect(got.body.data.status).toBe('queued');
      const c = expectError(await m.rest('POST', `/v1/messages/${q.body.data.id}/retry`, { key: o.testKey }), 409, 'CONFLICT');
      expect(c.error.details.status).toBe('queued');
      expectGqlError(await m.gql('mutation($id: ID!) { retryMessage(id: $id) { id } }', { id: q.body.data.id }, { key: o.testKey }), 'CONFLICT');
    });
  });
});
