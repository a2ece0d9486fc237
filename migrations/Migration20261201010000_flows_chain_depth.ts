import { Migration } from '@mikro-orm/migrations';

/**
 * Chains of flows (issue 43):
 * - `messages.chain_depth`: a message a flow execution sent keeps how deep in a chain of flow
 *   executions it was caused (the execution's depth + 1); its events carry it as `data.depth`, so
 *   a flow triggered by them starts one level deeper. Null for every other message.
 * - `flow_executions.refused`: a start recorded `failed` without running (chain depth, per-minute
 *   cap, concurrency limit); refused starts do not count against the per-minute cap.
 */
export class Migration20261201010000_flows_chain_depth extends Migration {
  override up(): void {
    this.addSql(`
      alter table messages add column chain_depth integer;
      alter table flow_executions add column refused boolean not null default false;
    `);
  }

  override down(): void {
    this.addSql(`
      alter table flow_executions drop column refused;
      alter table messages drop column chain_depth;
    `);
  }
}
