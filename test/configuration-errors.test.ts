/**
 * Errors that point at configuration name it: a `from` that is not a voice number lists the
 * organization's voice numbers, a sender that is not one lists the channel's senders, a live SMS no
 * route carries lists the routes, a route naming an unknown connector lists the connectors, and a
 * replay to an inactive endpoint names the endpoint and how to reactivate it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { listConfigured } from '../src/platform/configured.ts';
import { expectError } from './helpers/assertions.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
let number = '';

beforeAll(async () => {
  t = await startTestApp({ clock: systemClock, env: { WEBHOOKS_ALLOW_LOOPBACK: 'true' } });
  org = await t.createOrg('growth', 'Configured');
  const available = await t.rest('GET', '/v1/numbers/available?country=US&area_code=628&limit=1', { key: org.testKey });
  expect(available.status, available.text).toBe(200);
  number = available.body.data[0].number;
  const bought = await t.rest('POST', '/v1/numbers', { key: org.testKey, body: { number } });
  expect(bought.status, bought.text).toBe(201);
});

afterAll(async () => { await t?.close(); });

describe('listConfigured', () => {
  it('lists what is configured, cut after a few', () => {
    expect(listConfigured([])).toBe('none');
    expect(listConfigured(['+1'])).toBe('+1');
    expect(listConfigured(['a', 'b', 'c'])).toBe('a, b and c');
    expect(listConfigured(['a', 'b', 'c', 'd'], 2)).toBe('a, b and 2 more');
  });
});

describe('voice numbers', () => {
  it('a call from a number that is not a voice number of the account lists its voice numbers', async () => {
    const r = await t.rest('POST', '/v1/voice/calls', { key: org.testKey, body: { to: '+14155550100', from: '+14155550199' } });
    const body = expectError(r, 422, 'VALIDATION_ERROR');
    expect(body.error.message).toBe(`from must be one of this account's voice-capable numbers: ${number}`);
    expect(body.error.details).toMatchObject({ field: 'from', value: '+14155550199', voice_numbers: [number] });
  });

  it('a conference dial-in number that is not one lists them too', async () => {
    const r = await t.rest('POST', '/v1/voice/conferences', { key: org.testKey, body: { name: 'Standup', dial_in_number: '+14155550199' } });
    const body = expectError(r, 422, 'VALIDATION_ERROR');
    expect(body.error.message).toBe(`dial_in_number must be one of this account's voice-capable numbers: ${number}`);
    expect(body.error.details).toMatchObject({ field: 'dial_in_number', voice_numbers: [number] });
  });
});

describe('senders', () => {
  it('a from that is not a sender of the channel lists the channel\'s senders', async () => {
    const r = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', from: '+14155550199', body: 'hi' } });
    const body = expectError(r, 422, 'SENDER_NOT_CONFIGURED');
    // Test mode: the sandbox's sender first, then the number the account bought (a sender of SMS).
    expect(body.error.message).toBe(`+14155550199 is not a sms sender of this account; its sms senders: +15005550006 and ${number}`);
    expect(body.error.details).toMatchObject({ field: 'from', channel: 'sms', senders: ['+15005550006', number] });
  });
});

describe('carrier routes and connectors', () => {
  it('a live SMS no route carries lists the routes; a route to an unknown connector lists the connectors', async () => {
    const connector = await t.rest('POST', '/v1/messages/connectors', {
      key: org.liveKey,
      body: { name: 'uk-smsc', kind: 'smpp', enabled: false, smpp: { host: '127.0.0.1', port: 1, system_id: 'acme', password: 'secret' } },
    });
    expect(connector.status, connector.text).toBe(201);
    const connectorId = connector.body.data.id as string;

    const unknown = 'conn_01m8ks00000000000000000000';
    const missing = await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: unknown, prefix: '+44' } });
    const m = expectError(missing, 404, 'NOT_FOUND');
    expect(m.error.message).toBe(`Connector ${unknown} not found; this account's connectors: ${connectorId} (uk-smsc)`);
    expect(m.error.details).toMatchObject({ field: 'connector_id', connectors: [`${connectorId} (uk-smsc)`] });

    const route = await t.rest('POST', '/v1/messages/routes', { key: org.liveKey, body: { connector_id: connectorId, prefix: '+44' } });
    expect(route.status, route.text).toBe(201);
    // A disabled connector's routes carry nothing: enable it (its binds fail; acceptance reads the route table only).
    const enabled = await t.rest('PATCH', `/v1/messages/connectors/${connectorId}`, { key: org.liveKey, body: { enabled: true } });
    expect(enabled.status, enabled.text).toBe(200);

    const sender = '+447911123000';
    const added = await t.rest('POST', '/v1/messages/senders', { key: org.liveKey, body: { channel: 'sms', address: sender } });
    expect(added.status, added.text).toBe(201);
    const sent = await t.rest('POST', '/v1/messages/sms', { key: org.liveKey, body: { to: '+14155550100', from: sender, body: 'no route to +1' } });
    const s = expectError(sent, 503, 'CHANNEL_UNAVAILABLE');
    expect(s.error.message).toBe(`No sms route carries messages from ${sender} to +14155550100; the sms routes: +44 via uk-smsc`);
    expect(s.error.details).toMatchObject({ channel: 'sms', to: '+14155550100', routes: ['+44 via uk-smsc'] });
  });
});

describe('webhook endpoints', () => {
  it('a replay to an inactive endpoint names it and how to reactivate it', async () => {
    const ep = await t.rest('POST', '/v1/webhooks', { key: org.testKey, body: { url: 'http://127.0.0.1:1/hooks', events: ['message.*'] } });
    expect(ep.status, ep.text).toBe(201);
    const id = ep.body.data.id as string;
    const tested = await t.rest('POST', `/v1/webhooks/${id}/test`, { key: org.testKey });
    expect(tested.status, tested.text).toBe(200);
    expect(tested.body.data.success).toBe(false);
    const deliveries = await t.rest('GET', `/v1/webhooks/${id}/deliveries`, { key: org.testKey });
    const delivery = deliveries.body.data[0] as { id: string; status: string };
    expect(['failed', 'dead']).toContain(delivery.status);
    const off = await t.rest('PUT', `/v1/webhooks/${id}`, { key: org.testKey, body: { active: false } });
    expect(off.status, off.text).toBe(200);

    const r = await t.rest('POST', `/v1/webhooks/deliveries/${delivery.id}/replay`, { key: org.testKey });
    const body = expectError(r, 409, 'CONFLICT');
    expect(body.error.message).toBe(`The delivery's endpoint ${id} (http://127.0.0.1:1/hooks) is inactive; reactivate it with PUT /v1/webhooks/${id} {"active": true}, then replay`);
    expect(body.error.details).toMatchObject({ endpoint_id: id, endpoint_state: 'inactive', url: 'http://127.0.0.1:1/hooks' });
  });
});
