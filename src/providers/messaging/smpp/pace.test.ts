import { describe, expect, it } from 'vitest';
import { SubmitPace } from './pace.ts';

function clock() {
  let t = 1_000;
  return { now: () => t, advance: (ms: number) => { t += ms; } };
}

/** Submits the pace lets through over `ms`, asking whenever it allows. */
function drain(pace: SubmitPace, c: ReturnType<typeof clock>, ms: number): number {
  let sent = 0;
  const end = c.now() + ms;
  while (c.now() < end) {
    const wait = pace.take();
    if (wait === 0) sent++;
    else c.advance(wait);
  }
  return sent;
}

describe('SubmitPace', () => {
  it('lets the cap through per second, with a small burst', () => {
    const c = clock();
    const pace = new SubmitPace(100, c.now);
    const sent = drain(pace, c, 10_000);
    expect(sent).toBeGreaterThanOrEqual(995);
    expect(sent).toBeLessThanOrEqual(1_006);
  });

  it('halves the rate and pauses on a busy answer, longer for each in a row', () => {
    const c = clock();
    const pace = new SubmitPace(100, c.now);
    pace.busy();
    expect(pace.rate).toBe(50);
    expect(pace.take()).toBe(100);
    c.advance(100);
    pace.busy();
    expect(pace.rate).toBe(25);
    expect(pace.take()).toBe(200);
    expect(pace.throttled).toBe(true);
    c.advance(10_000);
    expect(pace.throttled).toBe(false);
  });

  it('never goes below one per second and starts a new series after an answer', () => {
    const c = clock();
    const pace = new SubmitPace(4, c.now);
    for (let i = 0; i < 10; i++) pace.busy();
    expect(pace.rate).toBe(1);
    expect(pace.take()).toBe(5_000);
    pace.answered();
    pace.busy();
    expect(pace.take()).toBe(100);
  });

  it('gives back a tenth of the cap per quiet second', () => {
    const c = clock();
    const pace = new SubmitPace(100, c.now);
    pace.busy();
    pace.busy();
    expect(pace.rate).toBe(25);
    c.advance(1_000);
    expect(pace.rate).toBe(35);
    c.advance(5_500);
    expect(pace.rate).toBe(85);
    c.advance(10_000);
    expect(pace.rate).toBe(100);
  });
});
