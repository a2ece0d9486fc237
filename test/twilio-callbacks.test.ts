/**
 * Twilio-format callbacks: a message's StatusCallback and a number's SmsUrl given through the
 * Twilio-compatible surface are posted form-encoded with X-Twilio-Signature under the account's
 * auth token, checked here with the SDK's own `twilio.validateRequest`; a failed attempt is
 * retried on the webhooks context's schedule. Sandbox providers, workers, the real database.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import twilio from 'twilio';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { LIFECYCLE_ENV, MAGIC, phone } from './helpers/messaging.ts';
import { APP_ENV, eventually } from './helpers/numbers.ts';
import { startReceiver } from './helpers/receiver.ts';
import { formOf, issuedClient, twilioClient } from './helpers/twilio.ts';

describe('Twilio-format signed callbacks', () => {
  let t: TestApp;
  let org: TestOrg;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  /** The account's credentials, issued once (a newer token signs the account's callbacks within seconds). */
  let issued: Awaited<ReturnType<typeof issuedClient>>;
  /** Paths answered 500 (a customer endpoint that is down). */
  const failing = new Set<string>();
  /** Paths answered with a TwiML document (an SmsUrl that replies). */
  const twiml = new Map<string, string>();
  const app = useFileApp(async () => {
    const app = await startTestApp({ workers: true, clock: systemClock, env: { ...LIFECYCLE_ENV, ...APP_ENV } });
    return { t: app, org: await app.createOrg('enterprise', 'Twilio callbacks org'), close: () => app.close() };
  });
  beforeAll(async () => {
    ({ t, org } = app());
    receiver = await startReceiver({
      reply: (h) => (failing.has(h.path) ? { status: 500 } : twiml.has(h.path) ? { status: 200, body: twiml.get(h.path), headers: { 'Content-Type': 'application/xml' } } : undefined),
    });
    issued = await issuedClient(t, org);
  });
  afterAll(() => receiver.close());
  const hitsAt = (path: string) => receiver.hits.filter((h) => h.path === path);

  it('posts each status of a message to its StatusCallback, signed with the auth token', async () => {
    const { client, sid, authToken } = issued;
    const path = '/status/one?tag=a%20b';
    const m = await client.messages.create({ to: phone(), from: MAGIC.sandboxSms, body: 'with a status callback', statusCallback: `${receiver.url}${path}` });
    const hits = await eventually('queued, sent and delivered', () => {
      const got = hitsAt(path);
      return got.some((h) => new URLSearchParams(h.body).get('MessageStatus') === 'delivered') ? got : undefined;
    });
    for (const h of hits) {
      expect(h.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
      const { url, params, signature } = formOf(receiver.url, h);
      expect(twilio.validateRequest(authToken, signature, url, params), h.body).toBe(true);
      expect(params).toMatchObject({ AccountSid: sid, MessageSid: m.sid, SmsSid: m.sid, To: m.to, From: MAGIC.sandboxSms, ApiVersion: '2010-04-01' });
      expect(params.SmsStatus).toBe(params.MessageStatus);
      // A tampered parameter (or another token) fails the customer's check.
      expect(twilio.validateRequest(authToken, signature, url, { ...params, MessageStatus: 'failed', SmsStatus: 'failed', To: '+15550000000' })).toBe(false);
      expect(twilio.validateRequest(org.testKey, signature, url, params)).toBe(false);
    }
    const statuses = hits.map((h) => new URLSearchParams(h.body).get('MessageStatus'));
    expect(statuses).toEqual(expect.arrayContaining(['queued', 'sent', 'delivered']));
    // Fetched through the SDK, the message does not show the format marker anywhere.
    expect(JSON.stringify((await client.messages(m.sid).fetch()).toJSON())).not.toContain('#format=');
  });

  it('posts inbound messages to the number\'s SmsUrl in Twilio\'s shape, signed', async () => {
    const { client, sid, authToken } = issued;
    const [listing] = await client.availablePhoneNumbers('US').local.list({ smsEnabled: true, limit: 1 });
    const path = `/sms/${Date.now()}`;
    const n = await client.incomingPhoneNumbers.create({ phoneNumber: listing!.phoneNumber, smsUrl: `${receiver.url}${path}` });
    expect(n.smsUrl).toBe(`${receiver.url}${path}`);
    const from = phone();
    const inbound = await t.rest('POST', '/v1/sandbox/inbound', { key: org.testKey, body: { channel: 'sms', from, to: n.phoneNumber, body: 'Hi from a phone' } });
    expect(inbound.status, inbound.text).toBe(201);
    const [hit] = await eventually('the inbound webhook', () => (hitsAt(path).length ? hitsAt(path) : undefined));
    const { url, params, signature } = formOf(receiver.url, hit!);
    expect(params).toMatchObject({ AccountSid: sid, From: from, To: n.phoneNumber, Body: 'Hi from a phone', SmsStatus: 'received', NumMedia: '0', ApiVersion: '2010-04-01' });
    expect(params.MessageSid).toMatch(/^SM[0-9a-f]{32}$/);
    expect(twilio.validateRequest(authToken, signature, url, params)).toBe(true);
    expect(twilio.validateRequest(authToken, signature, url, { ...params, Body: 'Hi from someone else' })).toBe(false);
    // The inbound message is the one the SDK lists.
    expect((await client.messages(params.MessageSid!).fetch()).body).toBe('Hi from a phone');
  });

  it('carries out the TwiML an SmsUrl answers: <Message> replies (once each), <Redirect> fetches the next document signed', async () => {
    const { client, authToken } = issued;
    const [listing] = await client.availablePhoneNumbers('US').local.list({ smsEnabled: true, limit: 1 });
    const path = `/reply/${Date.now()}`;
    const other = phone();
    twiml.set(path, `<?xml version="1.0" encoding="UTF-8"?><Response><Message>Thanks, we got it</Message><Redirect>${path}/next</Redirect><Message>never sent</Message></Response>`);
    twiml.set(`${path}/next`, `<Response><Message to="${other}"><Body>A copy &amp; a note</Body></Message><Say>not a messaging verb</Say></Response>`);
    const n = await client.incomingPhoneNumbers.create({ phoneNumber: listing!.phoneNumber, smsUrl: `${receiver.url}${path}` });
    const sender = phone();
    const inbound = await t.rest('POST', '/v1/sandbox/inbound', { key: org.testKey, body: { channel: 'sms', from: sender, to: n.phoneNumber, body: 'Hello?' } });
    expect(inbound.status, inbound.text).toBe(201);
    /** What went out to the sender and to the other number (the list filters by To). */
    const replies = async () => [
      ...(await client.messages.list({ to: sender, limit: 20 })), ...(await client.messages.list({ to: other, limit: 20 })),
    ].filter((m) => m.direction === 'outbound-api');
    const sent = await eventually('both replies', async () => {
      const list = await replies();
      return list.length >= 2 ? list : undefined;
    });
    expect(sent.map((m) => [m.from, m.to, m.body]).sort()).toEqual([[n.phoneNumber, other, 'A copy & a note'], [n.phoneNumber, sender, 'Thanks, we got it']].sort());
    // The redirect was fetched with the inbound message's parameters, signed under the auth token.
    const [next] = hitsAt(`${path}/next`);
    const { url, params, signature } = formOf(receiver.url, next!);
    expect(params).toMatchObject({ From: sender, To: n.phoneNumber, Body: 'Hello?', SmsStatus: 'received' });
    expect(twilio.validateRequest(authToken, signature, url, params)).toBe(true);
    // A document carried out again (the delivery retried after a crash) sends nothing twice: replayed here by
    // making the same delivery due again, which posts the same SmsUrl and gets the same answer.
    const delivery = await t.db.query<{ id: string }>('select id from webhook_deliveries where url = $1', [`${receiver.url}${path}#format=twilio`]);
    expect(delivery.rows).toHaveLength(1);
    await t.db.query(`update webhook_deliveries set status = 'failed', next_attempt_at = now() where id = $1`, [delivery.rows[0]!.id]);
    await eventually('the second attempt', () => (hitsAt(path).length >= 2 ? true : undefined));
    await eventually('its redirect', () => (hitsAt(`${path}/next`).length >= 2 ? true : undefined));
    await new Promise((r) => setTimeout(r, 1000));
    expect(await replies()).toHaveLength(2);
  });

  it('retries a failed callback on the webhooks schedule and logs it with the deliveries', async () => {
    const { client } = issued;
    const path = `/down/${Date.now()}`;
    failing.add(path);
    const m = await client.messages.create({ to: phone(), body: 'endpoint down', statusCallback: `${receiver.url}${path}` });
    await eventually('a first attempt', () => (hitsAt(path).length ? true : undefined));
    const row = await eventually('the failed delivery', async () => {
      const r = await t.db.query<{ status: string; attempt: number; next_attempt_at: Date; created_at: Date; payload: string }>(
        'select status, attempt, next_attempt_at, created_at, payload from webhook_deliveries where url = $1 and status = $2', [`${receiver.url}${path}#format=twilio`, 'failed']);
      return r.rows[0];
    });
    expect(row.attempt).toBe(1);
    // The schedule's first retry, a minute later (±5 % jitter).
    expect(row.next_attempt_at.getTime() - row.created_at.getTime()).toBeGreaterThan(50_000);
    expect(new URLSearchParams(row.payload).get('MessageSid')).toBe(m.sid);
  });

  it('sends no signature for an account that has no derived auth token', async () => {
    const other = await t.createOrg('enterprise', 'No token org');
    const { client } = twilioClient(t, other);
    const path = `/unsigned/${Date.now()}`;
    await client.messages.create({ to: phone(), body: 'random key', statusCallback: `${receiver.url}${path}` });
    const [hit] = await eventually('a callback', () => (hitsAt(path).length ? hitsAt(path) : undefined));
    expect(hit!.headers['x-twilio-signature']).toBeUndefined();
    expect(new URLSearchParams(hit!.body).get('MessageStatus')).toBeTruthy();
  });
});
