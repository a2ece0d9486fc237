/** The contact events (`contact.created|updated|deleted|opted_out|opted_in`), emitted into the outbox in the caller's transaction. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { emitEvent, type EventType } from '../../platform/events/events.ts';
import type { Contact } from './contacts.entities.ts';

/**
 * Data: `id`, `contact_id`, `phone`, `email`, `lifecycle_stage`, plus `extra` (`channels` and
 * `source` of consent events), and `depth` for a change a flow execution made (`chainDepth`).
 */
export function emitContactEvent(tx: EntityManager, c: Contact, type: EventType, now: Date, extra: Record<string, unknown> = {}, chainDepth?: number): void {
  emitEvent(tx, { organizationId: c.organizationId, mode: c.mode, ...(chainDepth !== undefined ? { chainDepth } : {}) }, {
    type, resourceType: 'contact', resourceId: c.id, sequence: c.sequence,
    data: { id: c.id, contact_id: c.id, phone: c.phone ?? null, email: c.email ?? null, lifecycle_stage: c.lifecycleStage ?? null, ...extra },
  }, now);
}
