/**
 * HIPAA records. `hipaa_settings` holds one row per organization (HIPAA mode covers both modes);
 * `hipaa_data_keys` the organization's data keys, wrapped by a master key (read and written with
 * SQL by the key ring, never through the ORM); `phi_access_log` the append-only PHI access log (a
 * trigger refuses updates, truncation and deletes of any of the newest 10,000 entries of an
 * organization; inserting rotates the oldest out).
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, type Mode } from '../../platform/db/tenant.ts';
import type { Role } from '../../platform/tenancy/tenancy.entities.ts';
import type { PhiReason } from '../../platform/auth/scope.ts';

export { PHI_REASONS, type PhiReason } from '../../platform/auth/scope.ts';

export const BAA_STATUSES = ['signed', 'not_signed'] as const;
export type BaaStatus = (typeof BAA_STATUSES)[number];
export type ComplianceOfficer = { name: string; email: string };

export const HipaaSettings = defineEntity({
  name: 'HipaaSettings',
  tableName: 'hipaa_settings',
  filters: tenantFilter('organization'),
  properties: {
    organizationId: p.string().primary(),
    enabled: p.boolean(),
    baaStatus: p.string().$type<BaaStatus>(),
    baaSignedAt: p.datetime().nullable(),
    baaDocumentUrl: p.string().nullable(),
    retentionDays: p.integer(),
    complianceOfficer: p.json<ComplianceOfficer>().nullable(),
    /** Custom metadata keys holding PHI (`*`: every key), for messages and contacts. */
    phiMetadataFields: p.json<string[]>(),
    enabledAt: p.datetime().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type HipaaSettings = InferEntity<typeof HipaaSettings>;

export const PhiAccessLogEntry = defineEntity({
  name: 'PhiAccessLogEntry',
  tableName: 'phi_access_log',
  filters: tenantFilter('organization'),
  properties: {
    id: p.string().primary(),
    organizationId: p.string(),
    mode: p.string().$type<Mode>(),
    actorType: p.string(),
    actorId: p.string(),
    role: p.string().$type<Role>(),
    reason: p.string().$type<PhiReason>().nullable(),
    resourceType: p.string(),
    resourceIds: p.json<string[]>(),
    fields: p.json<string[]>(),
    operation: p.string(),
    ip: p.string().nullable(),
    requestId: p.string().nullable(),
    createdAt: p.datetime(),
  },
});
export type PhiAccessLogEntry = InferEntity<typeof PhiAccessLogEntry>;
