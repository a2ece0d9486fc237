import { Migration } from '@mikro-orm/migrations';

/**
 * The sandbox messaging provider's delivery reports (messaging.timeline.ts): one row per (message,
 * reported status), claimed when due by one statement per instance instead of one pg-boss job
 * each. `due_at` doubles as the lease: a claim moves it past the lease, and the row is deleted
 * once its report was applied (applying twice is a no-op), so a crash in between only delays it.
 * No tenant columns: a row names its message, and the message row holds the tenant.
 */
export class Migration20261128040000_messaging_sandbox_reports extends Migration {
  override up(): void {
    this.addSql(`
      create table messaging_sandbox_reports (
        message_id text not null,
        status text not null,
        due_at timestamptz not null default now(),
        attempts integer not null default 0,
        report jsonb not null,
        primary key (message_id, status)
      );
      create index messaging_sandbox_reports_due on messaging_sandbox_reports (due_at);
    `);
  }

  override down(): void {
    this.addSql('drop table messaging_sandbox_reports;');
  }
}
