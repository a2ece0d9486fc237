import { Migration } from '@mikro-orm/migrations';

/**
 * A billing account's first period starts when its organization was created, not at the
 * organization's first billing call (`GET /v1/billing/usage` counted from that call, so usage
 * before it showed nowhere but the history). Accounts still in that first trial period (no period
 * closed yet, no subscription) start it again at the organization's creation, with their included
 * pools, keyed by the period's start, moved along. New accounts are created that way
 * (credits.service.ts `account`).
 */
export class Migration20261130020100_billing_first_period_from_creation extends Migration {
  override up(): void {
    this.addSql(`
      update billing_pool_usage u set period_start = o.created_at
        from billing_accounts a join organizations o on o.id = a.organization_id
       where u.organization_id = a.organization_id and u.mode = a.mode and u.period_start = a.current_period_start
         and a.invoice_seq = 0 and a.status = 'trialing' and a.subscription_id is null and a.current_period_start > o.created_at;
      update billing_accounts a set current_period_start = o.created_at
        from organizations o
       where o.id = a.organization_id
         and a.invoice_seq = 0 and a.status = 'trialing' and a.subscription_id is null and a.current_period_start > o.created_at;
    `);
  }

  override down(): void {
    // The former starts are not kept; a first period that begins at the organization's creation is valid either way.
  }
}
