/**
 * The verification state table as pure functions, so every outcome is unit-tested without a
 * database. Statuses are the spec's five: `pending` (sent, not checked yet) and `rejected` (the last
 * check was wrong, attempts remain) can still be checked; `approved`, `expired` and `maxed` are final.
 */
export const VERIFICATION_STATUSES = ['pending', 'approved', 'rejected', 'expired', 'maxed'] as const;
export type VerificationStatus = (typeof VERIFICATION_STATUSES)[number];
export const VERIFY_CHANNELS = ['sms', 'whatsapp', 'email'] as const;
export type VerifyChannel = (typeof VERIFY_CHANNELS)[number];
/** Why a verification expired: its time ran out, or a newer send to the same recipient replaced it. */
export const EXPIRY_REASONS = ['timeout', 'superseded'] as const;
export type ExpiryReason = (typeof EXPIRY_REASONS)[number];

export const CHECKABLE: ReadonlySet<VerificationStatus> = new Set(['pending', 'rejected']);

type Checkable = { status: VerificationStatus; attempts: number; maxAttempts: number; expiresAt: Date };

/** The status as of `now`: a checkable verification past its expiry reads as expired before any check or sweep records it. */
export function effectiveStatus(v: Pick<Checkable, 'status' | 'expiresAt'>, now: Date): VerificationStatus {
  return CHECKABLE.has(v.status) && now.getTime() >= v.expiresAt.getTime() ? 'expired' : v.status;
}

export type CheckDecision =
  /** Already approved: a code is approved once (the API answers 409 CONFLICT). */
  | { kind: 'already_approved' }
  /** Already expired or maxed: answered as is, nothing changes and no attempt is counted. */
  | { kind: 'final'; status: 'expired' | 'maxed' }
  /** Past its expiry: becomes expired now (no attempt is counted). */
  | { kind: 'expire' }
  | { kind: 'approve'; attempts: number }
  /** Wrong code, attempts remain. */
  | { kind: 'reject'; attempts: number }
  /** Wrong code on the last attempt: maxed, the code is invalidated. */
  | { kind: 'max'; attempts: number };

/**
 * What a check does. `codeMatches` is only called when the check counts as an attempt (a
 * checkable, unexpired verification), so final or expired verifications never compare codes.
 */
export function decideCheck(v: Checkable, now: Date, codeMatches: () => boolean): CheckDecision {
  if (v.status === 'approved') return { kind: 'already_approved' };
  if (v.status === 'expired' || v.status === 'maxed') return { kind: 'final', status: v.status };
  if (now.getTime() >= v.expiresAt.getTime()) return { kind: 'expire' };
  // A checkable row already at its limit cannot arise through this table; it becomes maxed, unchecked.
  if (v.attempts >= v.maxAttempts) return { kind: 'max', attempts: v.attempts };
  const attempts = v.attempts + 1;
  if (codeMatches()) return { kind: 'approve', attempts };
  return attempts >= v.maxAttempts ? { kind: 'max', attempts } : { kind: 'reject', attempts };
}

/**
 * Seconds until a sliding window of `windowSeconds` has room again: `createdAt` lists the sends in
 * the window (any order); with `limit` reached, the oldest send that must leave is number
 * `count - limit` (0-based, ascending). At least 1.
 */
export function retryAfterSeconds(createdAt: readonly Date[], limit: number, windowSeconds: number, now: Date): number {
  const sorted = [...createdAt].map((d) => d.getTime()).sort((a, b) => a - b);
  const leaving = sorted[Math.max(0, sorted.length - limit)] ?? now.getTime();
  return Math.max(1, Math.ceil((leaving + windowSeconds * 1000 - now.getTime()) / 1000));
}
