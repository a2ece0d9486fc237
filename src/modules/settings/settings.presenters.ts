/** REST shapes (snake_case) of the settings resources. */
import type { ApiKey, Organization } from '../../platform/tenancy/tenancy.entities.ts';
import type { AuditLogEntry } from '../../platform/audit/audit.entities.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { TeamMemberView } from './settings.service.ts';
import type { PersistedDocument } from './settings.documents.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentOrganization(o: Organization) {
  return { id: o.id, name: o.name, plan: o.plan, graphql_trusted_documents_only: o.graphqlTrustedDocumentsOnly ?? false, created_at: iso(o.createdAt) };
}

export function presentViewer(v: { organization: Organization; scope: Scope }) {
  return {
    organization: presentOrganization(v.organization),
    role: v.scope.role,
    mode: v.scope.mode,
    actor: { type: v.scope.actor.type, id: v.scope.actor.id },
  };
}

export function presentApiKey(k: ApiKey) {
  return {
    id: k.id, name: k.name, role: k.role, mode: k.mode, prefix: k.prefix, last4: k.last4,
    created_at: iso(k.createdAt), last_used_at: iso(k.lastUsedAt), revoked_at: iso(k.revokedAt),
  };
}

export function presentTeamMember(m: TeamMemberView) {
  return { id: m.id, user_id: m.userId, email: m.email, name: m.name, role: m.role, created_at: iso(m.createdAt) };
}

export function presentAuditLogEntry(e: AuditLogEntry) {
  return {
    id: e.id, actor_type: e.actorType, actor_id: e.actorId, action: e.action, resource_type: e.resourceType,
    resource_id: e.resourceId, ip: e.ip, request_id: e.requestId, details: e.details, created_at: iso(e.createdAt),
  };
}

const CSV_COLUMNS = ['id', 'created_at', 'actor_type', 'actor_id', 'action', 'resource_type', 'resource_id', 'ip', 'request_id', 'details'] as const;

function csvCell(value: unknown): string {
  const s = value === null || value === undefined ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
  // Quote always; neutralise spreadsheet formulas (CSV injection).
  const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s;
  return `"${safe.replaceAll('"', '""')}"`;
}

export function auditLogsToCsv(entries: AuditLogEntry[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const e of entries) {
    const row = presentAuditLogEntry(e);
    lines.push(CSV_COLUMNS.map((c) => csvCell(row[c])).join(','));
  }
  return lines.join('\r\n') + '\r\n';
}

export function presentGraphqlDocument(d: PersistedDocument) {
  return { id: d.id, document: d.document, created_at: iso(d.createdAt) };
}

export function presentGraphqlDocuments(docs: PersistedDocument[]) {
  return docs.map(presentGraphqlDocument);
}
