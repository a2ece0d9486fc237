import { Migration } from '@mikro-orm/migrations';

/**
 * Messaging's delivery queue (messaging.queue.ts): one row per message waiting to be sent, written
 * in the acceptance statement instead of a pg-boss `messaging.deliver` job, claimed when due by one
 * statement per worker loop. `due_at` doubles as the lease (a claim moves it past the lease; the
 * row is deleted once the send was recorded, moved later for a retry or a paced slot). `attempts`
 * counts claims and is the claim's token: a loop settles or extends only rows still holding the
 * count it claimed. The tenant columns rebuild the send's scope (no tenant filter: a system
 * queue, as pg-boss's table was). A statement that inserts rows NOTIFYs `messaging_deliveries`
 * once (the idle loops' wake-up; the acceptance commit already NOTIFYs for its events).
 */
export class Migration20261128050000_messaging_deliveries extends Migration {
  override up(): void {
    this.addSql(`
      create table messaging_deliveries (
        message_id text primary key,
        organization_id text not null,
        mode text not null,
        plan text not null,
        request_id text,
        trace_parent text,
        paced boolean not null default false,
        attempts integer not null default 0,
        due_at timestamptz not null default now()
      );
      create index messaging_deliveries_due on messaging_deliveries (due_at);
      create function messaging_deliveries_notify() returns trigger language plpgsql as $$
      begin
        perform pg_notify('messaging_deliveries', '');
        return null;
      end $$;
      create trigger messaging_deliveries_notify after insert on messaging_deliveries
        for each statement execute function messaging_deliveries_notify();
    `);
  }

  override down(): void {
    this.addSql('drop table messaging_deliveries; drop function messaging_deliveries_notify();');
  }
}
