/**
 * Fault scenario 6 (quick form): admission control. Past HTTP_MAX_IN_FLIGHT API requests at once,
 * a request waits up to HTTP_ADMISSION_WAIT_MS for a slot, then is answered with 503
 * SERVICE_UNAVAILABLE and Retry-After (REST envelope, or GraphQL errors on /graphql); health checks are not counted; a slot freed
 * admits the next request. Here the bound is 1 and the one slot is held by a request whose body
 * has not finished arriving.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestOrg } from '../helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
beforeAll(async () => {
  t = await startTestApp({ env: { HTTP_MAX_IN_FLIGHT: '1' } });
  org = await t.createOrg('enterprise');
});
afterAll(async () => {
  await t?.close();
});

/** A POST whose body is half sent: admitted, then held until `finish()`. */
function heldRequest(app: TestApp = t, key: string = org.testKey): { finish(): Promise<number>; abort(): void } {
  const body = JSON.stringify({ to: '+14155550100', body: 'held in flight' });
  const url = new URL('/v1/messages/sms', app.baseUrl);
  const req = http.request({ host: url.hostname, port: url.port, method: 'POST', path: url.pathname, agent: false,
    headers: { 'X-API-Key': key, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } });
  const status = new Promise<number>((resolve, reject) => {
    req.on('response', (res) => { res.resume(); res.on('end', () => resolve(res.statusCode ?? 0)); });
    req.on('error', reject);
  });
  req.write(body.slice(0, 10));
  req.flushHeaders();
  return {
    finish: () => { req.end(body.slice(10)); return status; },
    abort: () => { status.catch(() => {}); req.destroy(); },
  };
}

describe('admission control (HTTP_MAX_IN_FLIGHT)', () => {
  it('sheds API requests past the bound with 503 SERVICE_UNAVAILABLE and Retry-After, and admits again once a slot frees', async () => {
    expect((await t.rest('GET', '/v1/settings/organization', { key: org.testKey })).status).toBe(200);
    const held = heldRequest();
    // Let the server take the held request in.
    await new Promise((r) => setTimeout(r, 200));

    const shed = await t.rest('GET', '/v1/settings/organization', { key: org.testKey });
    expect(shed.status).toBe(503);
    expect(shed.headers.get('retry-after')).toBe('1');
    expect(shed.body.error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', details: { retry_after: 1, reason: 'overloaded' } });
    const gql = await t.gql('{ viewer { role } }', {}, { key: org.testKey });
    expect(gql.status).toBe(503);
    expect(gql.body.errors?.[0]?.extensions).toMatchObject({ code: 'SERVICE_UNAVAILABLE', details: { reason: 'overloaded' } });
    // Health checks and unknown paths are not API requests: never shed.
    expect((await t.rest('GET', '/healthz')).status).toBe(200);
    expect((await t.rest('GET', '/readyz')).status).toBe(200);

    expect(await held.finish()).toBe(201);
    expect((await t.rest('GET', '/v1/settings/organization', { key: org.testKey })).status).toBe(200);
  });

  it('lets a request past the bound wait for a slot (HTTP_ADMISSION_WAIT_MS) and answers it once one frees', async () => {
    const waiting = await startTestApp({ env: { HTTP_MAX_IN_FLIGHT: '1', HTTP_ADMISSION_WAIT_MS: '5000' } });
    try {
      const o = await waiting.createOrg('enterprise');
      const held = heldRequest(waiting, o.testKey);
      await new Promise((r) => setTimeout(r, 200));
      const started = performance.now();
      const queued = waiting.rest('GET', '/v1/settings/organization', { key: o.testKey });
      await new Promise((r) => setTimeout(r, 500));
      expect(await held.finish()).toBe(201);
      const answer = await queued;
      expect(answer.status).toBe(200);
      // It was answered after the held request finished, not at once.
      expect(performance.now() - started).toBeGreaterThanOrEqual(450);
    } finally {
      await waiting.close();
    }
  });

  it('gives the slot back when the client goes away', async () => {
    const held = heldRequest();
    await new Promise((r) => setTimeout(r, 200));
    expect((await t.rest('GET', '/v1/settings/organization', { key: org.testKey })).status).toBe(503);
    held.abort();
    await new Promise((r) => setTimeout(r, 200));
    expect((await t.rest('GET', '/v1/settings/organization', { key: org.testKey })).status).toBe(200);
  });

  it('listens with a deep accept queue (HTTP_LISTEN_BACKLOG, 4096 capped by somaxconn), not Node’s 511', () => {
    // A listening socket's Send-Q in `ss -lnt` is its backlog. With 511, 3× overload overflowed the
    // queue and the kernel dropped connections (clients retried their SYN seconds later).
    const port = new URL(t.baseUrl).port;
    const line = execFileSync('ss', ['-lntH', `sport = :${port}`], { encoding: 'utf8' }).trim().split('\n')[0] ?? '';
    const backlog = Number(line.trim().split(/\s+/)[2]);
    const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
    expect(backlog).toBe(Math.min(4096, somaxconn));
  });
});

describe('the in-flight bound under event-loop delay (HTTP_MAX_LOOP_DELAY_MS)', () => {
  let lagging: TestApp | undefined;
  afterAll(async () => { await lagging?.close(); });

  it('admits fewer requests while the loop lags, down to 8 at once, and all of them again once it keeps time', async () => {
    // No wait for a slot: the bound rises again within the wait, and this test shows the cut itself.
    lagging = await startTestApp({ env: { HTTP_MAX_IN_FLIGHT: '256', HTTP_MAX_LOOP_DELAY_MS: '20', HTTP_ADMISSION_WAIT_MS: '0' } });
    const o = await lagging.createOrg('enterprise');
    const held = Array.from({ length: 8 }, () => heldRequest(lagging!, o.testKey));
    await new Promise((r) => setTimeout(r, 300));
    // This process's loop is the app's: keep it late for a dozen samples (100 ms each).
    for (let i = 0; i < 14; i++) {
      const until = performance.now() + 150;
      while (performance.now() < until) { /* busy */ }
      await new Promise((r) => setImmediate(r));
    }
    const shed = await lagging.rest('GET', '/v1/settings/organization', { key: o.testKey });
    expect(shed.status).toBe(503);
    expect(shed.body.error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', details: { reason: 'overloaded' } });
    // The loop keeps time again: the bound is back within a second.
    await new Promise((r) => setTimeout(r, 1500));
    expect((await lagging.rest('GET', '/v1/settings/organization', { key: o.testKey })).status).toBe(200);
    for (const h of held) expect(await h.finish()).toBe(201);
  }, 30_000);
});

