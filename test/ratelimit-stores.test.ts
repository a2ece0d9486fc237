/**
 * PgCounterStore, the rate-limit counters in PostgreSQL, over several pools as several instances
 * would hold them: batched takes and takes that arrive one at a time (a single statement each)
 * grant exactly the limits. The Redis store runs the same contract (ratelimit-redis.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { expectExactConcurrentTakes, expectExactSingleTakes } from './helpers/counterStores.ts';

let t: TestApp;
beforeAll(async () => { t = await startTestApp(); });
afterAll(async () => { await t?.close(); });

describe('batched counters (PgCounterStore over two pools, as two instances)', () => {
  it('concurrent takes grant exactly the limits, the second slot only with the first, without deadlocks', async () => {
    const { PgCounterStore } = await import('../src/platform/ratelimit/limiter.ts');
    const { createPool } = await import('../src/platform/db/orm.ts');
    const pools = [createPool(t.databaseUrl, 3), createPool(t.databaseUrl, 3)];
    try {
      await expectExactConcurrentTakes(pools.map((p) => new PgCounterStore(p)), `batch-${Date.now()}`);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('takes that arrive one at a time (a single statement each) race each other and batches exactly', async () => {
    const { PgCounterStore } = await import('../src/platform/ratelimit/limiter.ts');
    const { createPool } = await import('../src/platform/db/orm.ts');
    const pools = Array.from({ length: 5 }, () => createPool(t.databaseUrl, 2));
    try {
      await expectExactSingleTakes(pools.map((p) => new PgCounterStore(p)), `single-${Date.now()}`);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });
});

describe('how a batch of takes goes out', () => {
  it(`up to SMALL_BATCH takes as single statements side by side, larger batches as one rate_limit_take call; answers exact either way`, async () => {
    const { PgCounterStore, SMALL_BATCH } = await import('../src/platform/ratelimit/limiter.ts');
    const { createPool } = await import('../src/platform/db/orm.ts');
    const pool = createPool(t.databaseUrl, SMALL_BATCH + 1);
    const names: string[] = [];
    const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
    (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (config: unknown, ...rest: unknown[]) => {
      if (config && typeof config === 'object' && 'name' in config) names.push(String((config as { name: string }).name));
      return query(config, ...rest);
    };
    try {
      const store = new PgCounterStore(pool);
      const slots = (tag: string, limit: number) => {
        const expiresAt = new Date(Date.now() + 120_000);
        return { first: { bucket: `b:${tag}`, windowStart: 0, limit, expiresAt }, second: { bucket: `w:${tag}`, windowStart: 0, limit, expiresAt } };
      };
      // Submitted in one turn: one batch each time (the batcher gathers a turn's takes).
      const batch = async (n: number, tag: string, limit: number) => {
        names.length = 0;
        const { first, second } = slots(tag, limit);
        const answers = await Promise.all(Array.from({ length: n }, () => store.tryIncrementBoth(first, second)));
        return { names: [...names], admitted: answers.filter((a) => a.first !== null && a.second !== null).length };
      };
      const tag = `shape-${Date.now()}`;
      const small = await batch(SMALL_BATCH, `${tag}-small`, SMALL_BATCH - 1);
      expect(small.names).toEqual(Array(SMALL_BATCH).fill('rate_limit_take_both'));
      expect(small.admitted).toBe(SMALL_BATCH - 1);
      const large = await batch(SMALL_BATCH + 3, `${tag}-large`, SMALL_BATCH);
      expect(large.names).toEqual(['rate_limit_take']);
      expect(large.admitted).toBe(SMALL_BATCH);
    } finally {
      await pool.end();
    }
  });
});
