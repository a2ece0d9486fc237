/**
 * `TransitionWriter`: status changes (sent, delivered, read, failed) of many messages and their
 * events in one statement (split from messaging.batching.ts). Every commit that inserts events
 * NOTIFYs (the outbox relay's wake-up), and PostgreSQL serializes notifying commits behind one
 * lock, so one commit per status change capped the delivery pipeline; batches take that lock once
 * for many changes.
 */
import type { Pool } from 'pg';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { Batcher } from '../../platform/db/batcher.ts';
import { currentTraceparent, tracingEnabled } from '../../platform/tracing.ts';
import { CHANNELS_WITH_READS } from '../../providers/messaging/types.ts';
import type { MessageStatus } from './messaging.entities.ts';

/**
 * The statement of TransitionWriter (exported for test/messaging-plans.test.ts, which checks its
 * plan on a table without statistics): $1 message ids, $2 organizations, $3 modes, $4 statuses,
 * $5 report times, $6 error codes, $7 providers, $8 provider message ids, $9 error messages,
 * $10 event ids, $11 record times, $12 the channels with reads, $13 traceparents.
 */
export const TRANSITIONS_SQL = `with r as (
          select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::timestamptz[], $13::text[])
            as r(id, org, mode, status, at, error_code, provider, provider_message_id, error_message, event_id, now, trace_parent)
        ), upd as (
          update messages m set
            status = r.status,
            status_history = m.status_history || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('status', r.status, 'at', r.at, 'error_code', r.error_code))),
            sent_at = case when r.status = 'sent' then r.at::timestamptz else m.sent_at end,
            delivered_at = case when r.status = 'delivered' then r.at::timestamptz when r.status = 'read' then coalesce(m.delivered_at, r.at::timestamptz) else m.delivered_at end,
            read_at = case when r.status = 'read' then r.at::timestamptz else m.read_at end,
            failed_at = case when r.status = 'failed' then r.at::timestamptz else m.failed_at end,
            error_code = case when r.status = 'failed' and r.error_code is not null then r.error_code else m.error_code end,
            provider = coalesce(r.provider, m.provider),
            provider_message_id = coalesce(r.provider_message_id, m.provider_message_id),
            error_message = coalesce(r.error_message, m.error_message),
            sequence = m.sequence + 1,
            updated_at = r.now
          from r
          where m.id = r.id and (m.organization_id = r.org and m.mode = r.mode) is true
            and m.status not in ('failed', 'read')
            and case r.status
                  when 'failed' then m.status in ('queued', 'sent')
                  when 'read' then m.channel = any($12::text[])
                  else array_position(array['queued', 'sent', 'delivered', 'read'], r.status) > array_position(array['queued', 'sent', 'delivered', 'read'], m.status)
                end
          returning m.*, r.event_id, r.now, r.trace_parent
        ), ev as (
          insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at, trace_parent)
          select event_id, organization_id, mode, 'message.' || status, 'message', id, sequence,
                 jsonb_strip_nulls(jsonb_build_object('message_id', id, 'channel', channel, 'from', "from", 'to', "to", 'status', status,
                   'direction', direction, 'error_code', error_code, 'webhook_url', webhook_url, 'depth', chain_depth)),
                 now, trace_parent
          from upd
        )
        select event_id from upd`;

export type Transition = {
  tenant: TenantRef;
  messageId: string;
  status: MessageStatus;
  /** When the change happened (the provider's report time); `now` is when it is recorded. */
  at: Date;
  now: Date;
  errorCode: string | null;
  provider?: string;
  providerMessageId?: string;
  errorMessage?: string;
  eventId: string;
  /** The W3C `traceparent` of the caller (tracing on): the change's event continues its trace. */
  traceparent?: string | undefined;
};

/**
 * Applies status changes if they move messages forward (queued → sent → delivered → read, or →
 * failed from queued/sent); each caller learns whether its change applied. The UPDATE's condition
 * is the forward-only rule, and PostgreSQL re-checks it on the newest row version when a concurrent
 * change committed first, so racing reports apply once and never move a message backwards. The
 * message event is inserted from the updated rows in the same statement. A batch holds at most one
 * change per message (later ones for the same message go to the next round, in arrival order).
 *
 * The rows are found by primary key only: the tenant check is wrapped (`is true`) so that it cannot
 * become an index condition. Written as plain equalities, a `messages` table without statistics
 * (new, or grown since its last ANALYZE; the service's vacuum analyzes on dead rows only) had the
 * planner take `messages_from_idx` (organization, mode, from, id) with `id` as a filter inside the
 * index: every change walked all of the tenant's messages (1.6 ms per change at 30,000 messages).
 */
export class TransitionWriter {
  readonly #pool: Pool;
  readonly #batcher: Batcher<Transition, boolean>;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.#batcher = new Batcher((items) => this.#run(items), { maxInFlight: 2, isolate: true, maxBatch: 200 });
  }

  apply(transition: Transition): Promise<boolean> {
    // The batch runs in one caller's context: each change keeps its own.
    return this.#batcher.submit(tracingEnabled() ? { ...transition, traceparent: currentTraceparent() } : transition);
  }

  async #run(items: Transition[]): Promise<boolean[]> {
    const applied = new Map<Transition, boolean>();
    let rest = items;
    while (rest.length > 0) {
      const seen = new Set<string>();
      const round: Transition[] = [];
      const later: Transition[] = [];
      for (const t of rest) {
        if (seen.has(t.messageId)) later.push(t);
        else {
          seen.add(t.messageId);
          round.push(t);
        }
      }
      const done = await this.#statement(round);
      for (const t of round) applied.set(t, done.has(t.eventId));
      rest = later;
    }
    return items.map((t) => applied.get(t)!);
  }

  /** One statement for changes of distinct messages; returns the event ids of the changes that applied. */
  async #statement(round: Transition[]): Promise<Set<string>> {
    const col = <T>(pick: (t: Transition) => T) => round.map(pick);
    const { rows } = await this.#pool.query<{ event_id: string }>({
      name: 'messaging_transitions',
      text: TRANSITIONS_SQL,
      values: [
        col((t) => t.messageId), col((t) => t.tenant.organizationId), col((t) => t.tenant.mode), col((t) => t.status), col((t) => t.at.toISOString()),
        col((t) => t.errorCode), col((t) => t.provider ?? null), col((t) => t.providerMessageId ?? null), col((t) => t.errorMessage ?? null),
        col((t) => t.eventId), col((t) => t.now), [...CHANNELS_WITH_READS], col((t) => t.traceparent ?? null),
      ],
    });
    return new Set(rows.map((r) => r.event_id));
  }
}
