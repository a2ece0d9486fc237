/**
 * What the contacts services share: the contact row SQL (columns, row mapping, the keyset select over
 * `contacts c`), the tag and metadata merge rules, and `touchContact` (a change's sequence and event).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { EventType } from '../../platform/events/events.ts';
import { keysetSql, type Keyset } from '../../platform/pagination.ts';
import type { Contact } from './contacts.entities.ts';
import { emitContactEvent } from './contacts.events.ts';

export const COLUMNS = 'c.id, c.organization_id, c.mode, c.phone, c.email, c.first_name, c.last_name, c.country, c.lifecycle_stage, c.tags, c.metadata, c.phi, c.consent, c.sequence, c.created_at, c.updated_at';

type Row = Record<string, unknown>;

export function rowToContact(r: Row): Contact {
  return {
    id: r.id, organizationId: r.organization_id, mode: r.mode, phone: r.phone, email: r.email, firstName: r.first_name, lastName: r.last_name,
    country: r.country, lifecycleStage: r.lifecycle_stage, tags: r.tags, metadata: r.metadata, phi: r.phi ?? null, consent: r.consent, sequence: r.sequence,
    createdAt: r.created_at, updatedAt: r.updated_at,
  } as unknown as Contact;
}

/** `? … ?` → `$1 … $n` for node-postgres (the compiled SQL never uses `?` operators). */
export function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** One query: `where` predicates over `contacts c` (with `?` placeholders), one keyset page (platform/pagination.ts). */
export async function selectContacts(pool: Pool, tenant: TenantRef, where: string[], params: unknown[], keyset: Keyset, opts: { join?: string; joinParams?: unknown[] } = {}): Promise<Contact[]> {
  const all = [...(opts.joinParams ?? []), tenant.organizationId, tenant.mode, ...params];
  const conditions = ['c.organization_id = ?', 'c.mode = ?', ...where];
  const bound = keysetSql(keyset, 'c.id');
  if (bound.condition) { conditions.push(bound.condition); all.push(bound.param); }
  all.push(keyset.take);
  const sql = `select ${COLUMNS} from contacts c ${opts.join ?? ''} where ${conditions.join(' and ')} order by ${bound.order} limit ?`;
  const res = await pool.query(numbered(sql), all);
  return res.rows.map(rowToContact);
}

/**
 * A change of the contact: its sequence and `updated_at` advance and `type` is emitted (with the
 * chain depth of the flow execution that made the change, when one did: Scope.chainDepth).
 */
export function touchContact(tx: EntityManager, c: Contact, now: Date, type: EventType, chainDepth?: number): void {
  c.sequence += 1;
  c.updatedAt = now;
  emitContactEvent(tx, c, type, now, {}, chainDepth);
}

/** Existing tags, then new ones not already present (case-sensitive, trimmed), in order. */
export function uniqueTags(existing: readonly string[], added: readonly string[]): string[] {
  const out = [...existing];
  for (const t of added.map((x) => x.trim())) if (t && !out.includes(t)) out.push(t);
  return out;
}

/** Shallow merge: given keys replace, a null value removes its key. */
export function mergeMetadata(existing: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...existing };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}
