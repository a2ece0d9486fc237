/** Writes to the audit log. Called by services (in their transaction) and by the auth layer for denials. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../ids.ts';
import type { Scope } from '../auth/scope.ts';
import { AuditLogEntry } from './audit.entities.ts';

export type AuditInput = {
  action: string;
  resourceType?: string | null;
  resourceId?: string | null;
  details?: Record<string, unknown>;
};

export const AUDIT_RETENTION_DAYS = 90;

/** Persists (does not flush) an audit entry for the scope's actor; the caller's flush commits it with the change. */
export function recordAudit(em: EntityManager, scope: Pick<Scope, 'organizationId' | 'mode' | 'actor' | 'ip' | 'requestId'>, input: AuditInput, now: Date): AuditLogEntry {
  return em.create(AuditLogEntry, {
    id: newId('aud', now.getTime()),
    organizationId: scope.organizationId,
    mode: scope.mode,
    actorType: scope.actor.type,
    actorId: scope.actor.id,
    action: input.action,
    resourceType: input.resourceType ?? null,
    resourceId: input.resourceId ?? null,
    ip: scope.ip ?? null,
    requestId: scope.requestId,
    details: input.details ?? {},
    createdAt: now,
  });
}
