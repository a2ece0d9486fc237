import { Migration } from '@mikro-orm/migrations';

/**
 * Live notices at commit: the statement trigger that queues each inserted event on
 * `events_outbox` also NOTIFYs `events_live` with the notices of those events, the bus's
 * `{kind: 'event', id, organizationId, mode, type, resourceId}`, in JSON arrays of at most 7,000
 * bytes (PostgreSQL refuses payloads of 8,000). The notices are built once, in the statement that
 * queues the ids; when they fit in one payload (statements of up to ~36 events) they go as one,
 * else a loop packs them into as few as fit, whatever the ids' and types' lengths (a fixed count
 * per payload overflowed the limit with long ones).
 *
 * NOTIFY is delivered when the inserting transaction commits, to every instance's LISTEN
 * connection, so a subscriber on any instance hears of an event without waiting for the relay to
 * gather, read and announce its batch (~10 ms more at the median, and every status took that path
 * when the workers ran in their own process). The relay no longer announces anything. Events
 * inserted already dispatched (seeds) are neither queued nor announced, as before; events still on
 * the outbox when this migration runs are not announced. Cost and history: docs/benchmarks.md,
 * voice, session 22.
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
