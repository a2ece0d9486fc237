/** REST shapes (snake_case) of the HIPAA configuration and PHI access log entries. */
import type { HipaaSettings, PhiAccessLogEntry } from './hipaa.entities.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentHipaa(s: HipaaSettings) {
  return {
    enabled: s.enabled,
    baa_status: s.baaStatus,
    baa_signed_date: s.baaSignedAt ? s.baaSignedAt.toISOString().slice(0, 10) : null,
    baa_document_url: s.baaDocumentUrl,
    retention_days: s.retentionDays,
    compliance_officer: s.complianceOfficer,
    phi_metadata_fields: s.phiMetadataFields,
    enabled_at: iso(s.enabledAt),
    updated_at: iso(s.updatedAt),
  };
}

export function presentPhiAccess(e: PhiAccessLogEntry) {
  return {
    id: e.id, actor_type: e.actorType, actor_id: e.actorId, role: e.role, reason: e.reason, resource_type: e.resourceType,
    resource_ids: e.resourceIds, fields: e.fields, operation: e.operation, mode: e.mode, ip: e.ip, request_id: e.requestId, created_at: iso(e.createdAt),
  };
}
