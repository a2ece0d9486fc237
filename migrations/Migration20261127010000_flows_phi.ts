import { Migration } from '@mikro-orm/migrations';

/**
 * HIPAA mode for flows: an execution's context and error message, and a step's input, output and
 * error, sealed in a `phi` column (flows.phi.ts); `content_purged_at` set by the retention job.
 */
export class Migration20261127010000_flows_phi extends Migration {
  override up(): void {
    this.addSql(`
      alter table flow_executions add column phi text, add column content_purged_at timestamptz;
      alter table flow_execution_steps add column phi text;
      create index flow_executions_retention_idx on flow_executions (organization_id, finished_at) where content_purged_at is null and finished_at is not null;
    `);
  }

  override down(): void {
    this.addSql(`
      drop index if exists flow_executions_retention_idx;
      alter table flow_executions drop column phi, drop column content_purged_at;
      alter table flow_execution_steps drop column phi;
    `);
  }
}
