import { Migration } from '@mikro-orm/migrations';

/**
 * The per-delivery rows of webhooks (webhook_deliveries, webhook_attempts) keep `organization_id`
 * without a foreign key, for the reason and with the rule of Migration20261124010000: one deferred
 * check per inserted row (two per delivery) on the hottest path of the delivery pipeline, for an id
 * that always comes from the event being delivered. Their other foreign keys stay: an attempt is
 * removed with its delivery, and a deleted endpoint leaves its deliveries with no endpoint.
 */
export class Migration20261124020000_webhook_rows_without_org_fk extends Migration {
  override up(): void {
    this.addSql(`
      alter table webhook_deliveries drop constraint webhook_deliveries_organization_id_fkey;
      alter table webhook_attempts drop constraint webhook_attempts_organization_id_fkey;
    `);
  }

  override down(): void {
    this.addSql(`
      alter table webhook_deliveries add constraint webhook_deliveries_organization_id_fkey foreign key (organization_id) references organizations(id) on delete cascade deferrable initially deferred;
      alter table webhook_attempts add constraint webhook_attempts_organization_id_fkey foreign key (organization_id) references organizations(id) on delete cascade deferrable initially deferred;
    `);
  }
}
