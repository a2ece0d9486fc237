/** Contract for batched counter stores: concurrent takes over shared buckets, as two instances would make them. */
import { expect } from 'vitest';
import type { CounterStore } from '../../src/platform/ratelimit/limiter.ts';

export async function expectExactConcurrentTakes(stores: CounterStore[], tag: string): Promise<void> {
  const expiresAt = new Date(Date.now() + 120_000);
  // 400 requests over 4 burst buckets (limit 50 each) and 2 window buckets (limit 70 each), interleaved
  // across the stores so batches of both touch the same rows in different request orders.
  const takes = Array.from({ length: 400 }, (_, i) => stores[i % stores.length]!.tryIncrementBoth(
    { bucket: `${tag}:b${i % 4}`, windowStart: 1, limit: 50, expiresAt },
    { bucket: `${tag}:w${(i >> 2) % 2}`, windowStart: 1, limit: 70, expiresAt },
  ));
  const results = await Promise.all(takes);
  const firsts = results.filter((r) => r.first !== null);
  expect(firsts).toHaveLength(200);
  expect(results.filter((r) => r.first === null).every((r) => r.second === null)).toBe(true);
  // Each window bucket grants min(its limit, the requests that got a burst slot).
  for (let w = 0; w < 2; w++) {
    const inWindow = results.filter((_, i) => (i >> 2) % 2 === w);
    const eligible = inWindow.filter((r) => r.first !== null).length;
    expect(inWindow.filter((r) => r.second !== null)).toHaveLength(Math.min(70, eligible));
    expect(await stores[w % stores.length]!.count(`${tag}:w${w}`, 1)).toBe(Math.min(70, eligible));
  }
  // Each bucket hands out the counts 1..limit exactly once.
  for (let b = 0; b < 4; b++) {
    const counts = results.filter((_, i) => i % 4 === b && results[i]!.first !== null).map((r) => r.first).sort((x, y) => x! - y!);
    expect(counts).toEqual(Array.from({ length: 50 }, (_, k) => k + 1));
  }
  expect(await stores[stores.length - 1]!.tryIncrement(`${tag}:b0`, 1, 50, expiresAt)).toBeNull();
  expect(await stores[stores.length - 1]!.tryIncrement(`${tag}:fresh`, 1, 1, expiresAt)).toBe(1);
}

/**
 * Contract for takes that reach the store one at a time (PgCounterStore answers a batch of one with a
 * single statement), racing each other and a store that batches: `stores[0]` sends its share all at
 * once (batches of many), every other store one after another. Same exactness as above.
 */
export async function expectExactSingleTakes(stores: CounterStore[], tag: string): Promise<void> {
  const expiresAt = new Date(Date.now() + 120_000);
  const take = (store: CounterStore, i: number) => store.tryIncrementBoth(
    { bucket: `${tag}:b${i % 3}`, windowStart: 1, limit: 40, expiresAt },
    { bucket: `${tag}:w`, windowStart: 1, limit: 90, expiresAt },
  ).then((r) => ({ i, ...r }));
  const perStore = 30;
  const [batched, ...sequential] = stores;
  const runs = [
    Promise.all(Array.from({ length: perStore }, (_, k) => take(batched!, k * stores.length))),
    ...sequential.map(async (store, s) => {
      const out = [];
      for (let k = 0; k < perStore; k++) out.push(await take(store, k * stores.length + s + 1));
      return out;
    }),
  ];
  const results = (await Promise.all(runs)).flat();
  expect(results).toHaveLength(perStore * stores.length);
  expect(results.filter((r) => r.first === null).every((r) => r.second === null)).toBe(true);
  for (let b = 0; b < 3; b++) {
    const inBucket = results.filter((r) => r.i % 3 === b);
    const counts = inBucket.filter((r) => r.first !== null).map((r) => r.first).sort((x, y) => x! - y!);
    expect(counts).toEqual(Array.from({ length: Math.min(40, inBucket.length) }, (_, k) => k + 1));
  }
  const eligible = results.filter((r) => r.first !== null).length;
  const windowCounts = results.filter((r) => r.second !== null).map((r) => r.second).sort((x, y) => x! - y!);
  expect(windowCounts).toEqual(Array.from({ length: Math.min(90, eligible) }, (_, k) => k + 1));
  expect(await stores[1]!.count(`${tag}:w`, 1)).toBe(Math.min(90, eligible));
  // A full burst bucket refuses alone (no window unit taken); a limit below 1 never admits.
  expect(await stores[1]!.tryIncrementBoth({ bucket: `${tag}:b0`, windowStart: 1, limit: 40, expiresAt }, { bucket: `${tag}:w2`, windowStart: 1, limit: 5, expiresAt })).toEqual({ first: null, second: null });
  expect(await stores[1]!.count(`${tag}:w2`, 1)).toBe(0);
  expect(await stores[1]!.tryIncrement(`${tag}:zero`, 1, 0, expiresAt)).toBeNull();
}
