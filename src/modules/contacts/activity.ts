/**
 * The contact activity timeline, read from the event backbone (the `events` outbox). An event is an
 * entry of a contact's timeline when its type is in ACTIVITY_EVENT_TYPES and its counterpart
 * address is the contact's phone or email. The counterpart is `event_counterpart(data)` (migration
 * 20261123020000): `data.to` of an outbound event, `data.from` of an inbound one. The partial
 * expression index `events_counterpart_idx` (organization, mode, counterpart, id) makes "the
 * newest events with this address" a backward index scan.
 *
 * A context that adds communications (calls, agent conversations) only adds its event types here,
 * with `direction`, `from` and `to` in the event data: the index already covers them.
 *
 * Message events carry one `to` (an email's first recipient); the other recipients of an email are
 * found through `messages.recipients` (GIN, over messages with several recipients only: the reads
 * say `jsonb_array_length(recipients) > 1`) and the events of those messages (`events_resource_idx`).
 *
 * Queries are raw SQL on the pg pool and name the tenant on every table they read.
 */
import type { Pool } from 'pg';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { Event } from '../../platform/events/events.entities.ts';
import type { EventType } from '../../platform/events/events.ts';
import { keysetSql, type Keyset } from '../../platform/pagination.ts';

/** Event types that are timeline entries (one entry per event: queued, sent, delivered… each). */
export const ACTIVITY_EVENT_TYPES: readonly EventType[] = [
  'message.queued', 'message.sent', 'message.delivered', 'message.read', 'message.failed', 'message.received',
];

export type ActivityEntry = Pick<Event, 'id' | 'type' | 'resourceType' | 'resourceId' | 'sequence' | 'data' | 'createdAt'>;

const ENTRY_COLUMNS = 'e.id, e.type, e.resource_type, e.resource_id, e.sequence, e.data, e.created_at';

function rowToEntry(r: Record<string, unknown>): ActivityEntry {
  return {
    id: String(r.id), type: String(r.type), resourceType: String(r.resource_type), resourceId: String(r.resource_id),
    sequence: Number(r.sequence), data: r.data as Record<string, unknown>, createdAt: new Date(r.created_at as string),
  };
}

const isEmail = (address: string) => address.includes('@');

/**
 * One keyset page of the timeline of these addresses (platform/pagination.ts):
 * per address the newest `limit` events by counterpart (index scan) and, for email addresses, the
 * newest `limit` events of messages that list the address as a further recipient; merged, deduplicated.
 */
export async function activityPage(pool: Pool, tenant: TenantRef, addresses: readonly string[], page: Keyset): Promise<ActivityEntry[]> {
  const all = [...new Set(addresses.filter(Boolean))];
  if (!all.length) return [];
  const params: unknown[] = [tenant.organizationId, tenant.mode, [...ACTIVITY_EVENT_TYPES], page.take];
  const bound = keysetSql(page, 'e.id');
  let keyset = '';
  if (bound.condition) { params.push(bound.param); keyset = `and ${bound.condition.replace('?', `$${params.length}`)}`; }
  const order = bound.order;
  params.push(all);
  const byCounterpart = `select x.id from unnest($${params.length}::text[]) as a(address) cross join lateral (
      select e.id from events e
       where e.organization_id = $1 and e.mode = $2 and event_counterpart(e.data) = a.address and event_counterpart(e.data) is not null
         and e.type = any($3::text[]) ${keyset}
       order by ${order} limit $4) x`;
  const emails = all.filter(isEmail);
  let byRecipients = '';
  if (emails.length) {
    params.push(emails);
    byRecipients = `union select x.id from unnest($${params.length}::text[]) as a(address) cross join lateral (
      select e.id from (select m.id from messages m where m.organization_id = $1 and m.mode = $2 and jsonb_array_length(m.recipients) > 1 and m.recipients @> jsonb_build_array(a.address) and m."to" <> a.address offset 0) r
        join events e on e.resource_id = r.id and e.organization_id = $1 and e.mode = $2
       where e.type = any($3::text[]) ${keyset}
       order by ${order} limit $4) x`;
  }
  const res = await pool.query(
    `select ${ENTRY_COLUMNS} from (${byCounterpart} ${byRecipients}) h
       join events e on e.id = h.id and e.organization_id = $1 and e.mode = $2
      order by ${order} limit $4`,
    params,
  );
  return res.rows.map(rowToEntry);
}

/**
 * The newest timeline entry of each key's addresses (GraphQL `Contact.lastActivity`, batched), in
 * one statement: per address a LATERAL pair of probes (newest event by counterpart; for an email,
 * the newest event of a message that lists it as a further recipient), the newest per key kept
 * with DISTINCT ON, then the event rows. Keys without any entry are absent.
 */
export async function latestActivity(pool: Pool, tenant: TenantRef, addressesByKey: ReadonlyMap<string, readonly string[]>): Promise<Map<string, ActivityEntry>> {
  const pairs: { k: string; a: string }[] = [];
  for (const [k, addresses] of addressesByKey) for (const a of new Set(addresses)) if (a) pairs.push({ k, a });
  const out = new Map<string, ActivityEntry>();
  if (!pairs.length) return out;
  // The recipients probe reads the GIN index: behind `offset 0` the planner cannot trade it for a
  // scan that filters every message; `strpos` skips it for phones (recipient lists are email only).
  const res = await pool.query(
    `with k as (select x.k, x.a from jsonb_to_recordset($1::jsonb) as x(k text, a text)),
      hit as (
        select distinct on (k.k) k.k, h.id from k cross join lateral (
          (select e.id from events e
            where e.organization_id = $2 and e.mode = $3 and event_counterpart(e.data) = k.a and event_counterpart(e.data) is not null and e.type = any($4::text[])
            order by e.id desc limit 1)
          union all
          (select max(e.id) from (
              select m.id from messages m
               where m.organization_id = $2 and m.mode = $3 and strpos(k.a, '@') > 0 and jsonb_array_length(m.recipients) > 1 and m.recipients @> jsonb_build_array(k.a) and m."to" <> k.a offset 0) r
            join events e on e.resource_id = r.id and e.organization_id = $2 and e.mode = $3 and e.type = any($4::text[]))
        ) h(id)
        where h.id is not null
        order by k.k, h.id desc
      )
      select hit.k as contact_key, ${ENTRY_COLUMNS} from hit join events e on e.id = hit.id and e.organization_id = $2 and e.mode = $3`,
    [JSON.stringify(pairs), tenant.organizationId, tenant.mode, [...ACTIVITY_EVENT_TYPES]],
  );
  for (const r of res.rows) out.set(String(r.contact_key), rowToEntry(r));
  return out;
}
