/**
 * Carriers through the API with live keys (docs/messaging.md, "Carriers"): connectors and routes over REST and
 * GraphQL, then live SMS through real SMSC processes — the `smpp` package's server and Perl's
 * Net::SMPP — each connector bound by the app's workers. Covers credentials sealed and never
 * returned, the status in REST, GraphQL and /metrics, CHANNEL_UNAVAILABLE at acceptance without a
 * matching route, queued → sent → delivered with the connector recorded and the message events,
 * concatenated UCS-2, permanent refusals and failed receipts, a STOP from the handset (inbound
 * message, opt-out, the confirmation sent back through the SMSC), and a wrong password.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { decodeText, readSegment } from '../src/providers/messaging/smpp/encoding.ts';
import { eventually, expectError, expectGqlError } from './helpers/assertions.ts';
import { SMSC_KINDS, startSmsc, type Smsc, type Submit } from './helpers/smsc.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

const METRICS_TOKEN = 'carriers-metrics-token';
let t: TestApp;
let other: TestOrg;
const smscs = new Map<string, Smsc>();

beforeAll(async () => {
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: { METRICS_TOKEN, MESSAGING_CARRIER_RECONNECT_MAX_MS: '500', MESSAGING_SEND_ATTEMPTS: '2', MESSAGING_RETRY_DELAY_SECONDS: '1' },
  });
  other = await t.createOrg('enterprise', 'Other');
  for (const kind of SMSC_KINDS) smscs.set(kind, await startSmsc(kind));
});

afterAll(async () => {
  await t?.close();
  await Promise.all([...smscs.values()].map((s) => s.close()));
});

const textOf = (s: Submit) => decodeText(s.data_coding, readSegment(s.esm_class, Buffer.from(s.short_message, 'hex')).payload);

function smppBody(smsc: Smsc, over: Record<string, unknown> = {}) {
  return { host: '127.0.0.1', port: smsc.port, system_id: smsc.systemId, password: smsc.password, enquire_link_seconds: 5, ...over };
}

async function message(org: TestOrg, id: string) {
  const r = await t.rest('GET', `/v1/messages/${id}`, { key: org.liveKey });
  expect(r.status, r.text).toBe(200);
  return r.body.data;
}

function until(org: TestOrg, id: string, status: string, timeoutMs = 15_000) {
  return eventually(`${id} ${status}`, async () => {
    const m = await message(org, id);
    return m.status === status ? m : undefined;
  }, timeoutMs);
}

describe('connectors and routes (API)', () => {
  it('refuses shared connectors to organizations other than the operator\'s', async () => {
    const smsc = smscs.get('node-smpp')!;
    const r = await t.rest('POST', '/v1/messages/connectors', { key: other.liveKey, body: { name: 'shared', kind: 'smpp', shared: true, smpp: smppBody(smsc) } });
    expectError(r, 403, 'FORBIDDEN');
    const list = await t.rest('GET', '/v1/messages/connectors', { key: other.liveKey });
    expect(list.body.data).toEqual([]);
  });

  it('validates connectors and routes and changes nothing on bad input', async () => {
    const smsc = smscs.get('node-smpp')!;
    const missing = await t.rest('POST', '/v1/messages/connectors', { key: other.liveKey, body: { name: 'x', kind: 'smpp', smpp: { port: smsc.port, system_id: 'a', password: 'b' } } });
    expect(expectError(missing, 422, 'MISSING_REQUIRED_FIELD').error.details.field).toBe('smpp.host');
    expectError(await t.rest('POST', '/v1/messages/connectors', { key: other.liveKey, body: { name: 'x', kind: 'kannel', smpp: smppBody(smsc) } }), 422, 'VALIDATION_ERROR');
    expectError(await t.rest('POST', '/v1/messages/connectors', { key: other.liveKey, body: { name: 'x', kind: 'smpp', smpp: smppBody(smsc, { window: 0 }) } }), 422, 'VALIDATION_ERROR');
    const created = await t.rest('POST', '/v1/messages/connectors', { key: other.liveKey, body: { name: 'valid', kind: 'smpp', enabled: false, smpp: smppBody(smsc) } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.status).toMatchObject({ state: 'disabled', binds_up: 0, binds: 1 });
    expectError(await t.rest('POST', '/v1/messages/connectors', { key: other.liveKey, body: { name: 'valid', kind: 'smpp', smpp: smppBody(smsc) } }), 409, 'ALREADY_EXISTS');
    const id = created.body.data.id;
    expectError(await t.rest('POST', '/v1/messages/routes', { key: other.liveKey, body: { connector_id: id, prefix: '44' } }), 422, 'VALIDATION_ERROR');
    expectError(await t.rest('POST', '/v1/messages/routes', { key: other.liveKey, body: { connector_id: id, sender: 'not a number' } }), 422, 'INVALID_PHONE_NUMBER');
    expectError(await t.rest('POST', '/v1/messages/routes', { key: other.liveKey, body: { connector_id: id, weight: 0 } }), 422, 'VALIDATION_ERROR');
    const routes = await t.rest('GET', '/v1/messages/routes', { key: other.liveKey });
    expect(routes.body.data).toEqual([]);
    const route = await t.rest('POST', '/v1/messages/routes', { key: other.liveKey, body: { connector_id: id, prefix: '+49', sender: '+49 30 901820', priority: 3, weight: 20 } });
    expect(route.status, route.text).toBe(201);
    expect(route.body.data).toMatchObject({ connector_id: id, channel: 'sms', prefix: '+49', sender: '+4930901820', priority: 3, weight: 20, shared: false });
    const conflict = expectError(await t.rest('DELETE', `/v1/messages/connectors/${id}`, { key: other.liveKey }), 409, 'CONFLICT');
    expect(conflict.error.details.routes).toEqual([route.body.data.id]);
    // Another organization's connector is not there for a route.
    const org = await t.createOrg('enterprise');
    expectError(await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: id } }), 404, 'NOT_FOUND');
    expect((await t.rest('DELETE', `/v1/messages/routes/${route.body.data.id}`, { key: other.liveKey })).status).toBe(204);
    expect((await t.rest('DELETE', `/v1/messages/connectors/${id}`, { key: other.liveKey })).status).toBe(204);
  });

  it('has GraphQL twins: create, read with status, update, delete', async () => {
    const smsc = smscs.get('net-smpp')!;
    const created = await t.gql(`mutation($port: Int!) { createMessagingConnector(input: { name: "gql", kind: smpp, smpp: { host: "127.0.0.1", port: $port, systemId: "${smsc.systemId}", password: "${smsc.password}", window: 4, concatenation: sar } }) {
      id name smpp { port window concatenation bindMode } status { state binds } } }`, { port: smsc.port }, { key: other.liveKey });
    expect(created.body.errors, created.text).toBeUndefined();
    const c = created.body.data.createMessagingConnector;
    expect(c).toMatchObject({ name: 'gql', smpp: { port: smsc.port, window: 4, concatenation: 'sar', bindMode: 'transceiver' }, status: { binds: 1 } });
    expect(created.text).not.toContain(smsc.password);
    const connected = await eventually('connected', async () => {
      const r = await t.gql('query($id: ID!) { messagingConnector(id: $id) { status { state bindsUp lastError } } }', { id: c.id }, { key: other.liveKey });
      return r.body.data?.messagingConnector.status.state === 'connected' ? r.body.data.messagingConnector.status : undefined;
    });
    expect(connected.bindsUp).toBe(1);
    // Live state (binds up or down, with no event to invalidate a cached answer): never served from the response cache.
    const again = await t.gql('query($id: ID!) { messagingConnector(id: $id) { status { state bindsUp lastError } } }', { id: c.id }, { key: other.liveKey });
    expect((again.body as { extensions?: { responseCache?: { hit?: boolean } } }).extensions?.responseCache?.hit, again.text).not.toBe(true);
    const route = await t.gql('mutation($id: String!) { createMessagingRoute(input: { connectorId: $id, prefix: "+33" }) { id prefix priority weight } }', { id: c.id }, { key: other.liveKey });
    expect(route.body.data.createMessagingRoute).toMatchObject({ prefix: '+33', priority: 1, weight: 100 });
    const updated = await t.gql('mutation($id: ID!) { updateMessagingRoute(id: $id, input: { priority: 7, sender: null }) { priority sender } }', { id: route.body.data.createMessagingRoute.id }, { key: other.liveKey });
    expect(updated.body.data.updateMessagingRoute).toEqual({ priority: 7, sender: null });
    expectGqlError(await t.gql('mutation($id: ID!) { deleteMessagingConnector(id: $id) }', { id: c.id }, { key: other.liveKey }), 'CONFLICT');
    await t.gql('mutation($id: ID!) { deleteMessagingRoute(id: $id) }', { id: route.body.data.createMessagingRoute.id }, { key: other.liveKey });
    const removed = await t.gql('mutation($id: ID!) { deleteMessagingConnector(id: $id) }', { id: c.id }, { key: other.liveKey });
    expect(removed.body.data.deleteMessagingConnector).toBe(c.id);
  });
});

describe.each(SMSC_KINDS)('live SMS through %s', (kind) => {
  let org: TestOrg;
  let smsc: Smsc;
  let connectorId: string;
  const sender = kind === 'node-smpp' ? '+447911123000' : '+447911123001';

  beforeAll(async () => {
    smsc = smscs.get(kind)!;
    org = await t.createOrg('enterprise', kind);
    const s = await t.rest('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'sms', address: sender } });
    expect(s.status, s.text).toBe(201);
  });

  it('is CHANNEL_UNAVAILABLE without a route, as before carriers', async () => {
    expectError(await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+447911123100', body: 'no route' } }), 503, 'CHANNEL_UNAVAILABLE');
  });

  it('configures a connector whose credentials are sealed and never returned; it binds and shows connected', async () => {
    const created = await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: kind, kind: 'smpp', smpp: smppBody(smsc) } });
    expect(created.status, created.text).toBe(201);
    expect(created.text).not.toContain(smsc.password);
    connectorId = created.body.data.id;
    expect(connectorId).toMatch(/^conn_/);
    expect(created.body.data).toMatchObject({ kind: 'smpp', channel: 'sms', shared: false, enabled: true, smpp: { port: smsc.port, system_id: smsc.systemId, bind_mode: 'transceiver', window: 10 } });
    const { rows } = await t.db.query('select sealed_credentials from messaging_connectors where id = $1', [connectorId]);
    expect(rows[0].sealed_credentials).toMatch(/^v1:/);
    expect(rows[0].sealed_credentials).not.toContain(smsc.password);
    const connected = await eventually('connected', async () => {
      const r = await t.rest('GET', `/v1/messages/connectors/${connectorId}`, { key: org.liveKey });
      return r.body.data.status.state === 'connected' ? r.body.data : undefined;
    });
    expect(connected.status).toMatchObject({ binds_up: 1, binds: 1 });
    expect(JSON.stringify(connected)).not.toContain(smsc.password);
    const metrics = await fetch(`${t.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } }).then((r) => r.text());
    expect(metrics).toContain(`messaging_connector_state{connector="${connectorId}",kind="smpp",state="connected"} 1`);
    expect(metrics).toContain(`messaging_connector_binds_up{connector="${connectorId}"} 1`);
    const route = await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: connectorId, prefix: '+44' } });
    expect(route.status, route.text).toBe(201);
  });

  it('refuses at acceptance a message no route matches, and stores nothing', async () => {
    const before = await t.db.query('select count(*)::int as n from messages where organization_id = $1', [org.orgId]);
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+14155550100', body: 'no route to +1' } });
    expect(expectError(r, 503, 'CHANNEL_UNAVAILABLE').error.details).toMatchObject({ channel: 'sms', to: '+14155550100', from: sender });
    const after = await t.db.query('select count(*)::int as n from messages where organization_id = $1', [org.orgId]);
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('sends through the SMSC: queued, sent, delivered by its receipt, with the connector recorded', async () => {
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+447911123200', body: 'Hello from the carrier test [1]' } });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data).toMatchObject({ status: 'queued', encoding: 'GSM-7', segments: 1 });
    const [submit] = await smsc.acceptedTo('447911123200', 1);
    expect(submit).toMatchObject({ from: sender.slice(1), data_coding: 0, registered_delivery: 1 });
    expect(textOf(submit!)).toBe('Hello from the carrier test [1]');
    const delivered = await until(org, r.body.data.id, 'delivered');
    expect(delivered.connector_id).toBe(connectorId);
    expect(delivered.status_history.map((h: { status: string }) => h.status)).toEqual(['queued', 'sent', 'delivered']);
    const events = await t.db.query('select type from events where resource_id = $1 order by sequence', [r.body.data.id]);
    expect(events.rows.map((e) => e.type)).toEqual(['message.queued', 'message.sent', 'message.delivered']);
    const { rows } = await t.db.query('select provider, provider_message_id from messages where id = $1', [r.body.data.id]);
    expect(rows[0]).toEqual({ provider: connectorId, provider_message_id: submit!.id });
  });

  it('sends a long UCS-2 message as concatenated segments, as many as counted', async () => {
    const body = 'Güle güle, şimdi çok uzun bir mesaj gönderiyoruz. '.repeat(3);
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+447911123201', body } });
    expect(r.status, r.text).toBe(201);
    expect(r.body.data).toMatchObject({ encoding: 'UCS-2', segments: 3 });
    const parts = await smsc.acceptedTo('447911123201', 3);
    expect(parts.every((p) => p.data_coding === 8 && (p.esm_class & 0x40) === 0x40)).toBe(true);
    expect(parts.map(textOf).join('')).toBe(body);
    await until(org, r.body.data.id, 'delivered');
  });

  it('fails a refused message with the command_status, and a failed receipt with DLR_UNDELIV', async () => {
    await smsc.command({ cmd: 'refuse', to: '447911123202', status: 0x0b });
    const refused = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+447911123202', body: 'refused' } });
    const failed = await until(org, refused.body.data.id, 'failed');
    expect(failed.error_code).toBe('ESME_RINVDSTADR');
    expect(failed.error_message).toContain('0x0000000B');
    await smsc.command({ cmd: 'receipt_stat', to: '447911123203', stat: 'UNDELIV' });
    const undelivered = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+447911123203', body: 'lost' } });
    const lost = await until(org, undelivered.body.data.id, 'failed');
    expect(lost.error_code).toBe('DLR_UNDELIV');
    expect(lost.status_history.map((h: { status: string }) => h.status)).toEqual(['queued', 'sent', 'failed']);
  });

  it('takes a STOP from the handset: inbound message, opt-out, confirmation back through the SMSC, then refusal', async () => {
    const handset = kind === 'node-smpp' ? '+447911123300' : '+447911123301';
    await smsc.command({ cmd: 'mo', from: handset, to: sender, text: 'STOP' });
    const inbound = await eventually('the inbound STOP', async () => {
      const r = await t.rest('GET', `/v1/messages?direction=inbound&limit=100`, { key: org.liveKey });
      return r.body.data.find((m: { from: string }) => m.from === handset);
    });
    expect(inbound).toMatchObject({ channel: 'sms', to: sender, status: 'delivered', connector_id: connectorId });
    const [confirmation] = await smsc.acceptedTo(handset.slice(1), 1);
    expect(textOf(confirmation!)).toMatch(/unsubscribed|opted out|STOP/i);
    expectError(await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: handset, body: 'after STOP' } }), 422, 'RECIPIENT_OPTED_OUT');
  });

  it('shows a connector with a wrong password down, with the SMSC\'s answer, and keeps it off the routes\' way', async () => {
    const created = await t.rest('POST', '/v1/messages/connectors', { key: org.liveKey, body: { name: `${kind}-wrong`, kind: 'smpp', smpp: smppBody(smsc, { password: 'wrong' }) } });
    expect(created.status, created.text).toBe(201);
    const down = await eventually('down with an error', async () => {
      const r = await t.rest('GET', `/v1/messages/connectors/${created.body.data.id}`, { key: org.liveKey });
      return r.body.data.status.last_error ? r.body.data.status : undefined;
    });
    expect(down).toMatchObject({ state: 'down', binds_up: 0 });
    expect(down.last_error).toContain('bind refused: ESME_RINVPASWD (0x0000000E)');
    // First by priority, but down: its messages go through the working connector.
    const route = await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: created.body.data.id, prefix: '+44', priority: 0 } });
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+447911123204', body: 'around the broken one' } });
    const delivered = await until(org, r.body.data.id, 'delivered');
    expect(delivered.connector_id).toBe(connectorId);
    await t.rest('DELETE', `/v1/messages/routes/${route.body.data.id}`, { key: org.liveKey });
    await t.rest('PATCH', `/v1/messages/connectors/${created.body.data.id}`, { key: org.liveKey, body: { enabled: false } });
  });
});
