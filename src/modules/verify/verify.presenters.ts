/** REST shapes (snake_case) of verifications and verify settings. No shape carries a code or its hash. */
import type { Verification } from './verify.entities.ts';
import type { EffectiveVerifySettings, SandboxCode } from './verify.service.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentVerification(v: Verification) {
  return {
    id: v.id,
    verification_id: v.id,
    channel: v.channel,
    to: v.to,
    status: v.status,
    valid: v.status === 'approved',
    locale: v.locale,
    code_length: v.codeLength,
    max_attempts: v.maxAttempts,
    attempts: v.attempts,
    remaining_attempts: v.status === 'pending' || v.status === 'rejected' ? Math.max(0, v.maxAttempts - v.attempts) : 0,
    expires_at: iso(v.expiresAt),
    message_id: v.messageId,
    expiry_reason: v.expiryReason,
    superseded_by: v.supersededBy,
    created_at: iso(v.createdAt),
    updated_at: iso(v.updatedAt),
    approved_at: iso(v.approvedAt),
    expired_at: iso(v.expiredAt),
    maxed_at: iso(v.maxedAt),
  };
}

export function presentVerifySettings(s: EffectiveVerifySettings) {
  return {
    mode: s.mode,
    code_ttl_seconds: s.codeTtlSeconds,
    code_length: s.codeLength,
    max_attempts: s.maxAttempts,
    app_name: s.appName,
    updated_at: iso(s.updatedAt),
  };
}

/** The sandbox route's answer: the code, with what it belongs to. */
export function presentSandboxCode(r: SandboxCode) {
  return { verification_id: r.verification.id, channel: r.verification.channel, to: r.verification.to, message_id: r.verification.messageId, code: r.code };
}
