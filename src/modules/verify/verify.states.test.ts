import { describe, expect, it } from 'vitest';
import { decideCheck, effectiveStatus, retryAfterSeconds, type VerificationStatus } from './verify.states.ts';

const now = new Date('2026-01-01T00:10:00Z');
const later = new Date('2026-01-01T00:20:00Z');
const v = (status: VerificationStatus, attempts = 0, maxAttempts = 5, expiresAt = later) => ({ status, attempts, maxAttempts, expiresAt });
const never = () => { throw new Error('the code must not be compared'); };

describe('decideCheck (the state table)', () => {
  it('correct code → approved, counting the attempt', () => {
    expect(decideCheck(v('pending'), now, () => true)).toEqual({ kind: 'approve', attempts: 1 });
    expect(decideCheck(v('rejected', 3), now, () => true)).toEqual({ kind: 'approve', attempts: 4 });
  });

  it('wrong code with attempts left → rejected', () => {
    expect(decideCheck(v('pending'), now, () => false)).toEqual({ kind: 'reject', attempts: 1 });
    expect(decideCheck(v('rejected', 3), now, () => false)).toEqual({ kind: 'reject', attempts: 4 });
  });

  it('wrong code on the last attempt → maxed; a correct one on the last attempt still approves', () => {
    expect(decideCheck(v('rejected', 4), now, () => false)).toEqual({ kind: 'max', attempts: 5 });
    expect(decideCheck(v('pending', 0, 1), now, () => false)).toEqual({ kind: 'max', attempts: 1 });
    expect(decideCheck(v('rejected', 4), now, () => true)).toEqual({ kind: 'approve', attempts: 5 });
  });

  it('past the expiry → expired, without comparing the code or counting an attempt', () => {
    expect(decideCheck(v('pending', 0, 5, now), now, never)).toEqual({ kind: 'expire' });
    expect(decideCheck(v('rejected', 2, 5, new Date(now.getTime() - 1)), now, never)).toEqual({ kind: 'expire' });
  });

  it('final states: approved once (conflict), expired and maxed answered as they are', () => {
    expect(decideCheck(v('approved', 1), now, never)).toEqual({ kind: 'already_approved' });
    expect(decideCheck(v('expired'), now, never)).toEqual({ kind: 'final', status: 'expired' });
    expect(decideCheck(v('maxed', 5), now, never)).toEqual({ kind: 'final', status: 'maxed' });
    // Even past the expiry, a final state stays what it is.
    expect(decideCheck(v('approved', 1, 5, now), later, never)).toEqual({ kind: 'already_approved' });
  });

  it('a checkable row already at its limit becomes maxed without a comparison', () => {
    expect(decideCheck(v('pending', 5, 5), now, never)).toEqual({ kind: 'max', attempts: 5 });
  });
});

describe('effectiveStatus', () => {
  it('reads a checkable verification past its expiry as expired, and nothing else', () => {
    expect(effectiveStatus(v('pending', 0, 5, now), now)).toBe('expired');
    expect(effectiveStatus(v('rejected', 1, 5, now), later)).toBe('expired');
    expect(effectiveStatus(v('pending'), now)).toBe('pending');
    expect(effectiveStatus(v('approved', 1, 5, now), later)).toBe('approved');
    expect(effectiveStatus(v('maxed', 5, 5, now), later)).toBe('maxed');
  });
});

describe('retryAfterSeconds', () => {
  const at = (s: number) => new Date(now.getTime() + s * 1000);
  it('is the time until the oldest counted send leaves the window', () => {
    const sends = [at(-300), at(-10), at(-200), at(-100), at(-50)];
    expect(retryAfterSeconds(sends, 5, 600, now)).toBe(300);
    // With a limit of 3 and 5 in the window, the third oldest must leave.
    expect(retryAfterSeconds(sends, 3, 600, now)).toBe(500);
    expect(retryAfterSeconds([at(-599.5)], 1, 600, now)).toBe(1);
    expect(retryAfterSeconds([], 1, 600, now)).toBe(600);
  });
});
