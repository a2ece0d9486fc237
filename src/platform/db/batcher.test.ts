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

  describe('a follower leaves its queue to a leader flushing in the same turn', () => {
    /** A leader whose batches take the follower's queue (as PairedReads takes the rate-limit takes). */
    function pair(options: { leaderFails?: boolean } = {}) {
      const runs: string[] = [];
      const follower = new Batcher<number, string>(async (items) => {
        runs.push(`follower ${items.join(',')}`);
        return items.map((i) => `own ${i}`);
      });
      const leader = new Batcher<number, number>(async (items) => {
        const riding = follower.handOver();
        runs.push(`leader ${items.join(',')}${riding ? ` + ${riding.items.join(',')}` : ''}`);
        if (options.leaderFails) {
          riding?.putBack();
          throw new Error('leader statement failed');
        }
        riding?.settle(riding.items.map((i) => (i === 13 ? new Error('thirteen') : `rode ${i}`)));
        return items;
      });
      follower.follow(() => leader.flushing);
      return { runs, follower, leader };
    }

    it('items of both in one turn go in the leader batch, each answered from it', async () => {
      const { runs, follower, leader } = pair();
      // The follower's items come first (as a request's take before its reads) and still ride.
      const taken = [11, 12, 13].map((i) => follower.submit(i));
      const read = [1, 2].map((i) => leader.submit(i));
      expect(await Promise.all(read)).toEqual([1, 2]);
      const settled = await Promise.allSettled(taken);
      expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message))).toEqual(['rode 11', 'rode 12', 'thirteen']);
      expect(runs).toEqual(['leader 1,2 + 11,12,13']);
    });

    it('without a leader batch in the turn the follower runs its own', async () => {
      const { runs, follower } = pair();
      expect(await Promise.all([21, 22].map((i) => follower.submit(i)))).toEqual(['own 21', 'own 22']);
      expect(runs).toEqual(['follower 21,22']);
    });

    it("items given back by a leader whose statement failed go in the follower's own next batch, not in a leader's again", async () => {
      const { runs, follower, leader } = pair({ leaderFails: true });
      const taken = [31, 32].map((i) => follower.submit(i));
      const read = leader.submit(1);
      await expect(read).rejects.toThrow('leader statement failed');
      // A leader batch in the same turn as the give-back does not take them again.
      const again = leader.submit(2);
      expect(await Promise.all(taken)).toEqual(['own 31', 'own 32']);
      await expect(again).rejects.toThrow('leader statement failed');
      expect(runs.filter((r) => r.startsWith('follower'))).toEqual(['follower 31,32']);
      expect(runs.filter((r) => r.includes('31'))).toHaveLength(2);
    });
  });

  describe('a follower waiting for a leader whose batch is queued behind the one in flight', () => {
    function pair(followWaitMs: number) {
      const runs: string[] = [];
      const gates: (() => void)[] = [];
      const follower = new Batcher<number, string>(async (items) => {
        runs.push(`follower ${items.join(',')}`);
        return items.map((i) => `own ${i}`);
      }, { followWaitMs });
      const leader = new Batcher<number, number>(async (items) => {
        const riding = follower.handOver();
        runs.push(`leader ${items.join(',')}${riding ? ` + ${riding.items.join(',')}` : ''}`);
        riding?.settle(riding.items.map((i) => `rode ${i}`));
        await new Promise<void>((r) => gates.push(r));
        return items;
      });
      follower.follow(() => leader.flushing || leader.queued > 0);
      const release = () => gates.shift()?.();
      return { runs, follower, leader, release };
    }
    const turns = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // Not a timer: under load a 1 ms timer can fire before the leader's setImmediate flush, and
    // item 2 would join batch 1. Turns of the event loop until the condition holds are exact.
    const until = async (done: () => boolean) => { while (!done()) await tick(); };

    it("leaves its queue to the leader's next batch, however many turns that takes; items after it get their own turn", async () => {
      const { runs, follower, leader, release } = pair(5_000);
      const first = leader.submit(1);
      await until(() => runs.length === 1); // leader batch 1 in flight
      expect(runs).toEqual(['leader 1']);
      const second = leader.submit(2);
      const taken = [41, 42].map((i) => follower.submit(i));
      await turns(20);
      expect(runs).toEqual(['leader 1']); // the follower sent nothing: a leader batch is queued
      release();
      expect(await Promise.all(taken)).toEqual(['rode 41', 'rode 42']);
      expect(runs).toEqual(['leader 1', 'leader 2 + 41,42']);
      // Taken: no longer waiting. With the leader in flight but nothing queued, a new item goes alone.
      expect(await follower.submit(43)).toBe('own 43');
      release();
      expect(await Promise.all([first, second])).toEqual([1, 2]);
      expect(runs).toEqual(['leader 1', 'leader 2 + 41,42', 'follower 43']);
    });

    it('sends its own statement when no leader batch has gone within followWaitMs', async () => {
      const { runs, follower, leader, release } = pair(10);
      const first = leader.submit(1);
      await until(() => runs.length === 1);
      expect(runs).toEqual(['leader 1']);
      const second = leader.submit(2);
      const started = Date.now();
      expect(await follower.submit(51)).toBe('own 51');
      expect(Date.now() - started).toBeGreaterThanOrEqual(9);
      expect(runs).toEqual(['leader 1', 'follower 51']);
      release();
      await until(() => runs.length === 3);
      expect(runs[2]).toBe('leader 2');
      release();
      expect(await Promise.all([first, second])).toEqual([1, 2]);
    });
  });
});
