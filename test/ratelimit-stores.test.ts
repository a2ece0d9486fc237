/**
 * PgCounterStore, the rate-limit counters in PostgreSQL, over several pools as several instances
 * would hold them: batched takes and takes that arrive one at a time (a single statement each)
 * grant exactly the limits. The Redis store runs the same contract (ratelimit-redis.test.ts).
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
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
