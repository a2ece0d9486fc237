import { describe, expect, it } from 'vitest';
import { accumulateOwn, foreignShare, formatFigure, formatVerdict, judge, loadRefusal, roundOrder, summarize, type OwnCpu } from './pairs.ts';

const opts = { maxForeign: 0.15, minPairs: 5 };

describe('summarize', () => {
  it('answers the median with min and max, odd and even counts', () => {
    expect(summarize([0.9, 0.7, 0.8, 1.0, 0.6])).toEqual({ median: 0.8, min: 0.6, max: 1.0, n: 5 });
    expect(summarize([4, 1, 3, 2])).toEqual({ median: 2.5, min: 1, max: 4, n: 4 });
  });
  it('leaves out values that are not finite', () => {
    expect(summarize([NaN, 2, Infinity, 1, 3])).toEqual({ median: 2, min: 1, max: 3, n: 3 });
    expect(summarize([NaN]).n).toBe(0);
    expect(summarize([]).median).toBeNaN();
  });
});

describe('roundOrder', () => {
  it('alternates forward and reverse so every side runs first as often as last', () => {
    const orders = Array.from({ length: 6 }, (_, i) => roundOrder(['a', 'b'], i).join(''));
    expect(orders).toEqual(['ab', 'ba', 'ab', 'ba', 'ab', 'ba']);
    expect(roundOrder(['a', 'b', 'c'], 1)).toEqual(['c', 'b', 'a']);
  });
  it('leaves its input alone', () => {
    const sides = ['a', 'b'];
    roundOrder(sides, 1);
    expect(sides).toEqual(['a', 'b']);
  });
});

describe('judge', () => {
  const target = { op: '>=' as const, value: 0.9 };
  it('meets a target on the median even when one round falls below it', () => {
    const j = judge('hipaa', [0.95, 0.7, 0.92, 0.91, 0.99], target, 0.05, opts);
    expect(j.median).toBe(0.92);
    expect(j.verdict).toBe('met');
    expect(formatFigure(j)).toBe('0.92 (0.70–0.99, 5 pairs)');
  });
  it('misses on the median', () => {
    const j = judge('hipaa', [0.95, 0.7, 0.85, 0.8, 0.99], target, 0.05, opts);
    expect(j.verdict).toBe('missed');
    expect(formatVerdict(j)).toBe('≥ 0.9 MISSED');
  });
  it('judges an upper bound with <=', () => {
    expect(judge('p99', [3, 4, 6, 4, 5], { op: '<=', value: 5 }, 0, opts).verdict).toBe('met');
    expect(judge('p99', [6, 4, 6, 7, 5], { op: '<=', value: 5 }, 0, opts).verdict).toBe('missed');
  });
  it('refuses to judge under background load above the limit, but keeps the figures', () => {
    const j = judge('hipaa', [0.95, 0.96, 0.97, 0.98, 0.99], target, 0.43, opts);
    expect(j.verdict).toBe('not judged');
    expect(j.median).toBe(0.97);
    expect(formatVerdict(j)).toBe('≥ 0.9 not judged: background load 43% (> 15%)');
  });
  it('refuses when the load is unknown, unless the check is off', () => {
    expect(judge('x', [1, 1, 1, 1, 1], target, NaN, opts).verdict).toBe('not judged');
    expect(judge('x', [1, 1, 1, 1, 1], target, NaN, { ...opts, maxForeign: 1 }).verdict).toBe('met');
    expect(judge('x', [1, 1, 1, 1, 1], target, 0.9, { ...opts, maxForeign: 1 }).verdict).toBe('met');
  });
  it('refuses with fewer valid pairs than the minimum', () => {
    const j = judge('x', [1, 1, NaN, 1, 1], target, 0, opts);
    expect(j.verdict).toBe('not judged');
    expect(j.reason).toBe('4 valid pairs (< 5)');
  });
  it('answers "no target" for a figure that is only printed', () => {
    expect(judge('p99 ratio', [1, 2, 3, 4, 5], undefined, 0, opts).verdict).toBe('no target');
    expect(judge('p99 ratio', [1, 2, 3, 4, 5], undefined, 0.5, opts).verdict).toBe('not judged');
  });
});

describe('background load', () => {
  it('accumulates the bench processes CPU across samples: started, exited and reused pids', () => {
    let s: OwnCpu = { last: undefined, total: 0 };
    s = accumulateOwn(s, new Map([[10, 5], [11, 2]])); // the start: nothing counted yet
    expect(s.total).toBe(0);
    s = accumulateOwn(s, new Map([[10, 6], [11, 2.5], [12, 0.3]])); // 12 started meanwhile
    expect(s.total).toBeCloseTo(1.8);
    s = accumulateOwn(s, new Map([[10, 7], [12, 0.1]])); // 11 exited; 12 is a reused pid
    expect(s.total).toBeCloseTo(2.9);
  });
  it('refuses single figures (webhooks) above the limit, or unmeasured, unless the check is off', () => {
    expect(loadRefusal(0.1, 0.15)).toBeNull();
    expect(loadRefusal(0.2, 0.15)).toBe('background load 20% (> 15%)');
    expect(loadRefusal(NaN, 0.15)).toBe('background load not measurable');
    expect(loadRefusal(0.9, 1)).toBeNull();
  });
  it('takes the bench own CPU from the machine busy time', () => {
    expect(foreignShare({ busySeconds: 16, ownSeconds: 4, wallSeconds: 10, cores: 2 })).toBeCloseTo(0.6);
    expect(foreignShare({ busySeconds: 3, ownSeconds: 4, wallSeconds: 10, cores: 2 })).toBe(0);
    expect(foreignShare({ busySeconds: NaN, ownSeconds: 4, wallSeconds: 10, cores: 2 })).toBeNaN();
  });
});
