import { Migration } from '@mikro-orm/migrations';

/**
 * `flow_executions.delivery_id`: the delivery id a webhook trigger call was signed with (issue 43).
 * One delivery starts at most one execution of a flow: a replay answers with the first.
 */
export class Migration20261201020000_flows_webhook_deliveries extends Migration {
  override up(): void {
    this.addSql(`
      alter table flow_executions add column delivery_id text;
      create unique index flow_executions_delivery_idx on flow_executions (flow_id, delivery_id) where delivery_id is not null;
    `);
  }

  override down(): void {
    this.addSql(`
      drop index flow_executions_delivery_idx;
      alter table flow_executions drop column delivery_id;
    `);
  }
}
