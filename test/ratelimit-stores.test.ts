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

  it('takes queued in the turn of a paired read ride in its statement, answered exactly as from their own; a failed pair gives them back', async () => {
    const { PgCounterStore } = await import('../src/platform/ratelimit/limiter.ts');
    const { PairedReads } = await import('../src/platform/db/pairedReads.ts');
    const { createPool } = await import('../src/platform/db/orm.ts');
    const pool = createPool(t.databaseUrl, 3);
    const other = createPool(t.databaseUrl, 1);
    // Which statements went out, by name.
    const sent: string[] = [];
    const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
    (pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args: unknown[]) => {
      const config = args[0] as { name?: string };
      sent.push(config.name ?? 'unnamed');
      return query(...args);
    };
    try {
      const store = new PgCounterStore(pool);
      expect(store.rider(other)).toBeUndefined();
      // Two echo reads: part a answers each number doubled, part b fails its item on a negative number.
      const echo = (factor: number) => ({
        params: 1,
        sql: (first: number) => `select n, n * ${factor} as v from unnest($${first}::int[]) as n`,
        values: (items: readonly number[]) => [`{${items.join(',')}}`],
        answers: (rows: readonly Record<string, unknown>[], items: readonly number[]) => items.map((i) => (i < 0 && factor === 3 ? new Error('negative') : Number(rows.find((r) => r.n === i)?.v))),
      });
      const paired = new PairedReads({ pool, name: 't_ride', a: echo(2), b: echo(3), rider: store.rider(pool)! });
      const tag = `ride-${Date.now()}`;
      const expiresAt = new Date(Date.now() + 120_000);
      const slot = (bucket: string, limit: number) => ({ bucket: `${tag}:${bucket}`, windowStart: 1, limit, expiresAt });
      // Six requests in one turn, each a take (burst limit 4, window limit 3) then a read.
      const takes = Array.from({ length: 6 }, () => store.tryIncrementBoth(slot('b', 4), slot('w', 3)));
      const reads = [1, 2, 3, 4, 5, 6].map((i) => paired.read(i, i));
      const taken = await Promise.all(takes);
      expect(taken).toEqual([
        { first: 1, second: 1 }, { first: 2, second: 2 }, { first: 3, second: 3 }, { first: 4, second: null }, { first: null, second: null }, { first: null, second: null },
      ]);
      expect((await Promise.all(reads)).map((r) => [r.a.status === 'fulfilled' && r.a.value, r.b.status === 'fulfilled' && r.b.value])).toEqual([[2, 3], [4, 6], [6, 9], [8, 12], [10, 15], [12, 18]]);
      // One statement for the six takes and the six reads: the pair's statement with the takes riding.
      expect(sent.filter((n) => n.startsWith('rate_limit') || n.startsWith('t_ride'))).toHaveLength(1);
      expect(sent[0]).toMatch(/^t_ride_/);
      expect(await store.count(`${tag}:w`, 1)).toBe(3);

      // A pair whose statement fails (an out-of-range value for int): its reads fail, the takes go alone.
      sent.length = 0;
      const more = [store.tryIncrementBoth(slot('b2', 4), slot('w2', 3)), store.tryIncrementBoth(slot('b2', 4), slot('w2', 3))];
      const failed = paired.read(2 ** 40, 1);
      expect((await failed).a.status).toBe('rejected');
      expect(await Promise.all(more)).toEqual([{ first: 1, second: 1 }, { first: 2, second: 2 }]);
      expect(sent.filter((n) => n.startsWith('rate_limit'))).toHaveLength(1);
      expect(await store.count(`${tag}:w2`, 1)).toBe(2);
    } finally {
      await Promise.all([pool.end(), other.end()]);
    }
  });
});
