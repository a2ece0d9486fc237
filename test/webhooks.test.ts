/**
 * Webhooks end to end, through real HTTP against the real database and the real workers, with a
 * real local receiver (test/helpers/webhooks.ts): endpoint CRUD and its GraphQL twins, SSRF refusals
 * at creation and at delivery, delivery content and both signature schemes, per-resource
 * callbacks, and the test endpoint. The retry schedule is in webhooks-retries.test.ts, the
 * delivery pipeline in webhooks-pipeline.test.ts, live subscriptions in webhooks-subscriptions.test.ts.
 */
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { TestApp, TestOrg } from './helpers/testApp.ts';
import { createEndpoint, type Endpoint, expectError, expectSigned, hmacHex, type Receiver, sendSms, uniq, useWebhookApps, waitFor } from './helpers/webhooks.ts';

// No host name on this machine resolves to 127.0.0.1 except `localhost` (which is refused by
// name), so DNS answers for two names under example.com are supplied here; every other name is
// resolved by the system resolver. This is the resolver the delivery client (safeHttp) uses.
const fakeDns = vi.hoisted(() => new Map<string, { address: string; family: 4 | 6 }[]>([
  ['loopback-alias.example.com', [{ address: '127.0.0.1', family: 4 }]],
  // One public and one loopback address: the client must refuse the name, not pick the public one.
  ['mixed-answer.example.com', [{ address: '93.184.215.14', family: 4 }, { address: '127.0.0.1', family: 4 }]],
]));
vi.mock('node:dns/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:dns/promises')>();
  const lookup = (async (host: string, options?: object) => fakeDns.get(host) ?? actual.lookup(host, { ...options, all: true })) as typeof actual.lookup;
  return { ...actual, lookup, default: { ...(actual as unknown as { default: object }).default, lookup } };
});

const apps = useWebhookApps({ rt: true, strict: true });
let rt: TestApp;
let strict: TestApp;
let recv: Receiver;
beforeAll(() => { ({ rt, strict, recv } = apps); });

// ---------------------------------------------------------------------------------------------

describe('endpoints: CRUD and validation', () => {
  let org: TestOrg;
  beforeAll(async () => { org = await rt.createOrg('enterprise', 'CRUD org'); });

  it('creates, reads, lists, updates and deletes; the signing secret appears only in the create response', async () => {
    const key = org.testKey;
    const created = await rt.rest('POST', '/v1/webhooks', { key, body: { url: recv.url('/crud/a'), events: ['message.delivered', 'message.sent'], description: 'primary' } });
    expect(created.status, created.text).toBe(201);
    const ep = created.body.data;
    expect(ep).toMatchObject({ url: recv.url('/crud/a'), events: ['message.delivered', 'message.sent'], description: 'primary', active: true, mode: 'test' });
    expect(ep.id).toMatch(/^wh_/);
    expect(ep.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);

    const one = await rt.rest('GET', `/v1/webhooks/${ep.id}`, { key });
    expect(one.status, one.text).toBe(200);
    expect(one.body.data).toMatchObject({ id: ep.id, url: ep.url, events: ep.events, active: true, description: 'primary' });
    expect(one.body.data).not.toHaveProperty('signing_secret');
    expect(one.text).not.toContain(ep.signing_secret);

    const b = await createEndpoint(rt, key, { url: recv.url('/crud/b'), events: ['message.*'] });
    const c = await createEndpoint(rt, key, { url: recv.url('/crud/c'), events: ['*'] });
    expect(new Set([ep.signing_secret, b.signing_secret, c.signing_secret]).size).toBe(3);
    const page1 = await rt.rest('GET', '/v1/webhooks?limit=2', { key });
    expect(page1.status, page1.text).toBe(200);
    expect(page1.body.data).toHaveLength(2);
    expect(page1.body.meta.pagination.has_more).toBe(true);
    const page2 = await rt.rest('GET', `/v1/webhooks?limit=2&cursor=${encodeURIComponent(page1.body.meta.pagination.cursor)}`, { key });
    expect(page2.status, page2.text).toBe(200);
    expect(page2.body.meta.pagination.has_more).toBe(false);
    const listed = [...page1.body.data, ...page2.body.data].map((e: { id: string }) => e.id);
    expect(listed.sort()).toEqual([ep.id, b.id, c.id].sort());
    expect(page1.text + page2.text).not.toContain('signing_secret');
    expect(page1.text + page2.text).not.toContain('whsec_');

    const put = await rt.rest('PUT', `/v1/webhooks/${ep.id}`, { key, body: { url: recv.url('/crud/a2'), events: ['message.read'], active: false, description: 'changed' } });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data).toMatchObject({ id: ep.id, url: recv.url('/crud/a2'), events: ['message.read'], active: false, description: 'changed' });
    expect(put.body.data).not.toHaveProperty('signing_secret');
    // A partial update leaves the other fields alone.
    const put2 = await rt.rest('PUT', `/v1/webhooks/${ep.id}`, { key, body: { description: 'again' } });
    expect(put2.body.data).toMatchObject({ url: recv.url('/crud/a2'), events: ['message.read'], active: false, description: 'again' });
    expect((await rt.rest('GET', `/v1/webhooks/${ep.id}`, { key })).body.data).toMatchObject({ events: ['message.read'], active: false, description: 'again' });

    const del = await rt.rest('DELETE', `/v1/webhooks/${ep.id}`, { key });
    expect(del.status, del.text).toBe(204);
    expect(del.text).toBe('');
    expectError(await rt.rest('GET', `/v1/webhooks/${ep.id}`, { key }), 404, 'NOT_FOUND');
    expectError(await rt.rest('DELETE', `/v1/webhooks/${ep.id}`, { key }), 404, 'NOT_FOUND');
    expectError(await rt.rest('PUT', `/v1/webhooks/${ep.id}`, { key, body: { active: true } }), 404, 'NOT_FOUND');
  });

  it('validates event types (wildcards allowed) and refuses plain http without the loopback switch', async () => {
    const key = org.testKey;
    expectError(await rt.rest('POST', '/v1/webhooks', { key, body: { url: recv.url('/v'), events: ['message.exploded'] } }), 422, 'VALIDATION_ERROR');
    expectError(await rt.rest('POST', '/v1/webhooks', { key, body: { url: recv.url('/v'), events: ['nothing.*'] } }), 422, 'VALIDATION_ERROR');
    expectError(await rt.rest('POST', '/v1/webhooks', { key, body: { url: recv.url('/v'), events: [] } }), 422, 'VALIDATION_ERROR');
    expectError(await rt.rest('POST', '/v1/webhooks', { key, body: { events: ['message.sent'] } }), 422, 'MISSING_REQUIRED_FIELD');
    const wild = await createEndpoint(rt, key, { url: recv.url('/v'), events: ['message.*'] });
    expect(wild.events).toEqual(['message.*']);
    expectError(await rt.rest('PUT', `/v1/webhooks/${wild.id}`, { key, body: { events: ['message.teleported'] } }), 422, 'VALIDATION_ERROR');
    expect((await rt.rest('GET', `/v1/webhooks/${wild.id}`, { key })).body.data.events).toEqual(['message.*']);

    const sOrg = await strict.createOrg('enterprise', 'Strict CRUD org');
    expectError(await strict.rest('POST', '/v1/webhooks', { key: sOrg.testKey, body: { url: `http://127.0.0.1:${recv.port}/x`, events: ['message.sent'] } }), 422, 'INVALID_WEBHOOK_URL');
    expectError(await strict.rest('POST', '/v1/webhooks', { key: sOrg.testKey, body: { url: 'http://hooks.example.com/x', events: ['message.sent'] } }), 422, 'INVALID_WEBHOOK_URL');
    const ok = await createEndpoint(strict, sOrg.testKey, { url: 'https://hooks.example.com/x', events: ['message.sent'] });
    expect(ok.active).toBe(true);
    expectError(await strict.rest('PUT', `/v1/webhooks/${ok.id}`, { key: sOrg.testKey, body: { url: `http://127.0.0.1:${recv.port}/x` } }), 422, 'INVALID_WEBHOOK_URL');
  });

  it('has GraphQL twins: createWebhook, webhooks, webhook, updateWebhook, deleteWebhook', async () => {
    const gOrg = await rt.createOrg('enterprise', 'GraphQL webhooks org');
    const key = gOrg.testKey;
    const CREATE = 'mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { signingSecret webhook { id url events description active } } }';
    const c1 = await rt.gql(CREATE, { input: { url: recv.url('/g/1'), events: ['message.*'], description: 'gql' } }, { key });
    expect(c1.body.errors, c1.text).toBeUndefined();
    const w1 = c1.body.data.createWebhook;
    expect(w1.signingSecret).toMatch(/^whsec_/);
    expect(w1.webhook).toMatchObject({ url: recv.url('/g/1'), events: ['message.*'], description: 'gql', active: true });
    const c2 = await rt.gql(CREATE, { input: { url: recv.url('/g/2'), events: ['message.delivered'] } }, { key });
    const w2 = c2.body.data.createWebhook.webhook;

    const LIST = 'query($after: String) { webhooks(first: 1, after: $after) { edges { node { id url } } pageInfo { hasNextPage endCursor } } }';
    const l1 = await rt.gql(LIST, {}, { key });
    expect(l1.body.errors, l1.text).toBeUndefined();
    expect(l1.body.data.webhooks.edges).toHaveLength(1);
    expect(l1.body.data.webhooks.pageInfo.hasNextPage).toBe(true);
    const l2 = await rt.gql(LIST, { after: l1.body.data.webhooks.pageInfo.endCursor }, { key });
    expect(l2.body.data.webhooks.pageInfo.hasNextPage).toBe(false);
    expect([l1.body.data.webhooks.edges[0].node.id, l2.body.data.webhooks.edges[0].node.id].sort()).toEqual([w1.webhook.id, w2.id].sort());

    const one = await rt.gql('query($id: ID!) { webhook(id: $id) { id url events active } }', { id: w2.id }, { key });
    expect(one.body.data.webhook).toEqual({ id: w2.id, url: recv.url('/g/2'), events: ['message.delivered'], active: true });

    const UPDATE = 'mutation($id: ID!, $input: UpdateWebhookInput!) { updateWebhook(id: $id, input: $input) { id url events active description } }';
    const up = await rt.gql(UPDATE, { id: w2.id, input: { events: ['message.read', 'message.failed'], active: false, description: 'off' } }, { key });
    expect(up.body.errors, up.text).toBeUndefined();
    expect(up.body.data.updateWebhook).toEqual({ id: w2.id, url: recv.url('/g/2'), events: ['message.read', 'message.failed'], active: false, description: 'off' });
    const bad = await rt.gql(UPDATE, { id: w2.id, input: { events: ['message.nope'] } }, { key });
    expect(bad.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    const badUrl = await rt.gql(CREATE, { input: { url: 'https://10.0.0.5/', events: ['message.sent'] } }, { key });
    expect(badUrl.body.errors?.[0]?.extensions?.code).toBe('INVALID_WEBHOOK_URL');

    const del = await rt.gql('mutation($id: ID!) { deleteWebhook(id: $id) }', { id: w2.id }, { key });
    expect(del.body.data.deleteWebhook).toBe(w2.id);
    const gone = await rt.gql('query($id: ID!) { webhook(id: $id) { id } }', { id: w2.id }, { key });
    expect(gone.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expectError(await rt.rest('GET', `/v1/webhooks/${w2.id}`, { key }), 404, 'NOT_FOUND');
  });
});

// ---------------------------------------------------------------------------------------------

describe('SSRF', () => {
  it('refuses loopback, private, link-local, mapped and numeric forms at creation without the loopback switch', async () => {
    const org = await strict.createOrg('enterprise', 'SSRF org');
    const refused = [
      'https://127.0.0.1/', 'https://[::1]/', 'https://[::ffff:127.0.0.1]/', 'https://2130706433/', 'https://0x7f000001/', 'https://127.1/',
      'https://169.254.169.254/latest', 'https://10.0.0.5/', 'https://192.168.1.1/', 'https://172.16.0.1/', 'https://[fd00::1]/', 'https://[fe80::1]/',
      'https://localhost/', 'https://localhost./', 'https://printer.local/', `http://127.0.0.1:${recv.port}/`, `http://localhost:${recv.port}/`,
      'ftp://hooks.example.com/', 'https://user:pw@hooks.example.com/',
    ];
    for (const url of refused) {
      const res = await strict.rest('POST', '/v1/webhooks', { key: org.testKey, body: { url, events: ['message.sent'] } });
      expect({ url, status: res.status, code: res.body?.error?.code }).toEqual({ url, status: 422, code: 'INVALID_WEBHOOK_URL' });
    }
    // The same checks are not simply refusing everything.
    await createEndpoint(strict, org.testKey, { url: 'https://hooks.example.com/in', events: ['message.sent'] });
    const list = await strict.rest('GET', '/v1/webhooks', { key: org.testKey });
    expect(list.body.data.map((e: { url: string }) => e.url)).toEqual(['https://hooks.example.com/in']);
  });

  it('with the loopback switch allows http://127.0.0.1:<port> but still refuses private addresses', async () => {
    const org = await rt.createOrg('enterprise', 'Loopback switch org');
    const key = org.testKey;
    await createEndpoint(rt, key, { url: `http://127.0.0.1:${recv.port}/loop`, events: ['message.sent'] });
    await createEndpoint(rt, key, { url: `http://localhost:${recv.port}/loop`, events: ['message.sent'] });
    for (const url of [`http://10.0.0.1:${recv.port}/`, 'https://10.0.0.1/', `http://169.254.169.254:${recv.port}/`, `http://192.168.1.1:${recv.port}/`, 'http://127.0.0.1/']) {
      const res = await rt.rest('POST', '/v1/webhooks', { key, body: { url, events: ['message.sent'] } });
      expect({ url, status: res.status, code: res.body?.error?.code }).toEqual({ url, status: 422, code: 'INVALID_WEBHOOK_URL' });
    }
  });

  it('blocks at delivery a host name that resolves to a loopback address (with or without the switch)', async () => {
    const cases: [TestApp, string][] = [
      [strict, `https://loopback-alias.example.com:${recv.port}/dns/strict`],
      [strict, `https://mixed-answer.example.com:${recv.port}/dns/mixed`],
      // The switch covers 127.0.0.1 and localhost literally, not any name that happens to resolve there.
      [rt, `https://loopback-alias.example.com:${recv.port}/dns/rt`],
    ];
    for (const [app, url] of cases) {
      const org = await app.createOrg('enterprise', 'DNS org');
      // The name passes the static checks (no DNS at creation) …
      const ep = await createEndpoint(app, org.testKey, { url, events: ['message.sent'] });
      // … and the delivery refuses the resolved address before connecting.
      const res = await app.rest('POST', `/v1/webhooks/${ep.id}/test`, { key: org.testKey });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toMatchObject({ success: false, response_status: null, delivered_at: null });
      expect(res.body.data.error).toMatch(/^blocked_address/);
      const { rows } = await app.db.query('select a.error, a.http_status, d.status from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id where d.endpoint_id = $1', [ep.id]);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ http_status: null, status: 'failed' });
      expect(rows[0].error).toMatch(/^blocked_address: .*resolves to a blocked address/);
      expect(recv.hitsAt(new URL(url).pathname)).toHaveLength(0);
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe('delivery content and signatures (real clock)', () => {
  let org: TestOrg;
  let all: Endpoint;
  const u = uniq();

  it('delivers signed message.queued/sent/delivered envelopes with increasing sequences; filters by type; skips inactive endpoints', async () => {
    org = await rt.createOrg('enterprise', 'Delivery org');
    const key = org.testKey;
    all = await createEndpoint(rt, key, { url: recv.url(`/d/${u}/all`), events: ['message.*'] });
    const onlyDelivered = await createEndpoint(rt, key, { url: recv.url(`/d/${u}/delivered`), events: ['message.delivered'] });
    const inactive = await createEndpoint(rt, key, { url: recv.url(`/d/${u}/inactive`), events: ['message.*'] });
    expect((await rt.rest('PUT', `/v1/webhooks/${inactive.id}`, { key, body: { active: false } })).body.data.active).toBe(false);

    const m = await sendSms(rt, key);
    const hits = await waitFor('three message events at the endpoint', () => {
      const h = recv.hitsAt(`/d/${u}/all`);
      return h.length >= 3 ? h : undefined;
    });
    const delivered = await waitFor('the delivered-only endpoint', () => recv.hitsAt(`/d/${u}/delivered`)[0]);

    expect(hits).toHaveLength(3);
    const bodies = hits.map((h) => h.json).sort((a, b) => a.sequence - b.sequence);
    expect(bodies.map((b) => b.type)).toEqual(['message.queued', 'message.sent', 'message.delivered']);
    expect(bodies.map((b) => b.sequence)).toEqual([1, 2, 3]);
    for (const b of bodies) {
      expect(Object.keys(b).sort()).toEqual(['created_at', 'data', 'id', 'sequence', 'type']);
      expect(b.id).toMatch(/^evt_/);
      expect(new Date(b.created_at).toISOString()).toBe(b.created_at);
      expect(b.data).toMatchObject({ message_id: m.id, channel: 'sms', from: m.from, to: m.to, status: b.type.slice('message.'.length) });
    }
    expect(new Set(bodies.map((b) => b.id)).size).toBe(3);
    for (const h of hits) expectSigned(h, all.signing_secret);
    expect(new Set(hits.map((h) => h.headers['webhook-id'])).size).toBe(3);

    // Only message.delivered, signed with that endpoint's own secret (not the other one's).
    expect(delivered.json.type).toBe('message.delivered');
    expect(delivered.json.data.message_id).toBe(m.id);
    expectSigned(delivered, onlyDelivered.signing_secret);
    expect(delivered.headers['x-service-signature']).not.toBe(hmacHex(all.signing_secret, delivered.body));
    // The same event reaches both endpoints with the same envelope.
    expect(delivered.json).toEqual(bodies[2]);
    await waitFor('the delivered-only log', async () => {
      const r = await rt.rest('GET', `/v1/webhooks/${onlyDelivered.id}/deliveries`, { key });
      return r.body.data.length === 1 && r.body.data[0].status === 'success';
    });
    const onlyLog = await rt.rest('GET', `/v1/webhooks/${onlyDelivered.id}/deliveries`, { key });
    expect(onlyLog.body.data.map((d: { event_type: string }) => d.event_type)).toEqual(['message.delivered']);
    expect(recv.hitsAt(`/d/${u}/delivered`)).toHaveLength(1);

    // The inactive endpoint got no delivery at all (fan-out happens with the others', so this is settled).
    const inactiveLog = await rt.rest('GET', `/v1/webhooks/${inactive.id}/deliveries`, { key });
    expect(inactiveLog.status).toBe(200);
    expect(inactiveLog.body.data).toEqual([]);
    expect(recv.hitsAt(`/d/${u}/inactive`)).toHaveLength(0);

    // webhook-id is the delivery id, as listed in the log.
    const log = await waitFor('three successful deliveries', async () => {
      const r = await rt.rest('GET', `/v1/webhooks/${all.id}/deliveries`, { key });
      return r.body.data.length === 3 && r.body.data.every((d: { status: string }) => d.status === 'success') ? r.body.data : undefined;
    });
    expect(log.map((d: { id: string }) => d.id).sort()).toEqual(hits.map((h) => String(h.headers['webhook-id'])).sort());
  });

  it('lists an endpoint\'s deliveries with the logged fields, paginated, and hides other tenants\' endpoints', async () => {
    const key = org.testKey;
    const p1 = await rt.rest('GET', `/v1/webhooks/${all.id}/deliveries?limit=2`, { key });
    expect(p1.status, p1.text).toBe(200);
    expect(p1.body.data).toHaveLength(2);
    expect(p1.body.meta.pagination.has_more).toBe(true);
    const p2 = await rt.rest('GET', `/v1/webhooks/${all.id}/deliveries?limit=2&cursor=${encodeURIComponent(p1.body.meta.pagination.cursor)}`, { key });
    expect(p2.body.data).toHaveLength(1);
    expect(p2.body.meta.pagination.has_more).toBe(false);
    const rows = [...p1.body.data, ...p2.body.data];
    expect(new Set(rows.map((d) => d.id)).size).toBe(3);
    expect(rows.map((d) => d.event_type).sort()).toEqual(['message.delivered', 'message.queued', 'message.sent']);
    for (const d of rows) {
      expect(d).toMatchObject({ endpoint_id: all.id, status: 'success', http_status: 200, attempt: 1, next_retry_at: null });
      expect(d.id).toMatch(/^dlv_/);
      expect(d.event_id).toMatch(/^evt_/);
      expect(typeof d.response_time_ms).toBe('number');
      expect(d.response_time_ms).toBeGreaterThanOrEqual(0);
      expect(new Date(d.delivered_at).toISOString()).toBe(d.delivered_at);
    }
    const filtered = await rt.rest('GET', `/v1/webhooks/${all.id}/deliveries?status=dead`, { key });
    expect(filtered.body.data).toEqual([]);
    const gql = await rt.gql('query($id: ID!) { webhookDeliveryLog(endpointId: $id, first: 5) { edges { node { id status eventType httpStatus attempt } } } }', { id: all.id }, { key });
    expect(gql.body.data.webhookDeliveryLog.edges.map((e: { node: { id: string } }) => e.node.id).sort()).toEqual(rows.map((d) => d.id).sort());

    const other = await rt.createOrg('enterprise', 'Other org');
    expectError(await rt.rest('GET', `/v1/webhooks/${all.id}/deliveries`, { key: other.testKey }), 404, 'NOT_FOUND');
    expectError(await rt.rest('GET', `/v1/webhooks/${all.id}`, { key: other.testKey }), 404, 'NOT_FOUND');
    expectError(await rt.rest('PUT', `/v1/webhooks/${all.id}`, { key: other.testKey, body: { active: false } }), 404, 'NOT_FOUND');
    expectError(await rt.rest('POST', `/v1/webhooks/${all.id}/test`, { key: other.testKey }), 404, 'NOT_FOUND');
    expectError(await rt.rest('DELETE', `/v1/webhooks/${all.id}`, { key: other.testKey }), 404, 'NOT_FOUND');
    expectError(await rt.rest('GET', `/v1/webhooks/deliveries/${rows[0].id}`, { key: other.testKey }), 404, 'NOT_FOUND');
    // The same organization's live mode is another tenant too.
    expectError(await rt.rest('GET', `/v1/webhooks/${all.id}`, { key: org.liveKey }), 404, 'NOT_FOUND');
    expect((await rt.rest('GET', `/v1/webhooks/${all.id}`, { key })).body.data.active).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------

describe('per-resource callbacks', () => {
  it('delivers a message\'s events to its webhook_url, signed with the callback secret', async () => {
    const org = await rt.createOrg('enterprise', 'Callback org');
    const other = await rt.createOrg('enterprise', 'Other callback org');
    const secretRes = await rt.rest('GET', '/v1/webhooks/callback-secret', { key: org.testKey });
    expect(secretRes.status, secretRes.text).toBe(200);
    const secret: string = secretRes.body.data.signing_secret;
    expect(secret).toMatch(/^whsec_/);
    expect((await rt.rest('GET', '/v1/webhooks/callback-secret', { key: other.testKey })).body.data.signing_secret).not.toBe(secret);
    expect((await rt.gql('{ webhookCallbackSecret }', {}, { key: org.testKey })).body.data.webhookCallbackSecret).toBe(secret);

    const path = `/cb/${uniq()}`;
    const m = await sendSms(rt, org.testKey, { webhook_url: recv.url(path) });
    const hits = await waitFor('three callbacks', () => {
      const h = recv.hitsAt(path);
      return h.length >= 3 ? h : undefined;
    });
    const bodies = hits.map((h) => h.json).sort((a, b) => a.sequence - b.sequence);
    expect(bodies.map((b) => b.type)).toEqual(['message.queued', 'message.sent', 'message.delivered']);
    for (const b of bodies) expect(b.data).toMatchObject({ message_id: m.id, channel: 'sms', to: m.to, status: b.type.slice('message.'.length) });
    // The callback URL routes the callback; it is not part of the event data anyone receives.
    for (const b of bodies) expect(b.data).not.toHaveProperty('webhook_url');
    for (const h of hits) expectSigned(h, secret);
  });
});

// ---------------------------------------------------------------------------------------------

describe('POST /v1/webhooks/{id}/test', () => {
  it('sends a signed webhook.test event and reports the outcome (REST and GraphQL)', async () => {
    const org = await rt.createOrg('enterprise', 'Test-event org');
    const key = org.testKey;
    const u = uniq();
    const ok = await createEndpoint(rt, key, { url: recv.url(`/t/${u}/ok`), events: ['message.delivered'] });
    const res = await rt.rest('POST', `/v1/webhooks/${ok.id}/test`, { key });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ success: true, response_status: 200 });
    expect(typeof res.body.data.response_time_ms).toBe('number');
    expect(new Date(res.body.data.delivered_at).toISOString()).toBe(res.body.data.delivered_at);
    const [hit] = recv.hitsAt(`/t/${u}/ok`);
    expect(hit).toBeDefined();
    expect(hit!.json).toMatchObject({ type: 'webhook.test', data: { webhook_id: ok.id } });
    expect(hit!.json.id).toMatch(/^evt_/);
    expectSigned(hit!, ok.signing_secret);
    // Logged like any delivery.
    const log = await rt.rest('GET', `/v1/webhooks/${ok.id}/deliveries`, { key });
    expect(log.body.data[0]).toMatchObject({ event_type: 'webhook.test', status: 'success', http_status: 200, attempt: 1 });

    recv.reply(`/t/${u}/fail`, { status: 500 });
    const failing = await createEndpoint(rt, key, { url: recv.url(`/t/${u}/fail`), events: ['message.delivered'] });
    const bad = await rt.rest('POST', `/v1/webhooks/${failing.id}/test`, { key });
    expect(bad.status, bad.text).toBe(200);
    expect(bad.body.data).toMatchObject({ success: false, response_status: 500, delivered_at: null });
    expect(recv.hitsAt(`/t/${u}/fail`)).toHaveLength(1);

    const gql = await rt.gql('mutation($id: ID!) { testWebhook(id: $id) { success responseStatus responseTimeMs deliveredAt } }', { id: ok.id }, { key });
    expect(gql.body.errors, gql.text).toBeUndefined();
    expect(gql.body.data.testWebhook).toMatchObject({ success: true, responseStatus: 200 });
    expect(gql.body.data.testWebhook.deliveredAt).not.toBeNull();
    expect(recv.hitsAt(`/t/${u}/ok`)).toHaveLength(2);
    const gqlBad = await rt.gql('mutation($id: ID!) { testWebhook(id: $id) { success responseStatus deliveredAt } }', { id: failing.id }, { key });
    expect(gqlBad.body.data.testWebhook).toEqual({ success: false, responseStatus: 500, deliveredAt: null });
  });
});

// ---------------------------------------------------------------------------------------------
