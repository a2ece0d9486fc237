/**
 * Rate limits through real HTTP: per-minute windows per API key and endpoint (shared by REST and
 * GraphQL), the per-second burst limit with its 5 s queue, and counters kept in PostgreSQL.
 * Time is the test app's ManualClock, so windows and queues move only when the test says so.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../src/app.ts';
import type { ManualClock } from '../src/platform/clock.ts';
import { createLogger } from '../src/platform/logger.ts';
import { startTestApp, type HttpResponse, type TestApp } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

let t: TestApp;
let clock: ManualClock;
beforeAll(async () => {
  t = await startTestApp();
  clock = t.clock as ManualClock;
});
afterAll(async () => { await t?.close(); });

const TEAM = '/v1/settings/team';
const TEAM_QUERY = '{ teamMembers(first: 1) { edges { cursor } } }';

/** Moves the clock to the start of the next minute (a fresh 60 s window and a fresh second); returns it in ms. */
function toNextMinute(): number {
  const now = clock.now().getTime();
  clock.set(Math.floor(now / 60_000) * 60_000 + 60_000);
  return clock.now().getTime();
}

/** Moves the clock to the start of the next second; returns it in ms. */
function toNextSecond(): number {
  const now = clock.now().getTime();
  clock.set(Math.floor(now / 1000) * 1000 + 1000);
  return clock.now().getTime();
}

/** Unix seconds at which the 60 s window containing `ms` ends. */
const windowEnd = (ms: number) => Math.floor(ms / 60_000) * 60 + 60;

/** Runs `n` calls one after another, moving the clock 1 s after every `perSecond` so the burst limit never queues. */
async function paced<T>(n: number, perSecond: number, call: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < n; i++) {
    if (i > 0 && i % perSecond === 0) clock.advance(1000);
    out.push(await call(i));
  }
  return out;
}

const waitFor = (cond: () => boolean, what: string): Promise<unknown> => eventually(what, () => cond() || undefined, 10_000, 5);

const waitForAsync = (cond: () => Promise<boolean>, what: string): Promise<unknown> => eventually(what, async () => (await cond()) || undefined, 4000, 10);

/** Starts `n` calls at once and tracks which have answered. */
function concurrently(n: number, call: () => Promise<HttpResponse>) {
  const done: (HttpResponse | undefined)[] = new Array(n).fill(undefined);
  const all = Promise.all(Array.from({ length: n }, (_, i) => call().then((r) => { done[i] = r; return r; })));
  return { all, resolved: () => done.filter((r): r is HttpResponse => r !== undefined) };
}

async function keyIdOf(orgId: string, key: string): Promise<string> {
  const { rows } = await t.db.query('select id from api_keys where organization_id = $1 and last4 = $2', [orgId, key.slice(-4)]);
  expect(rows).toHaveLength(1);
  return rows[0].id as string;
}

async function counter(bucket: string): Promise<{ window_start: number; count: number }[]> {
  const { rows } = await t.db.query('select window_start, count from rate_limit_counters where bucket = $1 order by window_start', [bucket]);
  return rows.map((r) => ({ window_start: Number(r.window_start), count: Number(r.count) }));
}

function rateHeaders(r: HttpResponse) {
  return {
    limit: r.headers.get('x-ratelimit-limit'),
    remaining: r.headers.get('x-ratelimit-remaining'),
    reset: r.headers.get('x-ratelimit-reset'),
  };
}

describe('rate-limit headers', () => {
  it('every authenticated response carries limit, a decreasing remaining and the window reset', async () => {
    const org = await t.createOrg('starter');
    const start = toNextMinute() + 7_500; // inside the window, not on its edge
    clock.set(start);
    const reset = String(windowEnd(start));

    const first = await t.rest('GET', TEAM, { key: org.testKey });
    expect(first.status).toBe(200);
    expect(rateHeaders(first)).toEqual({ limit: '120', remaining: '119', reset });

    const second = await t.rest('GET', TEAM, { key: org.testKey });
    expect(rateHeaders(second)).toEqual({ limit: '120', remaining: '118', reset });

    // The GraphQL twin reports the same bucket.
    const gql = await t.gql(TEAM_QUERY, {}, { key: org.testKey });
    expect(gql.status).toBe(200);
    expect(gql.body.errors).toBeUndefined();
    expect(rateHeaders(gql)).toEqual({ limit: '120', remaining: '117', reset });

    // Error responses of a matched route carry the headers of that route's bucket.
    const missing = await t.rest('GET', '/v1/settings/api-keys/key_doesnotexist', { key: org.testKey });
    expect(missing.status).toBe(404);
    expect(rateHeaders(missing)).toEqual({ limit: '120', remaining: '119', reset });
    const invalid = await t.rest('POST', '/v1/settings/api-keys', { key: org.testKey, body: { role: 'emperor' } });
    expect(invalid.status).toBe(422);
    expect(rateHeaders(invalid)).toEqual({ limit: '60', remaining: '59', reset });

    // The next window starts full again and resets one minute later.
    clock.advance(60_000);
    const later = await t.rest('GET', TEAM, { key: org.testKey });
    expect(rateHeaders(later)).toEqual({ limit: '120', remaining: '119', reset: String(Number(reset) + 60) });
  });
});

describe('per-minute window', () => {
  it('a starter key gets 120 GET /v1/settings/team per minute, then 429 RATE_LIMIT_EXCEEDED until the next minute', async () => {
    const org = await t.createOrg('starter');
    const windowStart = toNextMinute();

    const ok = await paced(120, 5, () => t.rest('GET', TEAM, { key: org.testKey }));
    expect(ok.map((r) => r.status)).toEqual(new Array(120).fill(200));
    expect(ok.map((r) => Number(r.headers.get('x-ratelimit-remaining')))).toEqual(Array.from({ length: 120 }, (_, i) => 119 - i));
    expect(clock.now().getTime() - windowStart).toBe(23_000);

    clock.advance(1000);
    const rejected = await t.rest('GET', TEAM, { key: org.testKey });
    expect(rejected.status).toBe(429);
    expect(rejected.body.error).toMatchObject({
      code: 'RATE_LIMIT_EXCEEDED', status: 429,
      details: { retry_after: 36, limit: 120, window: '60s', endpoint: 'GET /v1/settings/team' },
    });
    expect(rejected.headers.get('retry-after')).toBe('36');
    expect(rateHeaders(rejected)).toEqual({ limit: '120', remaining: '0', reset: String(windowEnd(windowStart)) });

    // Still rejected at the last moment of the window; retry_after never drops below 1.
    clock.set(windowStart + 59_999);
    const lastMoment = await t.rest('GET', TEAM, { key: org.testKey });
    expect(lastMoment.status).toBe(429);
    expect(lastMoment.headers.get('retry-after')).toBe('1');

    clock.set(windowStart + 60_000);
    const next = await t.rest('GET', TEAM, { key: org.testKey });
    expect(next.status).toBe(200);
    expect(rateHeaders(next)).toEqual({ limit: '120', remaining: '119', reset: String(windowEnd(windowStart) + 60) });
  });

  it('limits are per endpoint: another endpoint of the same key is unaffected', async () => {
    const org = await t.createOrg('starter');
    toNextMinute();
    await paced(120, 5, () => t.rest('GET', TEAM, { key: org.testKey }));
    clock.advance(1000);
    expect((await t.rest('GET', TEAM, { key: org.testKey })).status).toBe(429);
    const other = await t.rest('GET', '/v1/settings/organization', { key: org.testKey });
    expect(other.status).toBe(200);
    expect(rateHeaders(other)).toMatchObject({ limit: '120', remaining: '119' });
  });

  it('limits are per API key: a second key of the same organization keeps its full window', async () => {
    const org = await t.createOrg('starter');
    const secondKey = await t.createKey(org.orgId, 'developer');
    toNextMinute();
    await paced(120, 5, () => t.rest('GET', TEAM, { key: org.testKey }));
    clock.advance(1000);
    expect((await t.rest('GET', TEAM, { key: org.testKey })).status).toBe(429);

    const other = await t.rest('GET', TEAM, { key: secondKey });
    expect(other.status).toBe(200);
    expect(rateHeaders(other)).toMatchObject({ limit: '120', remaining: '119' });
    // The live key of the same organization is another key, too.
    const live = await t.rest('GET', TEAM, { key: org.liveKey });
    expect(live.status).toBe(200);
    expect(rateHeaders(live)).toMatchObject({ remaining: '119' });
    // And the exhausted key is still rejected.
    expect((await t.rest('GET', TEAM, { key: org.testKey })).status).toBe(429);
  });

  it('plans differ: a growth key gets 600 per minute on the same endpoint', async () => {
    const org = await t.createOrg('growth');
    toNextMinute();
    const r = await t.rest('GET', TEAM, { key: org.testKey });
    expect(rateHeaders(r)).toMatchObject({ limit: '600', remaining: '599' });
  });
});

describe('REST and GraphQL share one bucket', () => {
  it('GraphQL counts its first field\'s window at admission, with the burst slot, and gives it back for a refused document', async () => {
    const org = await t.createOrg('starter');
    const windowStart = toNextMinute();
    const keyId = await keyIdOf(org.orgId, org.testKey);
    const counted = async () => (await counter(`w:${keyId}:GET /v1/settings/team`))[0]?.count ?? 0;

    const ok = await t.gql(TEAM_QUERY, {}, { key: org.testKey });
    expect(ok.status).toBe(200);
    expect(rateHeaders(ok)).toEqual({ limit: '120', remaining: '119', reset: String(windowEnd(windowStart)) });
    expect(await counted()).toBe(1);

    // Refused before execution (unknown field): the window unit taken at admission is given back.
    const refused = await t.gql('{ teamMembers(first: 1) { edges { nope } } }', {}, { key: org.testKey });
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    expect(await counted()).toBe(1);

    // Two limited root fields: the first counted at admission, the second by the field plugin.
    const twice = await t.gql('{ a: teamMembers(first: 1) { edges { cursor } } b: teamMembers(first: 1) { edges { cursor } } }', {}, { key: org.testKey });
    expect(twice.body.errors, twice.text).toBeUndefined();
    expect(await counted()).toBe(3);
  });

  it('GET /v1/settings/team and Query.teamMembers count against one window', async () => {
    const org = await t.createOrg('starter');
    const windowStart = toNextMinute();

    const mixed = await paced(120, 5, async (i) => {
      const r = i % 2 === 0 ? await t.rest('GET', TEAM, { key: org.testKey }) : await t.gql(TEAM_QUERY, {}, { key: org.testKey });
      return { status: r.status, errors: (r.body as { errors?: unknown }).errors, remaining: r.headers.get('x-ratelimit-remaining') };
    });
    expect(mixed.map((m) => m.status)).toEqual(new Array(120).fill(200));
    expect(mixed.filter((m) => m.errors !== undefined)).toEqual([]);
    expect(mixed.map((m) => Number(m.remaining))).toEqual(Array.from({ length: 120 }, (_, i) => 119 - i));

    clock.advance(1000);
    const gql = await t.gql(TEAM_QUERY, {}, { key: org.testKey });
    expect(gql.status).toBe(429);
    expect(gql.body.errors).toHaveLength(1);
    expect(gql.body.errors![0].extensions).toMatchObject({
      code: 'RATE_LIMIT_EXCEEDED', status: 429, details: { limit: 120, window: '60s', retry_after: 36 },
    });
    expect(gql.body.data?.teamMembers ?? null).toBeNull();
    expect(gql.headers.get('retry-after')).toBe('36');
    expect(rateHeaders(gql)).toEqual({ limit: '120', remaining: '0', reset: String(windowEnd(windowStart)) });

    const rest = await t.rest('GET', TEAM, { key: org.testKey });
    expect(rest.status).toBe(429);
    expect(rest.body.error.code).toBe('RATE_LIMIT_EXCEEDED');

    // A GraphQL field with another REST twin still has its own window.
    const viewer = await t.gql('{ viewer { role } }', {}, { key: org.testKey });
    expect(viewer.status).toBe(200);
    expect(viewer.body.data).toEqual({ viewer: { role: 'owner' } });

    const keyId = await keyIdOf(org.orgId, org.testKey);
    expect(await counter(`w:${keyId}:GET /v1/settings/team`)).toEqual([{ window_start: windowStart / 1000, count: 120 }]);

    clock.set(windowStart + 60_000);
    const again = await t.gql(TEAM_QUERY, {}, { key: org.testKey });
    expect(again.status).toBe(200);
    expect(again.body.errors).toBeUndefined();
  });
});

describe('a rejected request changes nothing', () => {
  it('POST /v1/settings/api-keys over its 60/min starter limit creates no key and consumes no quota', async () => {
    const org = await t.createOrg('starter');
    const countKeys = async () => Number((await t.db.query('select count(*) from api_keys where organization_id = $1', [org.orgId])).rows[0].count);
    const before = await countKeys();
    const windowStart = toNextMinute();

    const created = await paced(60, 5, (i) => t.rest('POST', '/v1/settings/api-keys', { key: org.testKey, body: { role: 'viewer', name: `k${i}` } }));
    expect(created.map((r) => r.status)).toEqual(new Array(60).fill(201));
    expect(await countKeys()).toBe(before + 60);

    clock.advance(1000);
    const rejected = await t.rest('POST', '/v1/settings/api-keys', {
      key: org.testKey, body: { role: 'viewer', name: 'one too many' }, headers: { 'Idempotency-Key': 'over-the-limit' },
    });
    expect(rejected.status).toBe(429);
    expect(rejected.body.error).toMatchObject({ code: 'RATE_LIMIT_EXCEEDED', details: { limit: 60, window: '60s' } });
    expect(rejected.headers.get('retry-after')).toBe(String(60 - 12));
    expect(await countKeys()).toBe(before + 60);
    const named = await t.db.query('select 1 from api_keys where organization_id = $1 and name = $2', [org.orgId, 'one too many']);
    expect(named.rowCount).toBe(0);
    // Not remembered for idempotency either, and the counter did not move past the limit.
    const idem = await t.db.query('select 1 from idempotency_keys where organization_id = $1 and key = $2', [org.orgId, 'over-the-limit']);
    expect(idem.rowCount).toBe(0);
    const keyId = await keyIdOf(org.orgId, org.testKey);
    expect(await counter(`w:${keyId}:POST /v1/settings/api-keys`)).toEqual([{ window_start: windowStart / 1000, count: 60 }]);
    const again = await t.rest('POST', '/v1/settings/api-keys', { key: org.testKey, body: { role: 'viewer' } });
    expect(again.status).toBe(429);
    expect(await counter(`w:${keyId}:POST /v1/settings/api-keys`)).toEqual([{ window_start: windowStart / 1000, count: 60 }]);
    expect(await countKeys()).toBe(before + 60);

    clock.set(windowStart + 60_000);
    const nextMinute = await t.rest('POST', '/v1/settings/api-keys', { key: org.testKey, body: { role: 'viewer' } });
    expect(nextMinute.status).toBe(201);
    expect(await countKeys()).toBe(before + 61);
  });
});

describe('a refused admission answers first', () => {
  // REST reads the body, checks the input and runs an operation's read-only `prepare` (agents.chat:
  // the agent and conversation) while the admission is under way; none of it may show past a 429.
  it('over the window, a chat to an unknown agent, with invalid input or by a role that may not chat gets 429, and the denial is not audited', async () => {
    const org = await t.createOrg('starter');
    const windowStart = toNextMinute();
    const chat = (key: string, body: Record<string, unknown>) => t.rest('POST', '/v1/agents/agt_doesnotexist/chat', { key, body });
    const admitted = await paced(20, 5, () => chat(org.testKey, { message: 'hi' }));
    expect(admitted.map((r) => [r.status, r.body.error?.code])).toEqual(new Array(20).fill([404, 'NOT_FOUND']));
    clock.advance(1000);
    for (const body of [{ message: 'hi' }, {}, { message: 'hi', stream: true }]) {
      const refused = await chat(org.testKey, body);
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
    }

    const viewer = await t.createKey(org.orgId, 'viewer');
    const viewerId = await keyIdOf(org.orgId, viewer);
    const denials = async () => (await t.db.query(`select request_id from audit_log_entries where action = 'auth.permission_denied' and actor_id = $1`, [viewerId])).rows.map((r) => r.request_id as string);
    const denied = await paced(20, 5, () => chat(viewer, { message: 'hi' }));
    expect(denied.map((r) => r.status)).toEqual(new Array(20).fill(403));
    clock.advance(1000);
    const refused = await chat(viewer, { message: 'hi' });
    expect(refused.status).toBe(429);
    // The next minute's denial is audited; the refused request never was.
    clock.set(windowStart + 60_000);
    const later = await chat(viewer, { message: 'hi' });
    expect(later.status).toBe(403);
    // Denials are audited by writes of their own, in no order: wait for all 21 (20 of the first minute, the later one).
    await waitForAsync(async () => { const d = await denials(); return d.length >= 21 && d.includes(later.body.meta.request_id); }, 'every denial audited, the later one too');
    const audited = await denials();
    expect(audited).toHaveLength(21);
    expect(audited).not.toContain(refused.body.meta.request_id);
  });
});

describe('burst limit', () => {
  it('a starter key runs 5 requests per second at once and queues the overflow for the next second', async () => {
    const org = await t.createOrg('starter');
    const second = toNextMinute() + 250;
    clock.set(second);
    expect(clock.pendingSleepers).toBe(0);

    const burst = concurrently(7, () => t.rest('GET', TEAM, { key: org.testKey }));
    await waitFor(() => clock.pendingSleepers === 2 && burst.resolved().length === 5, '5 answers and 2 queued requests');
    expect(burst.resolved().map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(clock.pendingSleepers).toBe(2);

    clock.advance(1000);
    const all = await burst.all;
    expect(all.map((r) => r.status)).toEqual(new Array(7).fill(200));
    expect(clock.pendingSleepers).toBe(0);
    // Queued requests count against the window too: 7 requests, remaining down to 113.
    expect(all.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b)).toEqual([113, 114, 115, 116, 117, 118, 119]);

    // The counters live in PostgreSQL: 5 slots of the first second, 2 of the next.
    const keyId = await keyIdOf(org.orgId, org.testKey);
    const sec = Math.floor(second / 1000);
    expect(await counter(`b:${keyId}`)).toEqual([{ window_start: sec, count: 5 }, { window_start: sec + 1, count: 2 }]);
    expect(await counter(`w:${keyId}:GET /v1/settings/team`)).toEqual([{ window_start: Math.floor(second / 60_000) * 60, count: 7 }]);
  });

  it('rejects with BURST_LIMIT_EXCEEDED once this second and the next 5 seconds are full, and serves the queued ones in order', async () => {
    const org = await t.createOrg('starter');
    const start = toNextMinute();
    expect(clock.pendingSleepers).toBe(0);

    const burst = concurrently(31, () => t.rest('GET', TEAM, { key: org.testKey }));
    await waitFor(() => clock.pendingSleepers === 25 && burst.resolved().length === 6, '5 answers, 1 rejection and 25 queued requests');
    const early = burst.resolved();
    const rejected = early.filter((r) => r.status === 429);
    expect(rejected).toHaveLength(1);
    expect(early.filter((r) => r.status === 200)).toHaveLength(5);
    expect(rejected[0]!.body.error).toMatchObject({ code: 'BURST_LIMIT_EXCEEDED', status: 429, details: { limit: 5, window: '1s', retry_after: 5 } });
    expect(rejected[0]!.headers.get('retry-after')).toBe('5');

    // Each second releases the next 5 queued requests.
    for (let s = 1; s <= 5; s++) {
      clock.advance(1000);
      await waitFor(() => burst.resolved().length === 6 + 5 * s, `the requests queued for second +${s}`);
      expect(clock.pendingSleepers).toBe(25 - 5 * s);
    }
    const all = await burst.all;
    expect(all.filter((r) => r.status === 200)).toHaveLength(30);
    expect(all.filter((r) => r.status === 429)).toHaveLength(1);

    const keyId = await keyIdOf(org.orgId, org.testKey);
    const sec = start / 1000;
    expect(await counter(`b:${keyId}`)).toEqual(Array.from({ length: 6 }, (_, i) => ({ window_start: sec + i, count: 5 })));
    // The rejected request never reached the window.
    expect(await counter(`w:${keyId}:GET /v1/settings/team`)).toEqual([{ window_start: Math.floor(start / 60_000) * 60, count: 30 }]);
  });

  it('a growth key runs 25 requests in one second without queueing', async () => {
    const org = await t.createOrg('growth');
    toNextSecond();
    const burst = concurrently(26, () => t.rest('GET', TEAM, { key: org.testKey }));
    await waitFor(() => clock.pendingSleepers === 1 && burst.resolved().length === 25, '25 answers and 1 queued request');
    expect(burst.resolved().every((r) => r.status === 200)).toBe(true);
    clock.advance(1000);
    expect((await burst.all).map((r) => r.status)).toEqual(new Array(26).fill(200));
  });

  it('the burst allowance is per key: another key of the same organization is not queued', async () => {
    const org = await t.createOrg('starter');
    toNextSecond();
    const first = concurrently(5, () => t.rest('GET', TEAM, { key: org.testKey }));
    expect((await first.all).map((r) => r.status)).toEqual(new Array(5).fill(200));
    const other = await t.rest('GET', TEAM, { key: org.liveKey });
    expect(other.status).toBe(200);
    expect(clock.pendingSleepers).toBe(0);
  });
});

describe('two instances over one database', () => {
  let second: App;
  let secondUrl: string;
  beforeAll(async () => {
    second = await createApp({ config: t.config, databaseUrl: t.databaseUrl, clock, log: createLogger('silent') });
    await second.start({ workers: false });
    const { port } = await second.http.listen(0, '127.0.0.1');
    secondUrl = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => { await second?.stop(); });

  const viaSecond = async (path: string, key: string): Promise<HttpResponse> => {
    const res = await fetch(`${secondUrl}${path}`, { headers: { 'X-API-Key': key } });
    const text = await res.text();
    return { status: res.status, headers: res.headers, text, body: JSON.parse(text) };
  };

  it('share window and burst counters', async () => {
    const org = await t.createOrg('starter');
    toNextMinute();
    const a = await t.rest('GET', TEAM, { key: org.testKey });
    const b = await viaSecond(TEAM, org.testKey);
    const c = await t.rest('GET', TEAM, { key: org.testKey });
    expect([a, b, c].map((r) => r.status)).toEqual([200, 200, 200]);
    expect([a, b, c].map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['119', '118', '117']);

    // Three slots of this second are used; 2 more on the first instance fill it, so the second instance queues.
    expect((await Promise.all([0, 1].map(() => t.rest('GET', TEAM, { key: org.testKey })))).map((r) => r.status)).toEqual([200, 200]);
    const queued = viaSecond(TEAM, org.testKey);
    await waitFor(() => clock.pendingSleepers === 1, 'the request queued on the second instance');
    clock.advance(1000);
    const late = await queued;
    expect(late.status).toBe(200);
    expect(late.headers.get('x-ratelimit-remaining')).toBe('114');
  });
});
