/** Verify context: one-time verifications and the organization's verify settings (per mode). */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns, type Mode } from '../../platform/db/tenant.ts';
import type { ExpiryReason, VerificationStatus, VerifyChannel } from './verify.states.ts';

export const Verification = defineEntity({
  name: 'Verification',
  tableName: 'verifications',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    channel: p.string().$type<VerifyChannel>(),
    /** E.164 number (sms, whatsapp) or lower-cased email address. */
    to: p.string(),
    status: p.string().$type<VerificationStatus>(),
    /** Hex HMAC-SHA256 of (id, code) — never the code; erased (null) once the verification is final. */
    codeHash: p.string().nullable(),
    codeLength: p.integer(),
    locale: p.string(),
    maxAttempts: p.integer(),
    /** Checks that compared a code (checks of expired or final verifications do not count). */
    attempts: p.integer(),
    expiresAt: p.datetime(),
    /** The message that carried the code (messaging's id). */
    messageId: p.string().nullable(),
    expiryReason: p.string().$type<ExpiryReason>().nullable(),
    /** The newer verification to the same recipient that replaced this one. */
    supersededBy: p.string().nullable(),
    /** Incremented on every status change; events carry it so consumers can order them. */
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    approvedAt: p.datetime().nullable(),
    expiredAt: p.datetime().nullable(),
    maxedAt: p.datetime().nullable(),
  },
});
export type Verification = InferEntity<typeof Verification>;

/** Per organization and mode; no row means every default (config VERIFY_*). */
export const VerifySettings = defineEntity({
  name: 'VerifySettings',
  tableName: 'verify_settings',
  filters: tenantFilter('organization+mode'),
  properties: {
    organizationId: p.string().primary(),
    mode: p.string().$type<Mode>().primary(),
    codeTtlSeconds: p.integer().nullable(),
    codeLength: p.integer().nullable(),
    maxAttempts: p.integer().nullable(),
    /** Named in the built-in messages ("Your Acme verification code is …"). */
    appName: p.string().nullable(),
    updatedAt: p.datetime(),
  },
});
export type VerifySettings = InferEntity<typeof VerifySettings>;
