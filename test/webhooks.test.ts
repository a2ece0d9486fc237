/**
 * Webhooks end to end, through real HTTP against the real database and the real workers, with a
 * real local receiver (node:http on 127.0.0.1): endpoint CRUD and its GraphQL twins, SSRF refusals
 * at creation and at delivery, delivery content and both signature schemes, per-resource
 * callbacks, the retry schedule on an injected clock (Retry-After, 410, 3xx, timeout, dead
 * letters and replay), isolation of a slow endpoint, the test endpoint, the delivery log, and the
 * live subscriptions (graphql-ws and SSE, tenant and mode scoping, two instances on one database).
 *
 * Three apps: `rt` runs on the system clock (content, signatures, subscriptions); `mc` runs on a
 * ManualClock (the retry schedule: the test moves the clock past next_retry_at and the worker,
 * polling every 50 ms of real time, attempts again); `strict` has no loopback switch and no
 * workers (SSRF refusals).
 */
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createApp, type App } from '../src/app.ts';
import { systemClock, type ManualClock } from '../src/platform/clock.ts';
import { createLogger } from '../src/platform/logger.ts';
import { RETRY_SCHEDULE_MS, type ClaimedDelivery, type LocalDeliveryWorker } from '../src/modules/webhooks/webhooks.service.ts';
import { Sealer } from '../src/platform/crypto/seal.ts';
import { EventRelay } from '../src/platform/events/relay.ts';
import { newId } from '../src/platform/ids.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';

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

const APP_ENV = {
  WEBHOOKS_ALLOW_LOOPBACK: '1',
  WEBHOOKS_POLL_INTERVAL_MS: '50',
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
  SANDBOX_READ_AFTER_MS: '50',
};

// ---------------------------------------------------------------------------------------------
// a local receiver

type Hit = { path: string; headers: http.IncomingHttpHeaders; body: string; json: any };
type Reply = { status: number; headers?: Record<string, string> } | 'hang';

type Receiver = {
  port: number;
  url(path: string): string;
  reply(path: string, reply: Reply): void;
  hitsAt(path: string): Hit[];
  /** Requests held open by a 'hang' reply at `path`. */
  held(path: string): http.ServerResponse[];
  release(path: string, status: number): void;
  close(): Promise<void>;
};

async function startReceiver(): Promise<Receiver> {
  const hits: Hit[] = [];
  const replies = new Map<string, Reply>();
  const held: { path: string; res: http.ServerResponse }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => { body += c; });
    req.on('end', () => {
      const path = req.url ?? '/';
      let json: unknown;
      try { json = JSON.parse(body); } catch { json = undefined; }
      hits.push({ path, headers: req.headers, body, json });
      const reply = replies.get(path) ?? { status: 200 };
      if (reply === 'hang') {
        held.push({ path, res });
        return;
      }
      res.writeHead(reply.status, reply.headers);
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: (path) => `http://127.0.0.1:${port}${path}`,
    reply: (path, reply) => { replies.set(path, reply); },
    hitsAt: (path) => hits.filter((h) => h.path === path),
    held: (path) => held.filter((h) => h.path === path && !h.res.writableEnded && !h.res.destroyed).map((h) => h.res),
    release(path, status) {
      for (const h of held) if (h.path === path && !h.res.writableEnded && !h.res.destroyed) h.res.writeHead(status).end('ok');
    },
    async close() {
      for (const h of held) h.res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---------------------------------------------------------------------------------------------
// helpers

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const uniq = () => randomBytes(4).toString('hex');
let phoneSeq = 0;
const phone = () => `+1415555${String(2000 + ++phoneSeq).padStart(4, '0')}`;

/** Polls `fn` (every 25 ms, at most `timeoutMs` of real time) until it returns a truthy value. */
async function waitFor<T>(what: string, fn: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

function expectError(res: HttpResponse, status: number, code: string) {
  expect({ status: res.status, code: res.body?.error?.code }, res.text).toEqual({ status, code });
}

function hmacHex(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** Verifies both signature schemes of a delivery the way a receiver would. */
function expectSigned(hit: Hit, secret: string) {
  expect(hit.headers['content-type']).toBe('application/json');
  expect(hit.headers['x-service-signature']).toBe(hmacHex(secret, hit.body));
  const id = String(hit.headers['webhook-id']);
  const timestamp = String(hit.headers['webhook-timestamp']);
  expect(id).toMatch(/^dlv_/);
  expect(timestamp).toMatch(/^\d{10}$/);
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${hit.body}`).digest('base64')}`;
  expect(String(hit.headers['webhook-signature']).split(' ')).toContain(expected);
}

type Endpoint = { id: string; url: string; events: string[]; active: boolean; signing_secret: string; description: string | null };

async function createEndpoint(t: TestApp, key: string, body: Record<string, unknown>): Promise<Endpoint> {
  const res = await t.rest('POST', '/v1/webhooks', { key, body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

async function sendSms(t: TestApp, key: string, extra: Record<string, unknown> = {}): Promise<{ id: string; from: string; to: string }> {
  const res = await t.rest('POST', '/v1/messages/sms', { key, body: { to: phone(), body: 'hello webhooks', ...extra } });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

function wsClient(baseUrl: string, apiKey: string): Client {
  return createClient({ url: `${baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey }, retryAttempts: 0, lazy: true });
}

type Sub = { items: any[]; errors: unknown[]; dispose: () => void };

function subscribe(client: Client, query: string, variables: Record<string, unknown> = {}): Sub {
  const sub: Sub = { items: [], errors: [], dispose: () => {} };
  sub.dispose = client.subscribe({ query, variables }, {
    next: (v) => {
      if (v.errors?.length) sub.errors.push(...v.errors);
      else sub.items.push(v.data);
    },
    error: (e) => { sub.errors.push(...(Array.isArray(e) ? e : [e])); },
    complete: () => {},
  });
  return sub;
}

/**
 * How many live subscriptions the app's event bus has opened so far (a counter that only grows,
 * unlike subscriberCount, which also drops when earlier subscriptions are released).
 */
const busSpies = new WeakMap<App, { mock: { calls: unknown[] } }>();
function busSubscriptions(app: App): number {
  let spy = busSpies.get(app);
  if (!spy) {
    spy = vi.spyOn(app.services.bus, 'subscribe');
    busSpies.set(app, spy);
  }
  return spy.mock.calls.length;
}

/** Subscribes and waits until the subscription is registered with the app's event bus. */
async function subscribed(app: App, client: Client, query: string, variables: Record<string, unknown> = {}): Promise<Sub> {
  const before = busSubscriptions(app);
  const sub = subscribe(client, query, variables);
  await waitFor('the subscription to register', () => busSubscriptions(app) > before || sub.errors.length > 0);
  expect(sub.errors).toEqual([]);
  return sub;
}

const EVENTS_SUB = 'subscription($types: [String!]) { events(types: $types) { id type sequence resourceId data createdAt } }';

// ---------------------------------------------------------------------------------------------
// apps

let rt: TestApp;
let mc: TestApp;
let strict: TestApp;
let recv: Receiver;
let redirectTarget: Receiver;
const clients: Client[] = [];
let second: App | undefined;

beforeAll(async () => {
  [recv, redirectTarget] = await Promise.all([startReceiver(), startReceiver()]);
  [rt, mc, strict] = await Promise.all([
    startTestApp({ clock: systemClock, workers: true, env: { ...APP_ENV, SANDBOX_TEMPLATE_REVIEW_MS: '50' } }),
    startTestApp({ workers: true, env: { ...APP_ENV, WEBHOOKS_TIMEOUT_MS: '300' } }),
    startTestApp({ workers: false }),
  ]);
});

afterAll(async () => {
  for (const c of clients) await c.dispose();
  await second?.stop();
  await Promise.all([rt?.close(), mc?.close(), strict?.close()]);
  await Promise.all([recv?.close(), redirectTarget?.close()]);
});

// A fresh second of the frozen clocks (and so a fresh per-second burst allowance) for every test.
beforeEach(() => {
  (mc.clock as ManualClock).advance(1000);
  (strict.clock as ManualClock).advance(1000);
});

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

describe('retry schedule (manual clock)', () => {
  const clock = () => mc.clock as ManualClock;
  type Row = { id: string; status: string; attempt: number; next_attempt_at: Date | null; http_status: number | null; last_error: string | null };

  async function deliveriesOf(endpointId: string): Promise<Row[]> {
    const { rows } = await mc.db.query('select id, status, attempt, next_attempt_at, http_status, last_error from webhook_deliveries where endpoint_id = $1 order by id', [endpointId]);
    return rows;
  }
  async function deliveryRow(id: string): Promise<Row> {
    const { rows } = await mc.db.query('select id, status, attempt, next_attempt_at, http_status, last_error from webhook_deliveries where id = $1', [id]);
    return rows[0];
  }
  /** Waits for the worker to finish attempt `n` of the delivery. */
  const attemptDone = (id: string, n: number) => waitFor(`attempt ${n} of ${id}`, async () => {
    const r = await deliveryRow(id);
    return r && r.attempt >= n && r.status !== 'pending' ? r : undefined;
  });
  /** The single delivery of an endpoint once its first attempt is logged. */
  const firstDelivery = (endpointId: string) => waitFor('the first attempt', async () => {
    const [r] = await deliveriesOf(endpointId);
    return r && r.attempt >= 1 ? r : undefined;
  });

  it('retries at 1 min, 5 min, 30 min, 2 h, 8 h and 24 h, then dead-letters with an event, and replays', async () => {
    const org = await mc.createOrg('enterprise', 'Retry org');
    const key = org.testKey;
    const path = `/r/${uniq()}/fail`;
    recv.reply(path, { status: 500 });
    const ep = await createEndpoint(mc, key, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(mc, key);

    let d = await firstDelivery(ep.id);
    const id = d.id;
    expect(d).toMatchObject({ status: 'failed', attempt: 1, http_status: 500, last_error: 'HTTP 500' });
    // The frozen clock has not moved since the attempt: next_retry_at is relative to this instant.
    let attemptAt = clock().now().getTime();
    // Not before next_retry_at: a second before it nothing happens.
    clock().set(d.next_attempt_at!.getTime() - 1000);
    await sleep(300);
    expect(await deliveryRow(id)).toMatchObject({ status: 'failed', attempt: 1 });
    expect(recv.hitsAt(path)).toHaveLength(1);

    for (let n = 1; n <= 6; n++) {
      const scheduled = RETRY_SCHEDULE_MS[n - 1]!;
      const delay = d.next_attempt_at!.getTime() - attemptAt;
      expect(delay, `delay after attempt ${n}`).toBeGreaterThanOrEqual(Math.floor(scheduled * 0.95));
      expect(delay, `delay after attempt ${n}`).toBeLessThanOrEqual(Math.ceil(scheduled * 1.05));
      attemptAt = d.next_attempt_at!.getTime();
      clock().set(attemptAt);
      d = await attemptDone(id, n + 1);
      expect(d.http_status).toBe(500);
    }
    expect(d).toMatchObject({ status: 'dead', attempt: 7, next_attempt_at: null });
    expect(recv.hitsAt(path)).toHaveLength(7);
    // Every attempt carried the same event and a valid signature.
    for (const h of recv.hitsAt(path)) expectSigned(h, ep.signing_secret);
    expect(new Set(recv.hitsAt(path).map((h) => h.body)).size).toBe(1);

    clock().advance(1000);
    const dead = await mc.rest('GET', '/v1/webhooks/dead-letters', { key });
    expect(dead.status, dead.text).toBe(200);
    expect(dead.body.data.map((x: { id: string }) => x.id)).toEqual([id]);
    expect(dead.body.data[0]).toMatchObject({ status: 'dead', attempt: 7, http_status: 500, endpoint_id: ep.id, event_type: 'message.queued' });
    const detail = await mc.rest('GET', `/v1/webhooks/deliveries/${id}`, { key });
    expect(detail.status, detail.text).toBe(200);
    expect(detail.body.data.status).toBe('dead');
    const attempts = detail.body.data.attempts;
    expect(attempts.map((a: { attempt: number }) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    for (const a of attempts) {
      expect(a).toMatchObject({ status: 'failed', http_status: 500, error: 'HTTP 500' });
      expect(typeof a.response_time_ms).toBe('number');
    }
    expect(attempts.slice(0, 6).every((a: { next_retry_at: string | null }) => a.next_retry_at !== null)).toBe(true);
    expect(attempts[6].next_retry_at).toBeNull();
    // The gaps between attempts follow the schedule.
    const gaps = attempts.slice(1).map((a: { created_at: string }, i: number) => Date.parse(a.created_at) - Date.parse(attempts[i].created_at));
    gaps.forEach((gap: number, i: number) => {
      expect(gap).toBeGreaterThanOrEqual(RETRY_SCHEDULE_MS[i]! * 0.95);
      expect(gap).toBeLessThanOrEqual(RETRY_SCHEDULE_MS[i]! * 1.05);
    });
    const { rows: events } = await mc.db.query("select type, data from events where type = 'webhook.delivery.dead' and organization_id = $1", [org.orgId]);
    expect(events).toHaveLength(1);
    expect(events[0].data).toMatchObject({ delivery_id: id, endpoint_id: ep.id, event_type: 'message.queued', attempts: 7 });

    recv.reply(path, { status: 200 });
    const replay = await mc.rest('POST', `/v1/webhooks/deliveries/${id}/replay`, { key });
    expect(replay.status, replay.text).toBe(200);
    expect(replay.body.data).toMatchObject({ id, status: 'pending' });
    await waitFor('the replay to succeed', async () => (await deliveryRow(id)).status === 'success');
    clock().advance(1000);
    const after = await mc.rest('GET', `/v1/webhooks/deliveries/${id}`, { key });
    expect(after.body.data).toMatchObject({ status: 'success', http_status: 200 });
    expect(after.body.data.delivered_at).not.toBeNull();
    // The replay is a new round, logged after the first one.
    expect(after.body.data.attempts.map((a: { attempt: number; status: string }) => [a.attempt, a.status])).toEqual([
      [1, 'failed'], [2, 'failed'], [3, 'failed'], [4, 'failed'], [5, 'failed'], [6, 'failed'], [7, 'failed'], [1, 'success'],
    ]);
    expect(after.body.data.attempts[7]).toMatchObject({ http_status: 200, next_retry_at: null });
    expect(recv.hitsAt(path)).toHaveLength(8);
    expect(recv.hitsAt(path)[7]!.body).toBe(recv.hitsAt(path)[0]!.body);
    expect((await mc.rest('GET', '/v1/webhooks/dead-letters', { key })).body.data).toEqual([]);
    // A delivered delivery cannot be replayed.
    expectError(await mc.rest('POST', `/v1/webhooks/deliveries/${id}/replay`, { key }), 409, 'CONFLICT');
  });

  it('honours Retry-After', async () => {
    const org = await mc.createOrg('enterprise', 'Retry-After org');
    const path = `/r/${uniq()}/busy`;
    recv.reply(path, { status: 503, headers: { 'Retry-After': '600' } });
    const ep = await createEndpoint(mc, org.testKey, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(mc, org.testKey);
    const d = await firstDelivery(ep.id);
    expect(d).toMatchObject({ status: 'failed', attempt: 1, http_status: 503 });
    const delay = d.next_attempt_at!.getTime() - clock().now().getTime();
    expect(delay).toBeGreaterThanOrEqual(600_000);
    expect(delay).toBeLessThanOrEqual(601_000);
    // Not at the usual minute.
    clock().advance(Math.ceil(RETRY_SCHEDULE_MS[0]! * 1.05) + 1000);
    await sleep(300);
    expect(await deliveryRow(d.id)).toMatchObject({ attempt: 1 });
    clock().set(d.next_attempt_at!);
    expect(await attemptDone(d.id, 2)).toMatchObject({ status: 'failed', http_status: 503 });
    expect(recv.hitsAt(path)).toHaveLength(2);
    clock().advance(1000);
    expect((await mc.rest('DELETE', `/v1/webhooks/${ep.id}`, { key: org.testKey })).status).toBe(204);
  });

  it('a 410 disables the endpoint and cancels the delivery; later events are not delivered', async () => {
    const org = await mc.createOrg('enterprise', 'Gone org');
    const key = org.testKey;
    const u = uniq();
    recv.reply(`/r/${u}/gone`, { status: 410 });
    const gone = await createEndpoint(mc, key, { url: recv.url(`/r/${u}/gone`), events: ['message.queued'] });
    const control = await createEndpoint(mc, key, { url: recv.url(`/r/${u}/control`), events: ['message.queued'] });
    await sendSms(mc, key);
    const d = await waitFor('the 410 to be handled', async () => {
      const [r] = await deliveriesOf(gone.id);
      return r?.status === 'cancelled' ? r : undefined;
    });
    expect(d).toMatchObject({ attempt: 1, http_status: 410, next_attempt_at: null });
    const ep = await mc.rest('GET', `/v1/webhooks/${gone.id}`, { key });
    expect(ep.body.data).toMatchObject({ active: false });
    expect(ep.body.data.disabled_reason).toMatch(/410/);
    const detail = await mc.rest('GET', `/v1/webhooks/deliveries/${d.id}`, { key });
    expect(detail.body.data).toMatchObject({ status: 'cancelled', http_status: 410 });
    expect(detail.body.data.attempts).toHaveLength(1);

    const m2 = await sendSms(mc, key);
    await waitFor('the control endpoint to get the second message', () => recv.hitsAt(`/r/${u}/control`).some((h) => h.json.data.message_id === m2.id));
    expect(await deliveriesOf(gone.id)).toHaveLength(1);
    clock().advance(25 * 3600_000);
    await sleep(200);
    expect(recv.hitsAt(`/r/${u}/gone`)).toHaveLength(1);
    void control;
  });

  it('does not follow redirects: a 3xx is a failure', async () => {
    const org = await mc.createOrg('enterprise', 'Redirect org');
    const path = `/r/${uniq()}/moved`;
    recv.reply(path, { status: 302, headers: { Location: redirectTarget.url('/target') } });
    const ep = await createEndpoint(mc, org.testKey, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(mc, org.testKey);
    const d = await firstDelivery(ep.id);
    expect(d).toMatchObject({ status: 'failed', attempt: 1, http_status: 302, last_error: 'HTTP 302' });
    expect(recv.hitsAt(path)).toHaveLength(1);
    expect(redirectTarget.hitsAt('/target')).toHaveLength(0);
    expect((await mc.rest('DELETE', `/v1/webhooks/${ep.id}`, { key: org.testKey })).status).toBe(204);
  });

  it('fails an attempt that gets no answer within the timeout', async () => {
    const org = await mc.createOrg('enterprise', 'Timeout org');
    const path = `/r/${uniq()}/hang`;
    recv.reply(path, 'hang');
    const ep = await createEndpoint(mc, org.testKey, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(mc, org.testKey);
    const d = await firstDelivery(ep.id);
    expect(d).toMatchObject({ status: 'failed', attempt: 1, http_status: null });
    expect(d.last_error).toMatch(/^timeout: /);
    expect(d.next_attempt_at).not.toBeNull();
    const detail = await mc.rest('GET', `/v1/webhooks/deliveries/${d.id}`, { key: org.testKey });
    expect(detail.body.data.attempts).toHaveLength(1);
    expect(detail.body.data.attempts[0]).toMatchObject({ attempt: 1, status: 'failed', http_status: null, response_time_ms: null });
    expect(detail.body.data.attempts[0].error).toMatch(/^timeout/);
    expect(recv.hitsAt(path)).toHaveLength(1);
    expect((await mc.rest('DELETE', `/v1/webhooks/${ep.id}`, { key: org.testKey })).status).toBe(204);
  });

  it('cancels pending deliveries of a deleted endpoint and of an inactive one', async () => {
    const org = await mc.createOrg('enterprise', 'Cancel org');
    const key = org.testKey;
    const u = uniq();
    recv.reply(`/r/${u}/deleted`, { status: 500 });
    recv.reply(`/r/${u}/paused`, { status: 500 });
    const toDelete = await createEndpoint(mc, key, { url: recv.url(`/r/${u}/deleted`), events: ['message.queued'] });
    const toPause = await createEndpoint(mc, key, { url: recv.url(`/r/${u}/paused`), events: ['message.queued'] });
    await sendSms(mc, key);
    const d1 = await firstDelivery(toDelete.id);
    const d2 = await firstDelivery(toPause.id);
    expect([d1.status, d2.status]).toEqual(['failed', 'failed']);

    expect((await mc.rest('DELETE', `/v1/webhooks/${toDelete.id}`, { key })).status).toBe(204);
    const cancelled = await mc.rest('GET', `/v1/webhooks/deliveries/${d1.id}`, { key });
    expect(cancelled.body.data).toMatchObject({ status: 'cancelled', next_retry_at: null, last_error: 'endpoint deleted' });
    expect((await mc.rest('PUT', `/v1/webhooks/${toPause.id}`, { key, body: { active: false } })).body.data.active).toBe(false);

    clock().advance(2 * 3600_000);
    await waitFor('the paused endpoint\'s delivery to be cancelled', async () => (await deliveryRow(d2.id)).status === 'cancelled');
    expect((await deliveryRow(d2.id)).last_error).toBe('endpoint inactive');
    await sleep(200);
    expect(recv.hitsAt(`/r/${u}/deleted`)).toHaveLength(1);
    expect(recv.hitsAt(`/r/${u}/paused`)).toHaveLength(1);
    expect((await deliveryRow(d1.id)).status).toBe('cancelled');
  });
});

describe('claims (manual clock)', () => {
  const clock = () => mc.clock as ManualClock;

  it('a delivery claimed by a worker that then crashed is attempted once its claim expires, not before', async () => {
    const org = await mc.createOrg('enterprise', 'Crashed worker org');
    const path = `/claim/${uniq()}`;
    const ep = await createEndpoint(mc, org.testKey, { url: recv.url(path), events: ['message.queued'] });
    const now = clock().now();
    const id = newId('dlv', now.getTime());
    const payload = JSON.stringify({ id: 'evt_crashed', type: 'message.queued', created_at: now.toISOString(), sequence: 1, data: {} });
    // As another worker leaves it when it dies after claiming: pending, locked for the next 60 s.
    await mc.db.query(
      `insert into webhook_deliveries (id, organization_id, mode, endpoint_id, url, event_id, event_type, payload, status, attempt, next_attempt_at, locked_until, created_at, updated_at)
       values ($1, $2, 'test', $3, $4, 'evt_crashed', 'message.queued', $5, 'pending', 0, $6, $7, $6, $6)`,
      [id, org.orgId, ep.id, recv.url(path), payload, now, new Date(now.getTime() + 60_000)]);
    await sleep(300);
    expect(recv.hitsAt(path)).toHaveLength(0);
    clock().advance(61_000);
    const hit = await waitFor('the delivery after the claim expired', () => recv.hitsAt(path)[0]);
    expect(hit.body).toBe(payload);
    expectSigned(hit, ep.signing_secret);
    await waitFor('the outcome', async () => (await mc.db.query('select status from webhook_deliveries where id = $1', [id])).rows[0]?.status === 'success');
    await sleep(200);
    expect(recv.hitsAt(path)).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------

describe('the delivery pipeline: batches, cached secrets, concurrent relays', () => {
  it('signs the next delivery with a changed signing secret at once (the decrypted-secret cache never serves a stale one)', async () => {
    const org = await rt.createOrg('enterprise', 'Secret change org');
    const key = org.testKey;
    const path = `/secret/${uniq()}`;
    const ep = await createEndpoint(rt, key, { url: recv.url(path), events: ['message.queued'] });
    const m1 = await sendSms(rt, key);
    const first = await waitFor('the first delivery', () => recv.hitsAt(path).find((h) => h.json.data.message_id === m1.id));
    expectSigned(first, ep.signing_secret);
    // A new secret, sealed the way the service seals it (what a rotation writes).
    const rotated = `whsec_${randomBytes(32).toString('base64')}`;
    await rt.db.query('update webhook_endpoints set signing_secret_sealed = $1 where id = $2',
      [new Sealer(rt.config.appSecret, 'webhook-signing-secret-v1').seal(rotated), ep.id]);
    const m2 = await sendSms(rt, key);
    const second = await waitFor('the next delivery', () => recv.hitsAt(path).find((h) => h.json.data.message_id === m2.id));
    expectSigned(second, rotated);
    expect(second.headers['x-service-signature']).not.toBe(hmacHex(ep.signing_secret, second.body));
    const test = await rt.rest('POST', `/v1/webhooks/${ep.id}/test`, { key });
    expect(test.body.data.success).toBe(true);
    expectSigned(recv.hitsAt(path).find((h) => h.json.type === 'webhook.test')!, rotated);
  });

  it('records every outcome of a burst (delivery, attempt log and live notice each), one delivery per event', async () => {
    const org = await rt.createOrg('enterprise', 'Burst org');
    const client = wsClient(rt.baseUrl, org.testKey);
    clients.push(client);
    const path = `/burst/${uniq()}`;
    const ep = await createEndpoint(rt, org.testKey, { url: recv.url(path), events: ['message.*'] });
    const sub = await subscribed(rt.app, client, 'subscription($id: ID!) { webhookDeliveries(endpointId: $id) { id status attempt httpStatus } }', { id: ep.id });
    const n = 60;
    const ids = Array.from({ length: n }, () => newId('evt', Date.now()));
    await rt.db.query(
      `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
       select id, $2, 'test', 'message.delivered', 'message', id, 1, '{}', now() from unnest($1::text[]) as id`, [ids, org.orgId]);
    await waitFor('every event at the receiver', () => recv.hitsAt(path).length >= n);
    await waitFor('every outcome published', () => sub.items.length >= n);
    sub.dispose();
    expect(new Set(recv.hitsAt(path).map((h) => h.json.id))).toEqual(new Set(ids));
    for (const h of recv.hitsAt(path)) expectSigned(h, ep.signing_secret);
    const { rows } = await rt.db.query(
      `select d.id, d.event_id, d.status, d.attempt, d.http_status, d.locked_until, d.delivered_at, count(a.id)::int as attempts, min(a.status) as attempt_status
         from webhook_deliveries d left join webhook_attempts a on a.delivery_id = d.id where d.endpoint_id = $1 group by d.id`, [ep.id]);
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((r) => r.event_id)).size).toBe(n);
    for (const r of rows) {
      expect(r).toMatchObject({ status: 'success', attempt: 1, http_status: 200, locked_until: null, attempts: 1, attempt_status: 'success' });
      expect(r.delivered_at).not.toBeNull();
    }
    expect(new Set(sub.items.map((i) => i.webhookDeliveries.id))).toEqual(new Set(rows.map((r) => r.id)));
    expect(sub.items.every((i) => i.webhookDeliveries.status === 'success' && i.webhookDeliveries.attempt === 1)).toBe(true);
  });

  it('dispatches each event exactly once while several relays drain the same outbox', async () => {
    const org = await rt.createOrg('enterprise', 'Concurrent relays org');
    const path = `/relays/${uniq()}`;
    const ep = await createEndpoint(rt, org.testKey, { url: recv.url(path), events: ['message.*'] });
    const relays = Array.from({ length: 3 }, () => {
      const r = new EventRelay({ orm: rt.app.orm, url: rt.databaseUrl, clock: systemClock, log: createLogger('silent') });
      r.addConsumer((tx, event) => rt.app.services.webhooks.fanOut(tx, event));
      return r;
    });
    const n = 1200;
    const ids = Array.from({ length: n }, () => newId('evt', Date.now()));
    await rt.db.query(
      `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
       select id, $2, 'test', 'message.sent', 'message', id, 1, '{}', now() from unnest($1::text[]) as id`, [ids, org.orgId]);
    // Alongside the app's own relay, woken by the same insert.
    const drain = async (r: EventRelay) => { while ((await r.drainOnce()) > 0) { /* next batch */ } };
    await Promise.all(relays.map(drain));
    await waitFor('every event dispatched', async () => (await rt.db.query('select count(*)::int as n from events where id = any($1) and dispatched_at is null', [ids])).rows[0].n === 0);
    const { rows } = await rt.db.query('select event_id, count(*)::int as n from webhook_deliveries where endpoint_id = $1 group by event_id', [ep.id]);
    expect(rows).toHaveLength(n);
    expect(rows.every((r) => r.n === 1)).toBe(true);
    await waitFor('every delivery at the receiver', () => recv.hitsAt(path).length >= n, 30_000);
    expect(new Set(recv.hitsAt(path).map((h) => h.json.id)).size).toBe(n);
    expect(recv.hitsAt(path)).toHaveLength(n);
  }, 60_000);

  it('hands fresh deliveries to the local worker already claimed, as many as it has room for; a failed commit hands nothing', async () => {
    // The strict app runs no worker of its own: this one stands in, with room for two.
    const org = await strict.createOrg('enterprise', 'Hand-off org');
    const ep = await createEndpoint(strict, org.testKey, { url: 'https://hooks.example.com/handoff', events: ['message.*'] });
    const handed: ClaimedDelivery[][] = [];
    let released = 0;
    const local: LocalDeliveryWorker = { reserve: (n) => Math.min(n, 2), release: (n) => { released += n; }, run: (d) => { handed.push(d); } };
    const relay = new EventRelay({ orm: strict.app.orm, url: strict.databaseUrl, clock: strict.clock, log: createLogger('silent') });
    relay.addConsumer((tx, event) => strict.app.services.webhooks.fanOut(tx, event));
    const failing = new EventRelay({ orm: strict.app.orm, url: strict.databaseUrl, clock: strict.clock, log: createLogger('silent') });
    failing.addConsumer((tx, event) => strict.app.services.webhooks.fanOut(tx, event));
    // Fails after the deliveries were inserted (its hook runs after fan-out's).
    failing.addConsumer(async (tx) => tx.beforeCommit(failing, async () => { throw new Error('commit refused'); }));
    const insertEvents = async (n: number) => {
      const ids = Array.from({ length: n }, () => newId('evt', Date.now()));
      await strict.db.query(
        `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
         select id, $2, 'test', 'message.sent', 'message', id, 1, '{}', now() from unnest($1::text[]) as id`, [ids, org.orgId]);
      return ids;
    };
    strict.app.services.webhooks.attachLocalWorker(local);
    try {
      await insertEvents(3);
      await relay.drainOnce();
      expect(handed).toHaveLength(1);
      expect(handed[0]).toHaveLength(2);
      const now = strict.clock.now().getTime();
      const { rows } = await strict.db.query('select id, locked_until from webhook_deliveries where endpoint_id = $1 order by id', [ep.id]);
      expect(rows).toHaveLength(3);
      const locked = rows.filter((r) => r.locked_until !== null);
      expect(locked.map((r) => r.id).sort()).toEqual(handed[0]!.map((d) => d.id).sort());
      for (const r of locked) expect(r.locked_until.getTime()).toBe(now + 60_000);
      for (const d of handed[0]!) {
        expect(d).toMatchObject({ endpointId: ep.id, attempt: 0, url: 'https://hooks.example.com/handoff', tenant: { organizationId: org.orgId, mode: 'test' } });
        expect(d.endpoint).toMatchObject({ active: true });
        expect(JSON.parse(d.payload)).toMatchObject({ type: 'message.sent' });
      }
      expect(released).toBe(0);

      const later = await insertEvents(2);
      await expect(failing.drainOnce()).rejects.toThrow('commit refused');
      expect(released).toBe(2);
      expect(handed).toHaveLength(1);
      expect((await strict.db.query('select count(*)::int as n from webhook_deliveries where event_id = any($1)', [later])).rows[0].n).toBe(0);
      await relay.drainOnce();
      expect(handed).toHaveLength(2);
      expect(handed[1]!.map((d) => JSON.parse(d.payload).id).sort()).toEqual([...later].sort());
    } finally {
      strict.app.services.webhooks.detachLocalWorker(local);
    }
  });

  it('a failed attempt of a delivery whose endpoint was deleted while it was in flight leaves it cancelled (no retry)', async () => {
    const org = await rt.createOrg('enterprise', 'Deleted in flight org');
    const key = org.testKey;
    const path = `/inflight/${uniq()}`;
    recv.reply(path, 'hang');
    const ep = await createEndpoint(rt, key, { url: recv.url(path), events: ['message.queued'] });
    await sendSms(rt, key);
    await waitFor('the request to be in flight', () => recv.held(path).length === 1);
    const { rows: [d] } = await rt.db.query('select id from webhook_deliveries where endpoint_id = $1', [ep.id]);
    expect((await rt.rest('DELETE', `/v1/webhooks/${ep.id}`, { key })).status).toBe(204);
    recv.release(path, 500);
    const attempt = await waitFor('the attempt to be logged', async () => (await rt.db.query('select status, http_status from webhook_attempts where delivery_id = $1', [d.id])).rows[0]);
    expect(attempt).toEqual({ status: 'failed', http_status: 500 });
    const { rows: [after] } = await rt.db.query('select status, next_attempt_at, locked_until, attempt from webhook_deliveries where id = $1', [d.id]);
    expect(after).toEqual({ status: 'cancelled', next_attempt_at: null, locked_until: null, attempt: 1 });
  });
});

// ---------------------------------------------------------------------------------------------

describe('one slow endpoint never delays the others', () => {
  it('delivers to a fast endpoint while a slow one is still in flight', async () => {
    const org = await rt.createOrg('enterprise', 'Slow org');
    const key = org.testKey;
    const u = uniq();
    recv.reply(`/s/${u}/slow`, 'hang');
    const slow = await createEndpoint(rt, key, { url: recv.url(`/s/${u}/slow`), events: ['message.queued'] });
    const fast = await createEndpoint(rt, key, { url: recv.url(`/s/${u}/fast`), events: ['message.queued'] });
    await sendSms(rt, key);
    await waitFor('the slow endpoint to be called', () => recv.held(`/s/${u}/slow`).length === 1);
    const fastLog = await waitFor('the fast delivery to succeed', async () => {
      const r = await rt.rest('GET', `/v1/webhooks/${fast.id}/deliveries`, { key });
      return r.body.data[0]?.status === 'success' ? r.body.data[0] : undefined;
    });
    expect(fastLog.delivered_at).not.toBeNull();
    // The slow request is still open and its delivery still in progress.
    expect(recv.held(`/s/${u}/slow`)).toHaveLength(1);
    const slowLog = await rt.rest('GET', `/v1/webhooks/${slow.id}/deliveries`, { key });
    expect(slowLog.body.data[0]).toMatchObject({ status: 'pending', attempt: 0 });

    recv.release(`/s/${u}/slow`, 200);
    await waitFor('the slow delivery to succeed', async () => (await rt.rest('GET', `/v1/webhooks/${slow.id}/deliveries`, { key })).body.data[0]?.status === 'success');
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

describe('subscriptions', () => {
  let orgA: TestOrg;
  let orgB: TestOrg;
  let a: Client;
  let b: Client;
  beforeAll(async () => {
    orgA = await rt.createOrg('enterprise', 'Subscriber A');
    orgB = await rt.createOrg('enterprise', 'Subscriber B');
    a = wsClient(rt.baseUrl, orgA.testKey);
    b = wsClient(rt.baseUrl, orgB.testKey);
    clients.push(a, b);
  });

  it('events(types) over graphql-ws receives the message events of a message sent after subscribing', async () => {
    const idle = rt.app.services.bus.subscriberCount;
    const sub = await subscribed(rt.app, a, EVENTS_SUB, { types: ['message.*'] });
    const m = await sendSms(rt, orgA.testKey);
    await waitFor('message.delivered', () => sub.items.some((i) => i.events.type === 'message.delivered' && i.events.data.message_id === m.id));
    sub.dispose();
    // Unsubscribing releases the live subscription at once, not at the next matching event.
    await waitFor('the subscription to be released', () => rt.app.services.bus.subscriberCount === idle);
    const mine = sub.items.map((i) => i.events).filter((e) => e.resourceId === m.id).sort((x, y) => x.sequence - y.sequence);
    expect(mine.map((e) => [e.type, e.sequence])).toEqual([['message.queued', 1], ['message.sent', 2], ['message.delivered', 3]]);
    for (const e of mine) {
      expect(e.id).toMatch(/^evt_/);
      expect(e.data).toMatchObject({ message_id: m.id, channel: 'sms', to: m.to, status: e.type.slice('message.'.length) });
    }
    expect(sub.errors).toEqual([]);
  });

  it('messageStatus(id) yields queued, then sent, then delivered', async () => {
    // Hold the sandbox provider's send (its insert waits on this lock) so the subscription starts
    // while the message is still queued.
    const lock = await rt.db.connect();
    let sub: Sub;
    let m: { id: string };
    try {
      await lock.query('begin');
      await lock.query('lock table sandbox_sends in share mode');
      m = await sendSms(rt, orgA.testKey);
      sub = await subscribed(rt.app, a, 'subscription($id: ID!) { messageStatus(id: $id) { id status } }', { id: m.id });
      await waitFor('the current status', () => sub.items.length >= 1);
      expect(sub.items[0].messageStatus).toEqual({ id: m.id, status: 'queued' });
    } finally {
      await lock.query('commit');
      lock.release();
    }
    await waitFor('delivered', () => sub.items.some((i) => i.messageStatus.status === 'delivered'));
    sub.dispose();
    const statuses = sub.items.map((i) => i.messageStatus.status).filter((s, i, all) => i === 0 || s !== all[i - 1]);
    expect(statuses).toEqual(['queued', 'sent', 'delivered']);

    // Another tenant cannot watch this message.
    const foreign = subscribe(b, 'subscription($id: ID!) { messageStatus(id: $id) { id status } }', { id: m.id });
    await waitFor('the refusal', () => foreign.errors.length > 0 || foreign.items.length > 0);
    foreign.dispose();
    expect(foreign.items).toEqual([]);
    expect((foreign.errors[0] as { extensions?: { code?: string } }).extensions?.code).toBe('NOT_FOUND');
  });

  it('webhookDeliveries(endpointId) yields each delivery outcome of the endpoint', async () => {
    const ep = await createEndpoint(rt, orgA.testKey, { url: recv.url(`/sub/${uniq()}`), events: ['message.delivered'] });
    const sub = await subscribed(rt.app, a, 'subscription($id: ID!) { webhookDeliveries(endpointId: $id) { id endpointId status eventType httpStatus attempt deliveredAt } }', { id: ep.id });
    const res = await rt.rest('POST', `/v1/webhooks/${ep.id}/test`, { key: orgA.testKey });
    expect(res.body.data.success).toBe(true);
    const item = await waitFor('the delivery outcome', () => sub.items[0]?.webhookDeliveries);
    sub.dispose();
    expect(item).toMatchObject({ id: res.body.data.delivery_id, endpointId: ep.id, status: 'success', eventType: 'webhook.test', httpStatus: 200, attempt: 1 });
    expect(item.deliveredAt).not.toBeNull();

    const foreign = subscribe(b, 'subscription($id: ID!) { webhookDeliveries(endpointId: $id) { id } }', { id: ep.id });
    await waitFor('the refusal', () => foreign.errors.length > 0 || foreign.items.length > 0);
    foreign.dispose();
    expect((foreign.errors[0] as { extensions?: { code?: string } }).extensions?.code).toBe('NOT_FOUND');
  });

  it('streams events over SSE', async () => {
    const controller = new AbortController();
    const opened = busSubscriptions(rt.app);
    const before = rt.app.services.bus.subscriberCount;
    const res = await fetch(`${rt.baseUrl}/graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', 'X-API-Key': orgA.testKey },
      body: JSON.stringify({ query: 'subscription { events(types: ["message.*"]) { type resourceId sequence data } }' }),
      signal: controller.signal,
    });
    try {
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/event-stream');
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      const read = (async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          text += decoder.decode(value, { stream: true });
        }
      })().catch(() => {});
      await waitFor('the SSE subscription to register', () => busSubscriptions(rt.app) > opened);
      const m = await sendSms(rt, orgA.testKey);
      const events = () => text.split('\n').filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5))?.data?.events).filter((e) => e?.resourceId === m.id);
      await waitFor('message.delivered over SSE', () => events().some((e) => e.type === 'message.delivered'));
      expect(events().map((e) => e.type).sort()).toEqual(['message.delivered', 'message.queued', 'message.sent']);
      for (const e of events()) expect(e.data.message_id).toBe(m.id);
      controller.abort();
      await read;
      // Closing the stream releases the live subscription.
      await waitFor('the SSE subscription to be released', () => rt.app.services.bus.subscriberCount === before);
    } finally {
      controller.abort();
    }
  });

  it('a subscriber never sees another organization\'s events', async () => {
    const subA = await subscribed(rt.app, a, EVENTS_SUB, {});
    const subB = await subscribed(rt.app, b, EVENTS_SUB, {});
    const mA = await sendSms(rt, orgA.testKey);
    // A's own subscriber sees it, so it has been published to every subscriber of this instance.
    await waitFor('A to see its message', () => subA.items.some((i) => i.events.resourceId === mA.id));
    const mB = await sendSms(rt, orgB.testKey);
    await waitFor('B to see its message', () => subB.items.length > 0);
    expect(subB.items[0].events).toMatchObject({ type: 'message.queued', resourceId: mB.id });
    await waitFor('A\'s message to be delivered', () => subA.items.some((i) => i.events.resourceId === mA.id && i.events.type === 'message.delivered'));
    subA.dispose();
    subB.dispose();
    expect(subB.items.filter((i) => i.events.resourceId === mA.id)).toEqual([]);
    expect(subA.items.filter((i) => i.events.resourceId === mB.id)).toEqual([]);
  });

  it('a subscriber sees only its own mode', async () => {
    const live = wsClient(rt.baseUrl, orgA.liveKey);
    clients.push(live);
    const types = { types: ['template.*', 'message.*'] };
    const subLive = await subscribed(rt.app, live, EVENTS_SUB, types);
    const subTest = await subscribed(rt.app, a, EVENTS_SUB, types);
    const tpl = await rt.rest('POST', '/v1/messages/templates', { key: orgA.liveKey, body: { channel: 'sms', name: `live_${uniq()}`, content: 'Hello {{name}}' } });
    expect(tpl.status, tpl.text).toBe(201);
    await waitFor('the live template decision', () => subLive.items.some((i) => i.events.resourceId === tpl.body.data.id));
    const m = await sendSms(rt, orgA.testKey);
    await waitFor('the test message event', () => subTest.items.length > 0);
    expect(subTest.items[0].events).toMatchObject({ type: 'message.queued', resourceId: m.id });
    await waitFor('delivered', () => subTest.items.some((i) => i.events.type === 'message.delivered' && i.events.resourceId === m.id));
    subLive.dispose();
    subTest.dispose();
    expect(subLive.items.map((i) => i.events.resourceId)).toEqual([tpl.body.data.id]);
    expect(subTest.items.filter((i) => i.events.resourceId === tpl.body.data.id)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe('two instances on one database', () => {
  it('a subscriber on the second instance receives events of a message sent through the first', async () => {
    second = await createApp({ config: rt.config, databaseUrl: rt.databaseUrl, clock: systemClock, log: createLogger('silent') });
    await second.start({ workers: false });
    const { port } = await second.http.listen(0, '127.0.0.1');
    const org = await rt.createOrg('enterprise', 'Two instances org');
    const client = wsClient(`http://127.0.0.1:${port}`, org.testKey);
    clients.push(client);
    const sub = await subscribed(second, client, EVENTS_SUB, { types: ['message.*'] });
    // The first instance has no live subscriber left: what arrives crossed instances.
    await waitFor('the first instance to have no subscribers', () => rt.app.services.bus.subscriberCount === 0);
    const m = await sendSms(rt, org.testKey);
    await waitFor('the delivered event on the second instance', () => sub.items.some((i) => i.events.resourceId === m.id && i.events.type === 'message.delivered'));
    sub.dispose();
    expect(sub.items.map((i) => i.events).filter((e) => e.resourceId === m.id).map((e) => e.sequence).sort()).toEqual([1, 2, 3]);
  });
});
