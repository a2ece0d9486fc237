/**
 * What the webhooks test files share (test/webhooks*.test.ts): a local receiver (node:http on
 * 127.0.0.1), signature checks, endpoint and SMS shortcuts, graphql-ws subscriptions, and
 * useWebhookApps, which starts the apps a file uses.
 *
 * The apps: `rt` runs on the system clock (content, signatures, subscriptions); `mc` runs on a
 * ManualClock (the retry schedule: the test moves the clock past next_retry_at and the worker,
 * polling every 50 ms of real time, attempts again); `strict` has no loopback switch and no
 * workers (SSRF refusals).
 */
import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, beforeEach, expect, vi } from 'vitest';
import type { App } from '../../src/app.ts';
import { systemClock, type ManualClock } from '../../src/platform/clock.ts';
import { startTestApp, type HttpResponse, type TestApp } from './testApp.ts';
import { eventually } from './assertions.ts';

export const APP_ENV = {
  WEBHOOKS_ALLOW_LOOPBACK: '1',
  WEBHOOKS_POLL_INTERVAL_MS: '50',
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
  SANDBOX_READ_AFTER_MS: '50',
};

// ---------------------------------------------------------------------------------------------
// a local receiver

export type Hit = { path: string; headers: http.IncomingHttpHeaders; body: string; json: any };
export type Reply = { status: number; headers?: Record<string, string> } | 'hang';

export type Receiver = {
  port: number;
  url(path: string): string;
  reply(path: string, reply: Reply): void;
  hitsAt(path: string): Hit[];
  /** Requests held open by a 'hang' reply at `path`. */
  held(path: string): http.ServerResponse[];
  release(path: string, status: number): void;
  close(): Promise<void>;
};

export async function startReceiver(): Promise<Receiver> {
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

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const uniq = () => randomBytes(4).toString('hex');
let phoneSeq = 0;
export const phone = () => `+1415555${String(2000 + ++phoneSeq).padStart(4, '0')}`;

/** assertions.ts's `eventually` until `fn` returns a truthy value. */
export function waitFor<T>(what: string, fn: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  return eventually(what, async () => (await fn()) || undefined, timeoutMs) as Promise<NonNullable<T>>;
}

export function expectError(res: HttpResponse, status: number, code: string) {
  expect({ status: res.status, code: res.body?.error?.code }, res.text).toEqual({ status, code });
}

export function hmacHex(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** Verifies both signature schemes of a delivery the way a receiver would. */
export function expectSigned(hit: Hit, secret: string) {
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

export type Endpoint = { id: string; url: string; events: string[]; active: boolean; signing_secret: string; description: string | null };

export async function createEndpoint(t: TestApp, key: string, body: Record<string, unknown>): Promise<Endpoint> {
  const res = await t.rest('POST', '/v1/webhooks', { key, body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

export async function sendSms(t: TestApp, key: string, extra: Record<string, unknown> = {}): Promise<{ id: string; from: string; to: string }> {
  const res = await t.rest('POST', '/v1/messages/sms', { key, body: { to: phone(), body: 'hello webhooks', ...extra } });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

export function wsClient(baseUrl: string, apiKey: string): Client {
  return createClient({ url: `${baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey }, retryAttempts: 0, lazy: true });
}

export type Sub = { items: any[]; errors: unknown[]; dispose: () => void };

export function subscribe(client: Client, query: string, variables: Record<string, unknown> = {}): Sub {
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
export function busSubscriptions(app: App): number {
  let spy = busSpies.get(app);
  if (!spy) {
    spy = vi.spyOn(app.services.bus, 'subscribe');
    busSpies.set(app, spy);
  }
  return spy.mock.calls.length;
}

/** Subscribes and waits until the subscription is registered with the app's event bus. */
export async function subscribed(app: App, client: Client, query: string, variables: Record<string, unknown> = {}): Promise<Sub> {
  const before = busSubscriptions(app);
  const sub = subscribe(client, query, variables);
  await waitFor('the subscription to register', () => busSubscriptions(app) > before || sub.errors.length > 0);
  expect(sub.errors).toEqual([]);
  return sub;
}

export const EVENTS_SUB = 'subscription($types: [String!]) { events(types: $types) { id type sequence resourceId data createdAt } }';

// ---------------------------------------------------------------------------------------------
// apps

export type WebhookApps = { rt: TestApp; mc: TestApp; strict: TestApp; recv: Receiver; redirectTarget: Receiver; clients: Client[] };

/**
 * Starts the apps `which` names (and the two receivers) before the file's tests and closes them
 * after; the fields are set once the file's beforeAll hooks run. Every test gets a fresh second of
 * the frozen clocks (and so a fresh per-second burst allowance). `clients` are disposed at the end.
 */
export function useWebhookApps(which: { rt?: boolean; mc?: boolean; strict?: boolean }): WebhookApps {
  const apps = { clients: [] as Client[] } as unknown as WebhookApps;
  beforeAll(async () => {
    [apps.recv, apps.redirectTarget] = await Promise.all([startReceiver(), startReceiver()]);
    const [rt, mc, strict] = await Promise.all([
      which.rt ? startTestApp({ clock: systemClock, workers: true, env: { ...APP_ENV, SANDBOX_TEMPLATE_REVIEW_MS: '50' } }) : undefined,
      which.mc ? startTestApp({ workers: true, env: { ...APP_ENV, WEBHOOKS_TIMEOUT_MS: '300' } }) : undefined,
      which.strict ? startTestApp({ workers: false }) : undefined,
    ]);
    Object.assign(apps, { rt, mc, strict });
  });
  afterAll(async () => {
    for (const c of apps.clients) await c.dispose();
    await Promise.all([apps.rt?.close(), apps.mc?.close(), apps.strict?.close()]);
    await Promise.all([apps.recv?.close(), apps.redirectTarget?.close()]);
  });
  beforeEach(() => {
    (apps.mc?.clock as ManualClock | undefined)?.advance(1000);
    (apps.strict?.clock as ManualClock | undefined)?.advance(1000);
  });
  return apps;
}
