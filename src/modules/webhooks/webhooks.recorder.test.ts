import { describe, expect, it } from 'vitest';
import { OutcomeRecorder, type RecordedOutcome } from './webhooks.recorder.ts';

const outcome = (id: string): RecordedOutcome => ({
  id, attempt: 1, status: 'success', nextAttemptAt: null, outcome: { status: 200, timeMs: 1, error: null }, at: new Date(),
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('OutcomeRecorder', () => {
  it('writes outcomes queued in the same turn together, and those queued during a write in the next one', async () => {
    const writes: string[][] = [];
    let release: (() => void) | undefined;
    const recorder = new OutcomeRecorder(async (batch) => {
      writes.push(batch.map((r) => r.id));
      if (writes.length === 1) await new Promise<void>((r) => { release = r; });
    }, { minIntervalMs: 0 });
    const first = [recorder.record(outcome('a')), recorder.record(outcome('b'))];
    // Turns of the event loop, not a timer: a loop blocked for 5 ms would run the timer first.
    while (writes.length === 0) await new Promise((r) => setImmediate(r));
    expect(writes).toEqual([['a', 'b']]);
    const second = [recorder.record(outcome('c')), recorder.record(outcome('d'))];
    await sleep(5);
    // Never two writes at once: c and d wait for the first write, then go together.
    expect(writes).toHaveLength(1);
    release!();
    await Promise.all([...first, ...second]);
    expect(writes).toEqual([['a', 'b'], ['c', 'd']]);
  });

  it('writes at once at a low rate, and at most every minIntervalMs under load', async () => {
    const started: number[] = [];
    const recorder = new OutcomeRecorder(async () => { started.push(performance.now()); }, { minIntervalMs: 100 });
    const t0 = performance.now();
    await recorder.record(outcome('a'));
    expect(started[0]! - t0).toBeLessThan(50);
    await recorder.record(outcome('b'));
    expect(started[1]! - started[0]!).toBeGreaterThanOrEqual(95);
    await sleep(120);
    const t1 = performance.now();
    await recorder.record(outcome('c'));
    expect(started[2]! - t1).toBeLessThan(50);
  });

  it('isolates a row the database refuses: the others of its batch are written one by one', async () => {
    const written: string[] = [];
    const recorder = new OutcomeRecorder(async (batch) => {
      if (batch.some((r) => r.id === 'bad')) throw new Error('refused');
      written.push(...batch.map((r) => r.id));
    }, { minIntervalMs: 0 });
    const results = await Promise.allSettled(['a', 'bad', 'c'].map((id) => recorder.record(outcome(id))));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(written).toEqual(['a', 'c']);
    await recorder.record(outcome('d'));
    expect(written).toEqual(['a', 'c', 'd']);
  });
});
