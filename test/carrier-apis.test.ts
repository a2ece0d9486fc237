/**
 * Live SMS and MMS through the HTTP carrier API connectors (docs/messaging.md, "Carriers"): Twilio, Telnyx and
 * Vonage, each through its official SDK against a local server answering as the vendor's API
 * reference documents (test/helpers/carrierApis.ts). Callbacks are signed as each vendor signs them —
 * Twilio with the SDK's own `getExpectedTwilioSignature`, Telnyx with Ed25519 over `timestamp|body`,
 * Vonage with an HS256 JWT carrying the body's hash — and verified by the app through each SDK's
 * helper. Covers: the send's request shape, sent → delivered by a signed status callback, a forged
 * and a replayed callback (403, nothing changes), a stale Telnyx timestamp, an inbound message with
 * media, MMS media URLs, the vendor's refusal in `error_code`, and failover from a vendor that is
 * down to another kind of connector without a second send.
 */
import { createHash, createHmac, generateKeyPairSync, randomBytes, randomUUID, sign, type KeyObject } from 'node:crypto';
import twilio from 'twilio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { eventually, expectError } from './helpers/assertions.ts';
import { startCarrierApis, type CarrierApis, type VendorRequest } from './helpers/carrierApis.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';

type Vendor = 'twilio' | 'telnyx' | 'vonage';
const VENDORS: Vendor[] = ['twilio', 'telnyx', 'vonage'];

let t: TestApp;
let apis: CarrierApis;

const TWILIO_SID = `AC${'1'.repeat(32)}`;
const TWILIO_TOKEN = 'twilio-auth-token-secret';
const TELNYX_KEY = 'KEYtelnyx-api-key-secret';
const telnyxKeys = generateKeyPairSync('ed25519');
const TELNYX_PUBLIC = Buffer.from(telnyxKeys.publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64');
const VONAGE_KEY = 'abcd1234';
const VONAGE_SECRET = 'vonage-api-secret';
const VONAGE_SIGNATURE = 'vonage-signature-secret-0123456789';

const SECRETS: Record<Vendor, string[]> = { twilio: [TWILIO_TOKEN], telnyx: [TELNYX_KEY], vonage: [VONAGE_SECRET, VONAGE_SIGNATURE] };
const SETTINGS: Record<Vendor, Record<string, unknown>> = {
  twilio: { account_sid: TWILIO_SID, auth_token: TWILIO_TOKEN },
  telnyx: { api_key: TELNYX_KEY, public_key: TELNYX_PUBLIC },
  vonage: { api_key: VONAGE_KEY, api_secret: VONAGE_SECRET, signature_secret: VONAGE_SIGNATURE },
};

beforeAll(async () => {
  apis = await startCarrierApis();
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: {
      MESSAGING_TWILIO_API_URL: apis.url, MESSAGING_TELNYX_API_URL: `${apis.url}/v2`, MESSAGING_VONAGE_API_URL: apis.url,
      MESSAGING_SEND_ATTEMPTS: '2', MESSAGING_RETRY_DELAY_SECONDS: '1',
    },
  });
});

afterAll(async () => {
  await t?.close();
  await apis?.close();
});

async function message(org: TestOrg, id: string) {
  const r = await t.rest('GET', `/v1/messages/${id}`, { key: org.liveKey });
  expect(r.status, r.text).toBe(200);
  return r.body.data;
}

function until(org: TestOrg, id: string, status: string) {
  return eventually(`${id} ${status}`, async () => {
    const m = await message(org, id);
    return m.status === status ? m : undefined;
  }, 15_000);
}

function requestFor(vendor: Vendor, to: string): Promise<VendorRequest> {
  return eventually(`${vendor} request to ${to}`, async () => apis.requests.find((r) => r.vendor === vendor && destination(r) === to));
}

function destination(r: VendorRequest): string {
  if (r.body instanceof URLSearchParams) return r.body.get('To') ?? '';
  const to = String(r.body.to);
  return r.vendor === 'vonage' ? `+${to}` : to;
}

/** A callback of `connector` signed as `vendor` signs it (`forge`: with the wrong key). */
function signedCallback(vendor: Vendor, connector: string, event: 'status' | 'inbound', payload: Record<string, unknown>, opts: { forge?: boolean; timestamp?: number } = {}): { path: string; rawBody: string; headers: Record<string, string> } {
  const path = `/v1/providers/${vendor}/callbacks?connector=${connector}&event=${event}`;
  if (vendor === 'twilio') {
    const params = Object.fromEntries(Object.entries(payload).map(([k, v]) => [k, String(v)]));
    const signature = twilio.getExpectedTwilioSignature(opts.forge ? 'not-the-token' : TWILIO_TOKEN, `${t.config.publicBaseUrl}${path}`, params);
    return { path, rawBody: new URLSearchParams(params).toString(), headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'X-Twilio-Signature': signature } };
  }
  const rawBody = JSON.stringify(payload);
  if (vendor === 'telnyx') {
    const ts = String(opts.timestamp ?? Math.floor(Date.now() / 1000));
    const key: KeyObject = opts.forge ? generateKeyPairSync('ed25519').privateKey : telnyxKeys.privateKey;
    const signature = sign(null, Buffer.from(`${ts}|${rawBody}`), key).toString('base64');
    return { path, rawBody, headers: { 'Content-Type': 'application/json', 'telnyx-signature-ed25519': signature, 'telnyx-timestamp': ts } };
  }
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const claims = { iat: Math.floor(Date.now() / 1000), jti: randomUUID(), iss: 'Vonage', api_key: VONAGE_KEY, application_id: randomUUID(), payload_hash: createHash('sha256').update(rawBody).digest('hex') };
  const unsigned = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`;
  const jwt = `${unsigned}.${createHmac('sha256', opts.forge ? 'not-the-signature-secret' : VONAGE_SIGNATURE).update(unsigned).digest('base64url')}`;
  return { path, rawBody, headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${jwt}` } };
}

function post(cb: ReturnType<typeof signedCallback>): Promise<HttpResponse> {
  return t.rest('POST', cb.path, { rawBody: cb.rawBody, headers: cb.headers });
}

/** The vendor's status report payload for one of its message ids. */
function statusPayload(vendor: Vendor, id: string, to: string, from: string, status: 'delivered' | 'failed'): Record<string, unknown> {
  if (vendor === 'twilio') {
    return { MessageSid: id, SmsSid: id, AccountSid: TWILIO_SID, From: from, To: to, MessageStatus: status === 'delivered' ? 'delivered' : 'undelivered', SmsStatus: status === 'delivered' ? 'delivered' : 'undelivered', ApiVersion: '2010-04-01', ...(status === 'failed' ? { ErrorCode: '30003' } : {}) };
  }
  if (vendor === 'telnyx') {
    return {
      data: {
        event_type: 'message.finalized', id: randomUUID(), occurred_at: new Date().toISOString(), record_type: 'event',
        payload: { id, record_type: 'message', direction: 'outbound', from: { phone_number: from }, to: [{ phone_number: to, status: status === 'delivered' ? 'delivered' : 'delivery_failed' }], errors: status === 'failed' ? [{ code: '40002', title: 'Blocked as spam' }] : [] },
      },
      meta: { attempt: 1, delivered_to: 'https://example.com' },
    };
  }
  return { message_uuid: id, to: to.slice(1), from: from.slice(1), timestamp: new Date().toISOString(), status: status === 'delivered' ? 'delivered' : 'rejected', channel: 'sms', ...(status === 'failed' ? { error: { type: 'https://developer.vonage.com/api-errors/messages#1320', title: 1320, detail: 'Message failed' } } : {}) };
}

function inboundPayload(vendor: Vendor, from: string, to: string, text: string, media: string[]): Record<string, unknown> {
  const id = vendor === 'twilio' ? `SM${randomBytes(16).toString('hex')}` : randomUUID();
  if (vendor === 'twilio') {
    return { MessageSid: id, SmsSid: id, AccountSid: TWILIO_SID, From: from, To: to, Body: text, NumMedia: String(media.length), NumSegments: '1', SmsStatus: 'received', ApiVersion: '2010-04-01', ...Object.fromEntries(media.map((u, i) => [`MediaUrl${i}`, u])) };
  }
  if (vendor === 'telnyx') {
    return { data: { event_type: 'message.received', id: randomUUID(), occurred_at: new Date().toISOString(), record_type: 'event', payload: { id, direction: 'inbound', type: media.length ? 'MMS' : 'SMS', from: { phone_number: from }, to: [{ phone_number: to, status: 'webhook_delivered' }], text, media: media.map((url) => ({ url })) } } };
  }
  return { message_uuid: id, to: to.slice(1), from: from.slice(1), timestamp: new Date().toISOString(), channel: media.length ? 'mms' : 'sms', message_type: media.length ? 'image' : 'text', text, ...(media.length ? { image: { url: media[0] } } : {}) };
}

describe.each(VENDORS)('live SMS and MMS through %s', (vendor) => {
  let org: TestOrg;
  let connectorId: string;
  const sender = { twilio: '+14155550101', telnyx: '+14155550102', vonage: '+14155550103' }[vendor];
  const base = { twilio: 14155551000, telnyx: 14155552000, vonage: 14155553000 }[vendor];
  const to = (n: number) => `+${base + n}`;

  beforeAll(async () => {
    org = await t.createOrg('enterprise', vendor);
    const s = await t.rest('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'sms', address: sender } });
    expect(s.status, s.text).toBe(201);
  });

  it('configures the connector: secrets sealed, never returned; the route sends through it', async () => {
    const created = await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: vendor, kind: vendor, [vendor]: SETTINGS[vendor] } });
    expect(created.status, created.text).toBe(201);
    connectorId = created.body.data.id;
    expect(created.body.data).toMatchObject({ kind: vendor, smpp: null, whatsapp_cloud: null });
    // The URLs to configure at the vendor (the status one is also given with each send).
    const callback = (event: string) => `${t.config.publicBaseUrl}/v1/providers/${vendor}/callbacks?connector=${connectorId}&event=${event}`;
    expect(created.body.data.callbacks).toEqual({ status_url: callback('status'), inbound_url: callback('inbound'), webhook_url: null, verify_token_set: null });
    for (const secret of SECRETS[vendor]) expect(created.text).not.toContain(secret);
    const { rows } = await t.db.query('select sealed_credentials, settings::text as settings from messaging_connectors where id = $1', [connectorId]);
    for (const secret of SECRETS[vendor]) expect(rows[0].sealed_credentials + rows[0].settings).not.toContain(secret);
    const gql = await t.gql('query($id: ID!) { messagingConnector(id: $id) { kind twilio { accountSid } telnyx { publicKey } vonage { apiKey } status { state } callbacks { inboundUrl } } }', { id: connectorId }, { key: org.liveKey });
    expect(gql.body.errors, gql.text).toBeUndefined();
    expect(gql.body.data.messagingConnector.callbacks.inboundUrl).toBe(callback('inbound'));
    expect(gql.body.data.messagingConnector.kind).toBe(vendor);
    expect(gql.body.data.messagingConnector[vendor]).not.toBeNull();
    const route = await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: connectorId, prefix: '+1' } });
    expect(route.status, route.text).toBe(201);
  });

  it('sends an SMS through the SDK; a signed status callback delivers it; a forged and a replayed one answer 403 and change nothing', async () => {
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: to(1), body: `Hello through ${vendor}` } });
    expect(r.status, r.text).toBe(201);
    const req = await requestFor(vendor, to(1));
    if (req.body instanceof URLSearchParams) {
      expect(Object.fromEntries(req.body)).toMatchObject({ To: to(1), From: sender, Body: `Hello through ${vendor}` });
      expect(req.body.get('StatusCallback')).toBe(`${t.config.publicBaseUrl}/v1/providers/twilio/callbacks?connector=${connectorId}&event=status`);
      expect(req.auth).toBe(`Basic ${Buffer.from(`${TWILIO_SID}:${TWILIO_TOKEN}`).toString('base64')}`);
    } else if (vendor === 'telnyx') {
      expect(req.body).toMatchObject({ to: to(1), from: sender, text: `Hello through ${vendor}`, webhook_url: expect.stringContaining(`connector=${connectorId}&event=status`) });
      expect(req.auth).toBe(`Bearer ${TELNYX_KEY}`);
    } else {
      expect(req.body).toMatchObject({ channel: 'sms', message_type: 'text', to: to(1).slice(1), from: sender.slice(1), text: `Hello through ${vendor}`, client_ref: r.body.data.id });
      expect(req.auth).toBe(`Basic ${Buffer.from(`${VONAGE_KEY}:${VONAGE_SECRET}`).toString('base64')}`);
    }
    const sent = await until(org, r.body.data.id, 'sent');
    expect(sent.connector_id).toBe(connectorId);
    const stored = await t.db.query('select provider_message_id from messages where id = $1', [r.body.data.id]);
    expect(stored.rows[0].provider_message_id).toBe(req.id);

    const payload = statusPayload(vendor, req.id, to(1), sender, 'delivered');
    const forged = await post(signedCallback(vendor, connectorId, 'status', payload, { forge: true }));
    expectError(forged, 403, 'FORBIDDEN');
    expect((await message(org, r.body.data.id)).status).toBe('sent');

    const genuine = signedCallback(vendor, connectorId, 'status', payload);
    const ok = await post(genuine);
    expect(ok.status, ok.text).toBe(200);
    const delivered = await message(org, r.body.data.id);
    expect(delivered.status).toBe('delivered');
    expect(delivered.status_history.map((h: { status: string }) => h.status)).toEqual(['queued', 'sent', 'delivered']);
    const events = await t.db.query('select type from events where resource_id = $1 order by sequence', [r.body.data.id]);
    expect(events.rows.map((e) => e.type)).toEqual(['message.queued', 'message.sent', 'message.delivered']);

    expectError(await post(genuine), 403, 'FORBIDDEN');
    const after = await t.db.query('select count(*)::int as n from events where resource_id = $1', [r.body.data.id]);
    expect(after.rows[0].n).toBe(3);
  });

  it('fails a message the vendor refuses with its code; a failed status report keeps the vendor code', async () => {
    apis.refuse.add(to(2));
    const refused = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: to(2), body: 'refused' } });
    const failed = await until(org, refused.body.data.id, 'failed');
    expect(failed.error_code).toBe({ twilio: 'TWILIO_21211', telnyx: 'TELNYX_40310', vonage: 'VONAGE_1150' }[vendor]);

    const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: to(3), body: 'lost' } });
    const req = await requestFor(vendor, to(3));
    await until(org, r.body.data.id, 'sent');
    const ok = await post(signedCallback(vendor, connectorId, 'status', statusPayload(vendor, req.id, to(3), sender, 'failed')));
    expect(ok.status, ok.text).toBe(200);
    const lost = await message(org, r.body.data.id);
    expect(lost.status).toBe('failed');
    expect(lost.error_code).toBe({ twilio: 'TWILIO_30003', telnyx: 'TELNYX_40002', vonage: 'VONAGE_1320' }[vendor]);
  });

  it('sends MMS with its media URLs', async () => {
    const media = ['https://cdn.example.com/cat.jpg'];
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: to(4), body: 'a picture', media_urls: media } });
    expect(r.status, r.text).toBe(201);
    const req = await requestFor(vendor, to(4));
    if (req.body instanceof URLSearchParams) expect(req.body.getAll('MediaUrl')).toEqual(media);
    else if (vendor === 'telnyx') expect(req.body).toMatchObject({ media_urls: media, type: 'MMS', text: 'a picture' });
    else expect(req.body).toMatchObject({ channel: 'mms', message_type: 'image', image: { url: media[0], caption: 'a picture' } });
    await until(org, r.body.data.id, 'sent');
  });

  it('stores a signed inbound message (with media) once; its replay answers 403', async () => {
    const from = to(5);
    const cb = signedCallback(vendor, connectorId, 'inbound', inboundPayload(vendor, from, sender, `hi from ${vendor}`, ['https://media.example.com/in.png']));
    const r = await post(cb);
    expect(r.status, r.text).toBe(200);
    expectError(await post(cb), 403, 'FORBIDDEN');
    const { rows } = await t.db.query(`select body, content, provider from messages where organization_id = $1 and direction = 'inbound' and "from" = $2`, [org.orgId, from]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ body: `hi from ${vendor}`, provider: connectorId, content: { media_urls: ['https://media.example.com/in.png'] } });
    expectError(await post(signedCallback(vendor, connectorId, 'inbound', inboundPayload(vendor, from, sender, 'forged', []), { forge: true })), 403, 'FORBIDDEN');
  });
});

describe('signatures and failover', () => {
  it('refuses a Telnyx callback whose timestamp is past the tolerance, though correctly signed', async () => {
    const org = await t.createOrg('enterprise', 'stale');
    const c = await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: 'telnyx', kind: 'telnyx', telnyx: SETTINGS.telnyx } });
    const cb = signedCallback('telnyx', c.body.data.id, 'inbound', inboundPayload('telnyx', '+14155554001', '+14155554000', 'old', []), { timestamp: Math.floor(Date.now() / 1000) - 600 });
    expectError(await post(cb), 403, 'FORBIDDEN');
  });

  it('fails over from a vendor that is down to another kind of connector, sending once', async () => {
    const org = await t.createOrg('enterprise', 'failover');
    const sender = '+14155555000';
    expect((await t.rest('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'sms', address: sender } })).status).toBe(201);
    const first = await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: 'primary', kind: 'twilio', twilio: SETTINGS.twilio } });
    // The backup through GraphQL: its secrets are write-only there too.
    const created = await t.gql(`mutation($s: VonageConnectorSettingsInput!) { createMessagingConnector(input: { name: "backup", kind: vonage, vonage: $s }) { id kind vonage { apiKey } smpp { host } } }`,
      { s: { apiKey: VONAGE_KEY, apiSecret: VONAGE_SECRET, signatureSecret: VONAGE_SIGNATURE } }, { key: org.liveKey });
    expect(created.body.errors, created.text).toBeUndefined();
    expect(created.body.data.createMessagingConnector).toMatchObject({ kind: 'vonage', vonage: { apiKey: VONAGE_KEY }, smpp: null });
    expect(created.text).not.toContain(VONAGE_SECRET);
    const second = { body: { data: { id: created.body.data.createMessagingConnector.id as string } } };
    await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: first.body.data.id, priority: 1 } });
    await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: second.body.data.id, priority: 2 } });
    apis.unavailable.add('twilio');
    try {
      const r = await t.gql('mutation($to: String!) { sendSms(input: { to: $to, body: "fail over", mediaUrls: ["https://cdn.example.com/f.gif"] }) { id status } }', { to: '+14155555001' }, { key: org.liveKey });
      expect(r.body.errors, r.text).toBeUndefined();
      const sent = await until(org, r.body.data.sendSms.id, 'sent');
      const backup = apis.requests.find((q) => destination(q) === '+14155555001')!;
      expect(backup.body).toMatchObject({ channel: 'mms', message_type: 'image', image: { url: 'https://cdn.example.com/f.gif', caption: 'fail over' } });
      expect(sent.connector_id).toBe(second.body.data.id);
      expect(apis.requests.filter((q) => destination(q) === '+14155555001').map((q) => q.vendor)).toEqual(['vonage']);
      const status = await eventually('twilio degraded', async () => {
        const c = await t.rest('GET', `/v1/messages/connectors/${first.body.data.id}`, { key: org.liveKey });
        return c.body.data.status.state === 'degraded' ? c.body.data.status : undefined;
      });
      expect(status.last_error).toContain('TWILIO_20503');
    } finally {
      apis.unavailable.delete('twilio');
    }
  });

  it('refuses at acceptance an MMS that only SMPP routes could carry', async () => {
    const org = await t.createOrg('enterprise', 'smpp-only');
    const sender = '+14155556000';
    expect((await t.rest('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'sms', address: sender } })).status).toBe(201);
    const c = await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: 'smsc', kind: 'smpp', enabled: true, smpp: { host: '127.0.0.1', port: 9, system_id: 'x', password: 'y' } } });
    await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: c.body.data.id } });
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+14155556001', body: 'pic', media_urls: ['https://cdn.example.com/a.png'] } });
    expect(expectError(r, 503, 'CHANNEL_UNAVAILABLE').error.details).toMatchObject({ mms: true });
  });
});
