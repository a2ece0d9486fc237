import { describe, expect, it } from 'vitest';
import { Batcher } from './batcher.ts';

const tick = () => new Promise((r) => setImmediate(r));

describe('Batcher', () => {
  it('runs items submitted in one turn as one batch and resolves each with its own result', async () => {
    const batches: number[][] = [];
    const b = new Batcher<number, number>(async (items) => {
      batches.push(items);
      return items.map((i) => i * 10);
    });
    const results = await Promise.all([1, 2, 3].map((i) => b.submit(i)));
    expect(results).toEqual([10, 20, 30]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('queues items while a batch is in flight and runs them together next', async () => {
    const batches: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const b = new Batcher<number, number>(async (items) => {
      batches.push(items);
      if (batches.length === 1) await gate;
      return items;
    });
    const first = b.submit(1);
    await tick();
    const later = [2, 3, 4].map((i) => b.submit(i));
    await tick();
    expect(b.queued).toBe(3);
    release();
    expect(await Promise.all([first, ...later])).toEqual([1, 2, 3, 4]);
    expect(batches).toEqual([[1], [2, 3, 4]]);
  });

  it('respects maxBatch', async () => {
    const sizes: number[] = [];
    const b = new Batcher<number, number>(async (items) => {
      sizes.push(items.length);
      return items;
    }, { maxBatch: 2, maxInFlight: 1 });
    await Promise.all([1, 2, 3, 4, 5].map((i) => b.submit(i)));
    expect(sizes).toEqual([2, 2, 1]);
  });

  it('rejects only the caller whose slot is an Error', async () => {
    const b = new Batcher<number, number>(async (items) => items.map((i) => (i === 2 ? new Error('two') : i)));
    const settled = await Promise.allSettled([1, 2, 3].map((i) => b.submit(i)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });

  it('without isolate a failed batch rejects every caller; with isolate only the bad item fails', async () => {
    const run = async (items: number[]) => {
      if (items.includes(2)) throw new Error('bad item in batch');
      return items;
    };
    const plain = new Batcher<number, number>(run);
    expect((await Promise.allSettled([1, 2, 3].map((i) => plain.submit(i)))).map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
    const isolated = new Batcher<number, number>(run, { isolate: true });
    const settled = await Promise.allSettled([1, 2, 3].map((i) => isolated.submit(i)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });

  it('rejects every caller when run returns the wrong number of results', async () => {
    const b = new Batcher<number, number>(async () => [1]);
    const settled = await Promise.allSettled([1, 2].map((i) => b.submit(i)));
    expect(settled.every((s) => s.status === 'rejected')).toBe(true);
  });
});
