import { describe, expect, it } from 'vitest';
import { AdmissionLimit, SAMPLE_MS } from './admission.ts';

describe('the admission bound under event-loop delay', () => {
  it('cuts the bound by 30 % per late sample down to the floor, and is back at the maximum within ten samples once the loop keeps time', () => {
    const a = new AdmissionLimit({ max: 256, targetMs: 100 });
    expect(a.limit).toBe(256);
    a.observe(150);
    expect(a.limit).toBe(179);
    for (let i = 0; i < 20; i++) a.observe(400);
    expect(a.limit).toBe(8);
    a.observe(70); // between half the target and the target: unchanged
    expect(a.limit).toBe(8);
    let samples = 0;
    while (a.limit < 256) {
      a.observe(1);
      samples++;
    }
    expect(samples).toBeLessThanOrEqual(10);
    expect(a.limit).toBe(256);
  });

  it('never moves with no bound or no target, and never goes below a bound smaller than the floor', () => {
    const off = new AdmissionLimit({ max: 256, targetMs: 0 });
    off.observe(10_000);
    expect(off.limit).toBe(256);
    const unbounded = new AdmissionLimit({ max: 0, targetMs: 100 });
    unbounded.observe(10_000);
    expect(unbounded.limit).toBe(0);
    const small = new AdmissionLimit({ max: 3, targetMs: 100 });
    for (let i = 0; i < 5; i++) small.observe(500);
    expect(small.limit).toBe(3);
  });

  it('sees a blocked event loop through its timer, and lets the bound back up afterwards', async () => {
    const a = new AdmissionLimit({ max: 256, targetMs: 50 });
    const stop = a.watch();
    try {
      await new Promise((r) => setTimeout(r, SAMPLE_MS * 2));
      const until = performance.now() + 400;
      while (performance.now() < until) { /* the loop is busy */ }
      // The overdue sample runs in the first turn after the block.
      await new Promise((r) => setTimeout(r, 10));
      expect(a.limit).toBeLessThan(256);
      await new Promise((r) => setTimeout(r, SAMPLE_MS * 15));
      expect(a.limit).toBe(256);
    } finally {
      stop();
    }
  });
});
