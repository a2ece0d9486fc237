import { Migration } from '@mikro-orm/migrations';

/**
 * Auto-reload sweeper: when an account's reload mark (`auto_reload_token`) was set or last picked up
 * by its job, so the sweeper can tell a reload whose job was lost from one under way; and a partial
 * index over the accounts with auto-reload on, the only rows the sweeper reads.
 */
export class Migration20261126020000_billing_auto_reload_sweep extends Migration {
  override up(): void {
    this.addSql(`
      alter table billing_accounts add column auto_reload_token_at timestamptz;
      create index billing_accounts_auto_reload_idx on billing_accounts (organization_id, mode) where auto_reload_enabled;
    `);
  }

  override down(): void {
    this.addSql(`drop index billing_accounts_auto_reload_idx; alter table billing_accounts drop column auto_reload_token_at;`);
  }
}
