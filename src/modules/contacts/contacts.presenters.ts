/** REST shapes (snake_case) of contacts, activity entries, consent changes, lists, segments and imports. */
import { publicEventData } from '../../platform/events/events.ts';
import type { ActivityEntry } from './activity.ts';
import { CONSENT_CHANNELS, type ConsentChange, type Contact, type ContactImport, type ContactList, type ConsentMap, type Segment } from './contacts.entities.ts';

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);

/** Every channel appears: `{ status: 'unknown', updated_at: null, source: null }` when nothing was recorded. */
export function consentView(consent: ConsentMap) {
  return Object.fromEntries(CONSENT_CHANNELS.map((ch) => [ch, consent[ch] ?? { status: 'unknown', updated_at: null, source: null }]));
}

export function presentContact(c: Contact) {
  return {
    id: c.id, phone: c.phone ?? null, email: c.email ?? null, first_name: c.firstName ?? null, last_name: c.lastName ?? null,
    country: c.country ?? null, lifecycle_stage: c.lifecycleStage ?? null, tags: c.tags, metadata: c.metadata, consent: consentView(c.consent),
    created_at: iso(c.createdAt), updated_at: iso(c.updatedAt),
  };
}

const text = (v: unknown) => (typeof v === 'string' ? v : null);

/**
 * A timeline entry: the event (`id`, `type`, `created_at`, the resource it is about) with the
 * communication fields lifted out of its data (`channel`, `direction`, `from`, `to`, `status`;
 * null when the event has none), and `data` as webhooks receive it.
 */
export function presentActivity(e: ActivityEntry) {
  const data = publicEventData(e.data);
  return {
    id: e.id, type: e.type, resource_type: e.resourceType, resource_id: e.resourceId,
    channel: text(data.channel), direction: text(data.direction), from: text(data.from), to: text(data.to), status: text(data.status),
    data, created_at: iso(e.createdAt),
  };
}

export function presentConsentChange(h: ConsentChange) {
  return {
    id: h.id, contact_id: h.contactId, channel: h.channel, status: h.status, previous_status: h.previousStatus, source: h.source,
    actor: h.actorType ? { type: h.actorType, id: h.actorId ?? null } : null, request_id: h.requestId ?? null, details: h.details, created_at: iso(h.createdAt),
  };
}

export function presentList(l: ContactList) {
  return { id: l.id, name: l.name, description: l.description ?? null, created_at: iso(l.createdAt), updated_at: iso(l.updatedAt) };
}

export function presentSegment(s: Segment) {
  return { id: s.id, name: s.name, description: s.description ?? null, rules: s.rules, created_at: iso(s.createdAt), updated_at: iso(s.updatedAt) };
}

export function presentPreview(p: { count: number; contacts: Contact[] }) {
  return { count: p.count, contacts: p.contacts.map(presentContact) };
}

export function presentImport(i: ContactImport) {
  return {
    id: i.id, status: i.status, list_id: i.listId ?? null, total_rows: i.totalRows, processed_rows: i.processedRows,
    created: i.createdCount, updated: i.updatedCount, accepted: i.createdCount + i.updatedCount, rejected: i.rejectedCount,
    rejections: i.rejections, created_at: iso(i.createdAt), updated_at: iso(i.updatedAt), completed_at: iso(i.completedAt),
  };
}
