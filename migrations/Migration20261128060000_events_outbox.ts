import { Migration } from '@mikro-orm/migrations';

/**
 * The outbox as its own narrow table: a statement-level trigger on `events` inserts the ids of the
 * rows a statement inserted into `events_outbox` (and NOTIFYs the relay, as before), and the relay
 * deletes them once dispatched. Before, the relay marked each event dispatched with an UPDATE of
 * `events.dispatched_at` — a new version of the whole row (its JSON data included) through every
 * index, since the partial index `events_undispatched_idx` made it non-HOT — and every insert paid
 * that partial index too. Events stay insert-only; `dispatched_at` is no longer written (kept for
 * rows dispatched before; an event inserted with it set is not queued, as bench seeds do).
 */
export class Migration20261128060000_events_outbox extends Migration {
  override up(): void {
    this.addSql(`
      create table events_outbox (id text primary key);
      insert into events_outbox (id) select id from events where dispatched_at is null;
      drop trigger events_outbox_notify on events;
      drop function events_outbox_notify();
      create function events_outbox_enqueue() returns trigger language plpgsql as $$
      begin
        insert into events_outbox (id) select id from inserted where dispatched_at is null;
        perform pg_notify('events_outbox', '');
        return null;
      end $$;
      create trigger events_outbox_enqueue after insert on events referencing new table as inserted
        for each statement execute function events_outbox_enqueue();
      drop index events_undispatched_idx;
    `);
  }

  override down(): void {
    this.addSql(`
      create index events_undispatched_idx on events (id) where dispatched_at is null;
      update events set dispatched_at = now() where dispatched_at is null and id not in (select id from events_outbox);
      drop trigger events_outbox_enqueue on events;
      drop function events_outbox_enqueue();
      create function events_outbox_notify() returns trigger language plpgsql as $$
      begin
        perform pg_notify('events_outbox', '');
        return null;
      end $$;
      create trigger events_outbox_notify after insert on events for each statement execute function events_outbox_notify();
      drop table events_outbox;
    `);
  }
}
