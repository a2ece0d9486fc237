import { Migration } from '@mikro-orm/migrations';

/**
 * Live notices at commit: the statement trigger that queues each inserted event on
 * `events_outbox` also NOTIFYs `events_live` with the notices of those events (the bus's
 * `{kind: 'event', id, organizationId, mode, type, resourceId}` in JSON arrays: a payload holds
 * the notices whose running byte count falls in one 7,000-byte step, so it stays under
 * PostgreSQL's 8,000-byte limit by the size of one notice, ~200 bytes, whatever the ids' and
 * types' lengths; a fixed count per payload overflowed it with long ones). A statement's notices
 * are one payload when they fit in 7,000 bytes (every statement of the hot paths: one aggregate,
 * with the outbox insert in the same statement), else chunked as above. NOTIFY is delivered
 * when the inserting transaction commits, to every instance's LISTEN connection, so a subscriber
 * on any instance hears of an event without waiting for the relay to gather, read and announce
 * its batch (before: ~10 ms more at the median, and every status of a deployment whose workers
 * run in their own process took that path). The relay no longer announces anything. Events
 * inserted already dispatched (seeds) are neither queued nor announced, as before.
 * Events committed before this migration and still on the outbox when it runs are not announced.
 */
export class Migration20261130010000_events_live_notify extends Migration {
  override up(): void {
    this.addSql(`
      create or replace function events_outbox_enqueue() returns trigger language plpgsql as $$
      declare payload text;
      begin
        with queued as (insert into events_outbox (id) select id from inserted where dispatched_at is null)
        select '[' || string_agg(json_build_object('kind', 'event', 'id', id, 'organizationId', organization_id, 'mode', mode,
                                                   'type', type, 'resourceId', resource_id)::text, ',') || ']'
          into payload from inserted where dispatched_at is null;
        if payload is null then return null; end if;
        if octet_length(payload) <= 7000 then
          perform pg_notify('events_outbox', ''), pg_notify('events_live', payload);
          return null;
        end if;
        perform pg_notify('events_outbox', '');
        perform pg_notify('events_live', '[' || string_agg(n, ',') || ']')
           from (select n, sum(octet_length(n) + 1) over (rows between unbounded preceding and current row) / 7000 as chunk
                   from (select json_build_object('kind', 'event', 'id', id, 'organizationId', organization_id, 'mode', mode,
                                                  'type', type, 'resourceId', resource_id)::text as n
                           from inserted where dispatched_at is null) as rows) as notices
          group by chunk;
        return null;
      end $$;
    `);
  }

  override down(): void {
    this.addSql(`
      create or replace function events_outbox_enqueue() returns trigger language plpgsql as $$
      begin
        insert into events_outbox (id) select id from inserted where dispatched_at is null;
        perform pg_notify('events_outbox', '');
        return null;
      end $$;
    `);
  }
}
