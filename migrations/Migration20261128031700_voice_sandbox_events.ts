import { Migration } from '@mikro-orm/migrations';

/**
 * The sandbox gateway's timeline (calls.timeline.ts): the placement and the delayed steps of
 * test-mode calls, one row per (call, step), claimed when due by one statement per instance
 * instead of one pg-boss job each. `due_at` doubles as the lease: a claim moves it past the lease,
 * and the step's row is deleted in the transaction that applies it, so a crash in between only
 * delays it. No tenant columns: a row names its call, and the call row holds the tenant.
 */
export class Migration20261128031700_voice_sandbox_events extends Migration {
  override up(): void {
    this.addSql(`
      create table voice_sandbox_events (
        call_id text not null,
        seq integer not null,
        due_at timestamptz not null default now(),
        attempts integer not null default 0,
        event jsonb not null,
        primary key (call_id, seq)
      );
      create index voice_sandbox_events_due on voice_sandbox_events (due_at);
    `);
  }

  override down(): void {
    this.addSql('drop table voice_sandbox_events;');
  }
}
