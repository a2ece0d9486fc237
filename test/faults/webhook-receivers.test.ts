/**
 * Fault scenario 4: receivers that misbehave all at once, next to one that behaves. One event fans
 * out to a 500, a 503 with Retry-After, a 410, a receiver that hangs past the deadline, a TCP
 * server that accepts the connection and never reads, and a redirect to the cloud metadata
 * address; the well-behaved endpoint is delivered while the others still hold their requests, and
 * each misbehaviour ends as documented: a retry on the schedule, the receiver's Retry-After, the
 * endpoint disabled, a timeout, a refused redirect (never followed). Real clock and real workers.
 */
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import { RETRY_SCHEDULE_MS } from '../../src/modules/webhooks/webhooks.service.ts';
import { startTestApp, type TestApp } from '../helpers/testApp.ts';
import { eventually } from '../helpers/assertions.ts';

const TIMEOUT_MS = 1500;
const RETRY_AFTER_S = 120;

type Row = { status: string; attempt: number; next_attempt_at: Date | null; http_status: number | null; last_error: string | null; updated_at: Date };

const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> => eventually(what, async () => (await fn()) || undefined, timeoutMs, 25);

let t: TestApp;
let server: http.Server;
let silent: net.Server;
const held: http.ServerResponse[] = [];
const sockets: net.Socket[] = [];
const hits = new Map<string, number>();
let port = 0;
let silentPort = 0;
let silentAccepted = 0;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    req.resume();
    req.on('end', () => {
      if (path === '/500') res.writeHead(500).end('boom');
      else if (path === '/503') res.writeHead(503, { 'Retry-After': String(RETRY_AFTER_S) }).end('busy');
      else if (path === '/410') res.writeHead(410).end('gone');
      else if (path === '/metadata') res.writeHead(302, { Location: 'http://169.254.169.254/latest/meta-data/iam/security-credentials/' }).end();
      else if (path === '/hang') held.push(res);
      else res.writeHead(200).end('ok');
    });
  });
  // Accepts the connection and never reads a byte, never answers.
  silent = net.createServer((socket) => {
    silentAccepted++;
    socket.pause();
    sockets.push(socket);
  });
  await Promise.all([
    new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r())),
    new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r())),
  ]);
  port = (server.address() as AddressInfo).port;
  silentPort = (silent.address() as AddressInfo).port;
  t = await startTestApp({
    clock: systemClock, workers: true,
    env: { WEBHOOKS_ALLOW_LOOPBACK: '1', WEBHOOKS_POLL_INTERVAL_MS: '50', WEBHOOKS_TIMEOUT_MS: String(TIMEOUT_MS), SANDBOX_SEND_LATENCY_MS: '0' },
  });
});

afterAll(async () => {
  for (const res of held) res.destroy();
  for (const s of sockets) s.destroy();
  server?.closeAllConnections();
  await Promise.all([
    new Promise<void>((r) => (server ? server.close(() => r()) : r())),
    new Promise<void>((r) => (silent ? silent.close(() => r()) : r())),
  ]);
  await t?.close();
});

describe('misbehaving webhook receivers', () => {
  it('each misbehaviour ends as documented, and the well-behaved endpoint is served while the others hang', async () => {
    const org = await t.createOrg('enterprise', 'Misbehaving receivers');
    const key = org.testKey;
    const urls: Record<string, string> = {
      e500: `http://127.0.0.1:${port}/500`,
      e503: `http://127.0.0.1:${port}/503`,
      e410: `http://127.0.0.1:${port}/410`,
      hang: `http://127.0.0.1:${port}/hang`,
      silent: `http://127.0.0.1:${silentPort}/never-reads`,
      metadata: `http://127.0.0.1:${port}/metadata`,
      good: `http://127.0.0.1:${port}/good`,
    };
    const ids: Record<string, string> = {};
    for (const [name, url] of Object.entries(urls)) {
      const res = await t.rest('POST', '/v1/webhooks', { key, body: { url, events: ['message.queued'] } });
      expect(res.status, res.text).toBe(201);
      ids[name] = res.body.data.id;
    }
    const row = async (name: string): Promise<Row | undefined> =>
      (await t.db.query<Row>('select status, attempt, next_attempt_at, http_status, last_error, updated_at from webhook_deliveries where endpoint_id = $1', [ids[name]])).rows[0];

    const sent = await t.rest('POST', '/v1/messages/sms', { key, body: { to: '+14155550100', body: 'misbehaving receivers' } });
    expect(sent.status, sent.text).toBe(201);

    // The good endpoint succeeds while the hanging and the silent receivers still hold their requests.
    await waitFor('both slow receivers to be reached', async () => held.length === 1 && silentAccepted === 1);
    const good = await waitFor('the good delivery', async () => ((await row('good'))?.status === 'success' ? row('good') : undefined));
    expect(good).toMatchObject({ status: 'success', attempt: 1, http_status: 200 });
    expect(held.filter((r) => !r.writableEnded && !r.destroyed)).toHaveLength(1);
    expect(sockets.filter((s) => !s.destroyed)).toHaveLength(1);
    expect(await row('hang')).toMatchObject({ status: 'pending', attempt: 0 });
    expect(await row('silent')).toMatchObject({ status: 'pending', attempt: 0 });

    const attempted = async (name: string) => waitFor(`the first attempt to ${name}`, async () => {
      const r = await row(name);
      return r && r.attempt >= 1 && r.status !== 'pending' ? r : undefined;
    });
    const delayAfter = (r: Row) => r.next_attempt_at!.getTime() - r.updated_at.getTime();

    // 500: a failed attempt, retried on the schedule's first step.
    const e500 = await attempted('e500');
    expect(e500).toMatchObject({ status: 'failed', http_status: 500, last_error: 'HTTP 500' });
    expect(delayAfter(e500)).toBeGreaterThanOrEqual(RETRY_SCHEDULE_MS[0]! * 0.95);
    expect(delayAfter(e500)).toBeLessThanOrEqual(RETRY_SCHEDULE_MS[0]! * 1.05);

    // 503 with Retry-After: the receiver's delay, not the schedule's minute.
    const e503 = await attempted('e503');
    expect(e503).toMatchObject({ status: 'failed', http_status: 503 });
    expect(delayAfter(e503)).toBeGreaterThanOrEqual(RETRY_AFTER_S * 1000 - 1000);
    expect(delayAfter(e503)).toBeLessThanOrEqual(RETRY_AFTER_S * 1000 + 1000);

    // 410: delivery cancelled and the endpoint disabled.
    const e410 = await attempted('e410');
    expect(e410).toMatchObject({ status: 'cancelled', http_status: 410, next_attempt_at: null });
    const gone = await t.rest('GET', `/v1/webhooks/${ids.e410}`, { key });
    expect(gone.body.data.active).toBe(false);

    // Redirect to the metadata address: a failure, never followed (the only hit is ours).
    const meta = await attempted('metadata');
    expect(meta).toMatchObject({ status: 'failed', http_status: 302, last_error: 'HTTP 302' });
    expect(meta.next_attempt_at).not.toBeNull();
    expect(hits.get('/metadata')).toBe(1);

    // Hangs past the deadline, and accepts without reading: both time out and are scheduled again.
    for (const name of ['hang', 'silent']) {
      const r = await attempted(name);
      expect(r, name).toMatchObject({ status: 'failed', http_status: null });
      expect(r.last_error, name).toMatch(/^timeout/);
      expect(delayAfter(r)).toBeGreaterThanOrEqual(RETRY_SCHEDULE_MS[0]! * 0.95);
    }
    // Nothing was delivered twice: one attempt per endpoint, one request per receiver.
    expect([...hits.entries()].sort()).toEqual([['/410', 1], ['/500', 1], ['/503', 1], ['/good', 1], ['/hang', 1], ['/metadata', 1]]);
    expect(silentAccepted).toBe(1);
  });
});
