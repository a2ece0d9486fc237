/** Security audit log: who did what to which resource, from where. Kept 90 days (a job prunes). */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter } from '../db/tenant.ts';
import type { ActorType } from '../auth/scope.ts';

export const AuditLogEntry = defineEntity({
  name: 'AuditLogEntry',
  tableName: 'audit_log_entries',
  filters: tenantFilter('organization'),
  properties: {
    id: p.string().primary(),
    organizationId: p.string(),
    mode: p.string().nullable(),
    actorType: p.string().$type<ActorType>(),
    actorId: p.string().nullable(),
    action: p.string(),
    resourceType: p.string().nullable(),
    resourceId: p.string().nullable(),
    ip: p.string().nullable(),
    requestId: p.string().nullable(),
    details: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
  },
});
export type AuditLogEntry = InferEntity<typeof AuditLogEntry>;
