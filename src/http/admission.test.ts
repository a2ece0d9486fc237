import { afterEach, describe, expect, it, vi } from 'vitest';
import { Admission, AdmissionLimit, SAMPLE_MS } from './admission.ts';

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
    // A target well above what a busy machine's scheduling adds to a timer (tens of ms at load 20
    // on two cores), well below the 600 ms block.
    const a = new AdmissionLimit({ max: 256, targetMs: 200 });
    const stop = a.watch();
    try {
      await new Promise((r) => setTimeout(r, SAMPLE_MS * 2));
      const until = performance.now() + 600;
      while (performance.now() < until) { /* the loop is busy */ }
      // The overdue sample runs in the first turn after the block.
      await new Promise((r) => setTimeout(r, 10));
      expect(a.limit).toBeLessThan(256);
      // Back up within ten samples that keep time: waited for (bounded), not timed.
      const deadline = performance.now() + 10_000;
      while (a.limit < 256 && performance.now() < deadline) await new Promise((r) => setTimeout(r, SAMPLE_MS));
      expect(a.limit).toBe(256);
    } finally {
      stop();
    }
  });
});

describe('the wait for a slot (HTTP_ADMISSION_WAIT_MS)', () => {
  afterEach(() => { vi.useRealTimers(); });
  const harness = (o: { max: number; waitMs: number; maxWaiting: number }) => {
    const limit = new AdmissionLimit({ max: o.max, targetMs: 100 });
    const admission = new Admission(limit, o);
    const log: string[] = [];
    const enter = (name: string) => admission.enter(() => log.push(`admit ${name}`), () => log.push(`shed ${name}`));
    return { limit, admission, log, enter };
  };

  it('admits past the bound in arrival order as slots free, and sheds a request whose wait ran out', () => {
    vi.useFakeTimers();
    const { admission, log, enter } = harness({ max: 2, waitMs: 200, maxWaiting: 8 });
    enter('a');
    enter('b');
    enter('c');
    enter('d');
    expect(log).toEqual(['admit a', 'admit b']);
    expect(admission.waiting).toBe(2);
    vi.advanceTimersByTime(150);
    admission.release();
    expect(log).toEqual(['admit a', 'admit b', 'admit c']);
    vi.advanceTimersByTime(50);
    expect(log).toEqual(['admit a', 'admit b', 'admit c', 'shed d']);
    expect(admission.waiting).toBe(0);
    expect(admission.admitted).toBe(2);
    // Past the shedding that follows a wait that ran out, requests wait again, in arrival order.
    vi.advanceTimersByTime(1000);
    enter('e');
    enter('f');
    admission.release();
    expect(log.slice(-1)).toEqual(['admit e']);
    admission.release();
    expect(log.slice(-2)).toEqual(['admit e', 'admit f']);
  });

  it('sheds at once when the wait is off or enough requests already wait, and forgets a withdrawn request', () => {
    vi.useFakeTimers();
    const off = harness({ max: 1, waitMs: 0, maxWaiting: 8 });
    off.enter('a');
    off.enter('b');
    expect(off.log).toEqual(['admit a', 'shed b']);

    const full = harness({ max: 1, waitMs: 200, maxWaiting: 2 });
    full.enter('a');
    full.enter('b');
    const withdrawC = full.enter('c');
    full.enter('d');
    expect(full.log).toEqual(['admit a', 'shed d']);
    withdrawC();
    full.admission.release();
    full.admission.release();
    expect(full.log).toEqual(['admit a', 'shed d', 'admit b']);
    vi.advanceTimersByTime(1000);
    expect(full.log).toEqual(['admit a', 'shed d', 'admit b']);
  });

  /** One slot, held by `a`; `b` waited `waitMs` for it and was shed (fake timers on). */
  const afterExpiredWait = (waitMs: number) => {
    vi.useFakeTimers();
    const h = harness({ max: 1, waitMs, maxWaiting: 8 });
    h.enter('a');
    h.enter('b');
    vi.advanceTimersByTime(waitMs);
    expect(h.log).toEqual(['admit a', 'shed b']);
    return h;
  };
  /** The request is shed without waiting. */
  const shedAtOnce = (h: ReturnType<typeof afterExpiredWait>, name: string) => {
    h.enter(name);
    expect(h.log.at(-1)).toBe(`shed ${name}`);
    expect(h.admission.waiting).toBe(0);
  };
  /** The request waits, and gets the slot `a` gives back. */
  const waitsForTheSlot = (h: ReturnType<typeof afterExpiredWait>, name: string) => {
    h.enter(name);
    expect(h.admission.waiting).toBe(1);
    h.admission.release();
    expect(h.log.at(-1)).toBe(`admit ${name}`);
  };

  it('after a wait ran out, sheds past the bound without waiting for five waits, then waits again', () => {
    const h = afterExpiredWait(200);
    shedAtOnce(h, 'c');
    vi.advanceTimersByTime(1000);
    waitsForTheSlot(h, 'd');
  });

  it('sheds at once for as long as requests keep coming past the bound, and waits again five waits after the last', () => {
    const h = afterExpiredWait(100);
    // An overload: one request past the bound every 400 ms keeps shedding on, well past five waits.
    for (let i = 0; i < 5; i++) {
      vi.advanceTimersByTime(400);
      shedAtOnce(h, `x${i}`);
    }
    vi.advanceTimersByTime(501);
    waitsForTheSlot(h, 'late');
  });

  it('admits waiting requests when the bound is raised again', () => {
    vi.useFakeTimers();
    const cut = harness({ max: 20, waitMs: 1000, maxWaiting: 8 });
    for (let i = 0; i < 10; i++) cut.limit.observe(500);
    expect(cut.limit.limit).toBe(8);
    for (let i = 0; i < 10; i++) cut.enter(`r${i}`);
    expect(cut.log.filter((l) => l.startsWith('admit'))).toHaveLength(8);
    cut.limit.observe(1);
    cut.admission.wake();
    expect(cut.log.filter((l) => l.startsWith('admit'))).toHaveLength(10);
    expect(cut.admission.waiting).toBe(0);
  });
});
