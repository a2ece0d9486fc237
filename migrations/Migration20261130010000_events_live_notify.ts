import { Migration } from '@mikro-orm/migrations';

/**
 * Live notices at commit: the statement trigger that queues each inserted event on
 * `events_outbox` also NOTIFYs `events_live` with the notices of those events (the bus's
 * `{kind: 'event', id, organizationId, mode, type, resourceId}` in JSON arrays of at most
 * 7,000 bytes, under PostgreSQL's 8,000-byte limit whatever the ids' and types' lengths: a fixed
 * count per payload overflowed it with long ones). The notices are built
 * once, in the statement that queues the ids (one aggregate); when they fit in 7,000 bytes
 * (statements of up to ~36 events) they go as one payload, else a loop packs them into as few as
 * fit. A first version chunked every statement by a window and GROUP BY over the rows and cost
 * ~8 µs more per event at 16 per statement (docs/benchmarks.md, voice, session 22). NOTIFY is delivered
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
      declare
        notices text[];
        payload text;
        n text;
      begin
        with queued as (insert into events_outbox (id) select id from inserted where dispatched_at is null)
        select array_agg(json_build_object('kind', 'event', 'id', id, 'organizationId', organization_id, 'mode', mode,
                                           'type', type, 'resourceId', resource_id)::text)
          into notices from inserted where dispatched_at is null;
        if notices is null then return null; end if;
        payload := array_to_string(notices, ',');
        if octet_length(payload) <= 6998 then
          perform pg_notify('events_outbox', ''), pg_notify('events_live', '[' || payload || ']');
          return null;
        end if;
        perform pg_notify('events_outbox', '');
        payload := null;
        foreach n in array notices loop
          if payload is not null and octet_length(payload) + octet_length(n) > 6998 then
            perform pg_notify('events_live', payload || ']');
            payload := null;
          end if;
          payload := case when payload is null then '[' || n else payload || ',' || n end;
        end loop;
        perform pg_notify('events_live', payload || ']');
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
