/**
 * Live WhatsApp through the WhatsApp Cloud API connector (docs/messaging.md, "Carriers"): plain
 * fetch to a local server answering as Meta's Graph API reference documents
 * (test/helpers/whatsappCloud.ts), webhooks signed as Meta signs them (`X-Hub-Signature-256`:
 * HMAC-SHA256 of the raw body with the app secret; payloads as
 * https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/components shows). Covers the
 * connector's sealed credentials and callback URLs, the subscription handshake, template and
 * session sends (text, media by link) with the 24-hour window, statuses moving forward only, an
 * inbound message opening the window, forged and replayed webhooks (403), Meta's error codes in
 * `error_code`, and a throttled number failing over to the next route without a second send.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { eventually, expectError } from './helpers/assertions.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { startWhatsAppCloudApi, type CloudRequest, type WhatsAppCloudApi } from './helpers/whatsappCloud.ts';

const ACCESS_TOKEN = 'EAAG-whatsapp-access-token-secret';
const APP_SECRET = 'meta-app-secret-0123456789';
const VERIFY_TOKEN = 'verify-token-secret-42';
const PHONE_ID = '106540352242922';
const BACKUP_PHONE_ID = '106540352249999';
const WABA_ID = '102290129340398';
const SENDER = '+14155550188';

let t: TestApp;
let meta: WhatsAppCloudApi;
let org: TestOrg;
let connectorId: string;

const settings = (phoneNumberId = PHONE_ID) => ({ access_token: ACCESS_TOKEN, app_secret: APP_SECRET, verify_token: VERIFY_TOKEN, phone_number_id: phoneNumberId, waba_id: WABA_ID });

beforeAll(async () => {
  meta = await startWhatsAppCloudApi(new Set([ACCESS_TOKEN]));
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: { MESSAGING_WHATSAPP_API_URL: meta.url, MESSAGING_SEND_ATTEMPTS: '2', MESSAGING_RETRY_DELAY_SECONDS: '1', SANDBOX_TEMPLATE_REVIEW_MS: '100' },
  });
  org = await t.createOrg('enterprise', 'whatsapp-cloud');
  const s = await t.rest('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'whatsapp', address: SENDER } });
  expect(s.status, s.text).toBe(201);
});

afterAll(async () => {
  await t?.close();
  await meta?.close();
});

let seq = 0;
const recipient = () => `+1415557${String(1000 + seq++).padStart(4, '0')}`;

async function message(id: string) {
  const r = await t.rest('GET', `/v1/messages/${id}`, { key: org.liveKey });
  expect(r.status, r.text).toBe(200);
  return r.body.data;
}

function until(id: string, status: string) {
  return eventually(`${id} ${status}`, async () => {
    const m = await message(id);
    return m.status === status ? m : undefined;
  }, 15_000);
}

function requestTo(to: string): Promise<CloudRequest> {
  return eventually(`Cloud API request to ${to}`, async () => meta.requests.find((r) => `+${String(r.body.to)}` === to));
}

const webhookPath = (connector: string) => `/v1/providers/whatsapp_cloud/callbacks?connector=${connector}`;

/** A webhook notification as Meta posts it, signed with the app secret (`secret`: another one, a forgery). */
function webhook(connector: string, value: Record<string, unknown>, secret = APP_SECRET, phoneNumberId = PHONE_ID) {
  const rawBody = JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [{ id: WABA_ID, changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: SENDER.slice(1), phone_number_id: phoneNumberId }, ...value } }] }],
  });
  const signature = `sha256=${createHmac('sha256', secret).update(rawBody).digest('hex')}`;
  return { path: webhookPath(connector), rawBody, headers: { 'Content-Type': 'application/json', 'X-Hub-Signature-256': signature } };
}

const post = (cb: ReturnType<typeof webhook>): Promise<HttpResponse> => t.rest('POST', cb.path, { rawBody: cb.rawBody, headers: cb.headers });

const statuses = (id: string, to: string, ...steps: { status: string; errors?: unknown[] }[]) => ({
  statuses: steps.map((s, i) => ({ id, status: s.status, timestamp: String(Math.floor(Date.now() / 1000) + i), recipient_id: to.slice(1), ...(s.errors ? { errors: s.errors } : {}) })),
});

const inbound = (from: string, m: Record<string, unknown>) => ({
  contacts: [{ profile: { name: 'Ana' }, wa_id: from.slice(1) }],
  messages: [{ from: from.slice(1), id: `wamid.${randomBytes(12).toString('base64url')}`, timestamp: String(Math.floor(Date.now() / 1000)), ...m }],
});

describe('WhatsApp Cloud API connector', () => {
  it('configures the connector: every credential sealed and never returned; the API shows the webhook URL to give Meta', async () => {
    const created = await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: 'meta', kind: 'whatsapp_cloud', whatsapp_cloud: settings() } });
    expect(created.status, created.text).toBe(201);
    connectorId = created.body.data.id;
    expect(created.body.data).toMatchObject({
      kind: 'whatsapp_cloud', channel: 'whatsapp', whatsapp_cloud: { api_version: 'v21.0' }, smpp: null,
      callbacks: { webhook_url: `${t.config.publicBaseUrl}${webhookPath(connectorId)}`, verify_token_set: true, status_url: null, inbound_url: null },
    });
    for (const secret of Object.values(settings())) expect(created.text).not.toContain(secret);
    const { rows } = await t.db.query('select sealed_credentials, settings::text as settings from messaging_connectors where id = $1', [connectorId]);
    for (const secret of Object.values(settings())) expect(rows[0].sealed_credentials + rows[0].settings).not.toContain(secret);

    const gql = await t.gql('query($id: ID!) { messagingConnector(id: $id) { kind channel whatsappCloud { apiVersion } callbacks { webhookUrl verifyTokenSet statusUrl } } }', { id: connectorId }, { key: org.liveKey });
    expect(gql.body.errors, gql.text).toBeUndefined();
    expect(gql.body.data.messagingConnector).toEqual({
      kind: 'whatsapp_cloud', channel: 'whatsapp', whatsappCloud: { apiVersion: 'v21.0' },
      callbacks: { webhookUrl: `${t.config.publicBaseUrl}${webhookPath(connectorId)}`, verifyTokenSet: true, statusUrl: null },
    });
    // The route takes the connector's channel.
    const route = await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: connectorId, priority: 1 } });
    expect(route.status, route.text).toBe(201);
    expect(route.body.data.channel).toBe('whatsapp');
    // A WhatsApp Cloud connector carries nothing but WhatsApp.
    expectError(await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: 'meta-sms', kind: 'whatsapp_cloud', channel: 'sms', whatsapp_cloud: settings() } }), 422, 'VALIDATION_ERROR');
  });

  it('answers the subscription handshake with the challenge only for the connector\'s verify token', async () => {
    const q = (token: string, mode = 'subscribe') => `${webhookPath(connectorId)}&hub.mode=${mode}&hub.verify_token=${encodeURIComponent(token)}&hub.challenge=1158201444`;
    const ok = await t.rest('GET', q(VERIFY_TOKEN));
    expect(ok.status, ok.text).toBe(200);
    expect(ok.text).toBe('1158201444');
    expect(ok.headers.get('content-type')).toMatch(/^text\/plain/);
    expectError(await t.rest('GET', q('not-the-verify-token')), 403, 'FORBIDDEN');
    expectError(await t.rest('GET', q(VERIFY_TOKEN, 'unsubscribe')), 403, 'FORBIDDEN');
  });

  it('sends an approved template business-initiated; signed statuses move it forward only; a forged or replayed webhook answers 403 and changes nothing', async () => {
    const to = recipient();
    // Free-form text outside the 24-hour window is refused at acceptance: nothing reaches Meta.
    expectError(await t.rest('POST', '/v1/messages/whatsapp', { key: org.liveKey, body: { to, text: { body: 'cold' } } }), 422, 'TEMPLATE_NOT_APPROVED');
    const tpl = await t.rest('POST', '/v1/messages/templates', { key: org.liveKey, body: { channel: 'whatsapp', name: 'order_update', content: 'Hi {{1}}, order {{2}} shipped', language: 'en', category: 'utility' } });
    expect(tpl.status, tpl.text).toBe(201);
    await eventually('template approved', async () => ((await t.db.query('select status from message_templates where id = $1', [tpl.body.data.id])).rows[0]?.status === 'approved' ? true : undefined));
    const components = [{ type: 'body', parameters: [{ type: 'text', text: 'Ana' }, { type: 'text', text: 'A-17' }] }];
    const r = await t.rest('POST', '/v1/messages/whatsapp', { key: org.liveKey, body: { to, template: { name: 'order_update', language: 'en', components } } });
    expect(r.status, r.text).toBe(201);
    const req = await requestTo(to);
    expect(req).toMatchObject({ version: 'v21.0', phoneNumberId: PHONE_ID, auth: `Bearer ${ACCESS_TOKEN}` });
    expect(req.body).toEqual({ messaging_product: 'whatsapp', recipient_type: 'individual', to: to.slice(1), type: 'template', template: { name: 'order_update', language: { code: 'en' }, components } });
    const sent = await until(r.body.data.id, 'sent');
    expect(sent.connector_id).toBe(connectorId);
    expect(meta.requests.filter((q) => q.body.to === to.slice(1))).toHaveLength(1);

    const forged = await post(webhook(connectorId, statuses(req.id, to, { status: 'delivered' }), 'not-the-app-secret'));
    expectError(forged, 403, 'FORBIDDEN');
    const unsigned = webhook(connectorId, statuses(req.id, to, { status: 'delivered' }));
    expectError(await t.rest('POST', unsigned.path, { rawBody: unsigned.rawBody, headers: { 'Content-Type': 'application/json' } }), 403, 'FORBIDDEN');
    expect((await message(r.body.data.id)).status).toBe('sent');

    const genuine = webhook(connectorId, statuses(req.id, to, { status: 'delivered' }, { status: 'read' }));
    const ok = await post(genuine);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data).toMatchObject({ accepted: true, events: 2, applied: 2 });
    expectError(await post(genuine), 403, 'FORBIDDEN');
    // A late `delivered` (and `sent`) after `read` changes nothing.
    expect((await post(webhook(connectorId, statuses(req.id, to, { status: 'sent' }, { status: 'delivered' })))).status).toBe(200);
    const read = await message(r.body.data.id);
    expect(read.status).toBe('read');
    expect(read.status_history.map((h: { status: string }) => h.status)).toEqual(['queued', 'sent', 'delivered', 'read']);
    const events = await t.db.query('select type from events where resource_id = $1 order by sequence', [r.body.data.id]);
    expect(events.rows.map((e) => e.type)).toEqual(['message.queued', 'message.sent', 'message.delivered', 'message.read']);
  });

  it('stores a signed inbound message, which opens the 24-hour window for session text and media by link', async () => {
    const from = recipient();
    const cb = webhook(connectorId, inbound(from, { type: 'text', text: { body: 'Where is my order?' } }));
    const r = await post(cb);
    expect(r.status, r.text).toBe(200);
    expectError(await post(cb), 403, 'FORBIDDEN');
    const { rows } = await t.db.query(`select channel, "to", body, provider, provider_message_id from messages where organization_id = $1 and direction = 'inbound' and "from" = $2`, [org.orgId, from]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ channel: 'whatsapp', to: SENDER, body: 'Where is my order?', provider: connectorId, provider_message_id: expect.stringMatching(/^wamid\./) });
    // Another number's notification on the same app is not this connector's: nothing stored.
    const other = await post(webhook(connectorId, inbound(from, { type: 'text', text: { body: 'not mine' } }), APP_SECRET, '999'));
    expect(other.status, other.text).toBe(200);
    expect((await t.db.query(`select count(*)::int as n from messages where "from" = $1 and direction = 'inbound'`, [from])).rows[0].n).toBe(1);

    const text = await t.rest('POST', '/v1/messages/whatsapp', { key: org.liveKey, body: { to: from, text: { body: 'On its way' } } });
    expect(text.status, text.text).toBe(201);
    expect((await requestTo(from)).body).toMatchObject({ type: 'text', text: { body: 'On its way', preview_url: false } });
    await until(text.body.data.id, 'sent');

    const media = await t.rest('POST', '/v1/messages/whatsapp', { key: org.liveKey, body: { to: from, media: { type: 'image', url: 'https://cdn.example.com/box.jpg', caption: 'Your box' } } });
    expect(media.status, media.text).toBe(201);
    await until(media.body.data.id, 'sent');
    const last = meta.requests.filter((q) => q.body.to === from.slice(1)).at(-1)!;
    expect(last.body).toMatchObject({ type: 'image', image: { link: 'https://cdn.example.com/box.jpg', caption: 'Your box' } });

    // Inbound media keeps Meta's media id (fetched with the access token) in content.
    const pic = webhook(connectorId, inbound(from, { type: 'image', image: { id: '1479537139650973', mime_type: 'image/jpeg', sha256: 'abc', caption: 'damaged' } }));
    expect((await post(pic)).status).toBe(200);
    const stored = await t.db.query(`select body, content from messages where "from" = $1 and direction = 'inbound' order by id desc limit 1`, [from]);
    expect(stored.rows[0]).toMatchObject({ body: 'damaged', content: { type: 'image', image: { id: '1479537139650973', mime_type: 'image/jpeg' } } });
  });

  it('keeps Meta\'s error code: a refused send and a failed status', async () => {
    const to = recipient();
    await post(webhook(connectorId, inbound(to, { type: 'text', text: { body: 'hi' } })));
    meta.refuse.add(to);
    const refused = await t.rest('POST', '/v1/messages/whatsapp', { key: org.liveKey, body: { to, text: { body: 'refused' } } });
    expect(refused.status, refused.text).toBe(201);
    const failed = await until(refused.body.data.id, 'failed');
    expect(failed.error_code).toBe('WHATSAPP_131026');
    meta.refuse.delete(to);

    const r = await t.rest('POST', '/v1/messages/whatsapp', { key: org.liveKey, body: { to, text: { body: 'late' } } });
    await until(r.body.data.id, 'sent');
    const req = meta.requests.filter((q) => q.body.to === to.slice(1)).at(-1)!;
    const errors = [{ code: 131047, title: 'Re-engagement message', message: 'Re-engagement message', error_data: { details: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.' } }];
    expect((await post(webhook(connectorId, statuses(req.id, to, { status: 'failed', errors })))).status).toBe(200);
    const lost = await message(r.body.data.id);
    expect(lost).toMatchObject({ status: 'failed', error_code: 'WHATSAPP_131047' });
  });

  it('fails over from a throttled number (130429 took nothing) to the next route, sending once', async () => {
    const backup = await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: 'meta-backup', kind: 'whatsapp_cloud', whatsapp_cloud: settings(BACKUP_PHONE_ID) } });
    expect(backup.status, backup.text).toBe(201);
    expect((await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: backup.body.data.id, priority: 2 } })).status).toBe(201);
    const to = recipient();
    await post(webhook(connectorId, inbound(to, { type: 'text', text: { body: 'hi' } })));
    meta.throttled.add(PHONE_ID);
    try {
      const r = await t.rest('POST', '/v1/messages/whatsapp', { key: org.liveKey, body: { to, text: { body: 'through the backup' } } });
      expect(r.status, r.text).toBe(201);
      const sent = await until(r.body.data.id, 'sent');
      expect(sent.connector_id).toBe(backup.body.data.id);
      expect(meta.requests.filter((q) => q.body.to === to.slice(1)).map((q) => q.phoneNumberId)).toEqual([BACKUP_PHONE_ID]);
      const status = await eventually('primary degraded', async () => {
        const c = await t.rest('GET', `/v1/messages/connectors/${connectorId}`, { key: org.liveKey });
        return c.body.data.status.state === 'degraded' ? c.body.data.status : undefined;
      });
      expect(status.last_error).toContain('WHATSAPP_130429');
    } finally {
      meta.throttled.delete(PHONE_ID);
    }
  });
});
