import { describe, expect, it } from 'vitest';
import { DueTicker, type DueTickerOptions } from './dueTicker.ts';

class Ticker extends DueTicker {
  readonly #tick: () => Promise<number>;

  constructor(o: DueTickerOptions & { tick: () => Promise<number> }) {
    super(o);
    this.#tick = o.tick;
  }

  tick(): Promise<number> {
    return this.#tick();
  }
}
import type { Logger } from '../logger.ts';

function recordingLog(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, warn: (_o: unknown, m: string) => { warnings.push(m); } } as unknown as Logger & { warnings: string[] };
}

const until = async (cond: () => boolean, ms = 2000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 2));
  }
};

describe('DueTicker', () => {
  it('ticks again at once after a full batch, then sleeps until the next look', async () => {
    const claims = [4, 4, 1];
    const at: number[] = [];
    const ticker = new Ticker({ tick: async () => { at.push(Date.now()); return claims.shift() ?? 0; }, batch: 4, tickMs: 10_000, log: recordingLog(), name: 't' });
    ticker.start();
    await until(() => at.length >= 3);
    await new Promise((r) => setTimeout(r, 50));
    expect(at).toHaveLength(3);
    await ticker.stop();
  });

  it('wake(at) ends a longer sleep: the loop looks when a row of this instance falls due', async () => {
    const at: number[] = [];
    const ticker = new Ticker({ tick: async () => { at.push(Date.now()); return 0; }, batch: 4, tickMs: 60_000, log: recordingLog(), name: 't' });
    ticker.start();
    await until(() => at.length === 1);
    const woken = Date.now();
    ticker.wake(woken + 30);
    ticker.wake(woken + 5_000); // later than the wake-up already set: changes nothing
    await until(() => at.length === 2);
    expect(at[1]! - woken).toBeGreaterThanOrEqual(25);
    expect(at[1]! - woken).toBeLessThan(2_000);
    const stopping = Date.now();
    await ticker.stop();
    expect(Date.now() - stopping).toBeLessThan(1_000);
    ticker.wake(Date.now()); // stopped: nothing runs
    await new Promise((r) => setTimeout(r, 20));
    expect(at).toHaveLength(2);
  });

  it('a tick that throws is logged and the loop goes on', async () => {
    const log = recordingLog();
    let n = 0;
    const ticker = new Ticker({ tick: async () => { if (++n === 1) throw new Error('database away'); return 0; }, batch: 4, tickMs: 20, log, name: 'messaging sandbox reports' });
    ticker.start();
    await until(() => n >= 3);
    await ticker.stop();
    expect(log.warnings[0]).toBe('messaging sandbox reports: tick failed');
  });
});
