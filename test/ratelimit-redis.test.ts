/** With REDIS_URL set, rate-limit counters live in Redis and keep the same semantics. */
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { expectExactConcurrentTakes, expectExactSingleTakes } from './helpers/counterStores.ts';
import { RedisCounterStore } from '../src/platform/ratelimit/redisStore.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const reachable = await new Promise<boolean>((resolve) => {
  const u = new URL(REDIS_URL);
  const s = net.connect({ host: u.hostname, port: Number(u.port || 6379) });
  s.once('connect', () => { s.destroy(); resolve(true); });
  s.once('error', () => resolve(false));
});

describe.skipIf(!reachable)('rate limits on Redis', () => {
  const prefix = `test-${randomBytes(4).toString('hex')}:`;
  let t: TestApp;
  let org: TestOrg;
  let redis: Redis;
  beforeAll(async () => {
    t = await startTestApp({ env: { REDIS_URL, REDIS_PREFIX: prefix } });
    (t.clock as ManualClock).set(Math.ceil(t.clock.now().getTime() / 60_000) * 60_000);
    org = await t.createOrg('starter');
    redis = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    const keys = await redis.keys(`rl:${prefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await t?.close();
  });

  it('counts windows in Redis, not PostgreSQL, and reports them in the headers', async () => {
    const first = await t.rest('GET', '/v1/settings/team', { key: org.testKey });
    const second = await t.rest('GET', '/v1/settings/team', { key: org.testKey });
    expect(first.headers.get('x-ratelimit-limit')).toBe('120');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('119');
    expect(second.headers.get('x-ratelimit-remaining')).toBe('118');
    const keys = await redis.keys(`rl:${prefix}w:*`);
    expect(keys.length).toBe(1);
    expect(await redis.get(keys[0]!)).toBe('2');
    expect(await redis.pttl(keys[0]!)).toBeGreaterThan(0);
    const { rows } = await t.db.query('select count(*)::int as n from rate_limit_counters');
    expect(rows[0].n).toBe(0);
  });

  it('queues a burst over the per-second limit and rejects past the window', async () => {
    const clock = t.clock as ManualClock;
    clock.advance(1000);
    const pending = Array.from({ length: 6 }, () => t.rest('GET', '/v1/settings/organization', { key: org.liveKey }));
    for (let i = 0; i < 200 && clock.pendingSleepers < 1; i++) await new Promise((r) => setTimeout(r, 10));
    expect(clock.pendingSleepers).toBe(1);
    clock.advance(1000);
    const results = await Promise.all(pending);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);

    // Exhaust the 60/min write window of POST /v1/settings/api-keys (paced under the burst limit).
    let last = 0;
    for (let i = 0; i < 61; i++) {
      if (i % 5 === 0) clock.advance(1000);
      last = (await t.rest('POST', '/v1/settings/api-keys', { key: org.liveKey, body: { role: 'viewer' } })).status;
      if (i < 60) expect(last).toBe(201);
    }
    expect(last).toBe(429);
  });

  it('batched takes from two stores (two instances) grant exactly the limits, the second slot only with the first', async () => {
    const stores = [new RedisCounterStore(REDIS_URL, `rl:${prefix}`), new RedisCounterStore(REDIS_URL, `rl:${prefix}`)];
    try {
      await expectExactConcurrentTakes(stores, `batch-${Date.now()}`);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('takes one at a time from several stores race batches exactly', async () => {
    const stores = Array.from({ length: 4 }, () => new RedisCounterStore(REDIS_URL, `rl:${prefix}`));
    try {
      await expectExactSingleTakes(stores, `single-${Date.now()}`);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});
