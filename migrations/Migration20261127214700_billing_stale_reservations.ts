import { Migration } from '@mikro-orm/migrations';

/**
 * The stale-reservation sweep (`billing.stale-reservation-sweep`, credits: reservations.sweep.ts).
 * `billing_sweeps` keeps how far the sweep has read the ledger (by id, which sorts by time): each
 * reservation is looked at once, when it is older than the bound. One still open then (whose owner
 * may not have settled it yet) goes to `credit_reservation_watch` and is checked again, less and
 * less often, until its owner's answer settles it. Both tables are mutable bookkeeping beside the
 * append-only ledger; the ledger itself is unchanged.
 */
export class Migration20261127214700_billing_stale_reservations extends Migration {
  override up(): void {
    this.addSql(`
      create table billing_sweeps (
        name text primary key,
        swept_to text not null
      );
      insert into billing_sweeps (name, swept_to) values ('reservations', '');

      create table credit_reservation_watch (
        reservation_id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        key text not null,
        reserved_at timestamptz not null,
        checks integer not null default 0,
        next_check_at timestamptz not null
      );
      create index credit_reservation_watch_due_idx on credit_reservation_watch (next_check_at);
    `);
  }

  override down(): void {
    this.addSql('drop table credit_reservation_watch, billing_sweeps;');
  }
}
