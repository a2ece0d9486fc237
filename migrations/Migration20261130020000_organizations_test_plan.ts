import { Migration } from '@mikro-orm/migrations';

/**
 * A plan per mode: `organizations.plan` is the live plan, `test_plan` the plan test-mode keys act
 * on (rate limits, HIPAA's plan check, usage quotas). Until now a test-mode checkout changed the
 * test subscription but not the plan the test keys ran on. Both start equal: existing rows take
 * their plan, and an insert that leaves `test_plan` out gets `plan` (a trigger, so every writer of
 * organizations — the ORM, the admin CLI, tests — keeps working); an organization that already
 * completed a test-mode checkout gets that subscription's plan. From then on each changes only with
 * its own mode's checkout or plan change.
 */
export class Migration20261130020000_organizations_test_plan extends Migration {
  override up(): void {
    this.addSql(`
      alter table organizations add column test_plan text check (test_plan in ('starter','growth','business','enterprise'));
      update organizations set test_plan = plan;
      -- A test-mode subscription already bought (a completed test checkout) is the test plan.
      update organizations o set test_plan = a.plan_id
        from billing_accounts a where a.organization_id = o.id and a.mode = 'test' and a.subscription_id is not null;
      alter table organizations alter column test_plan set not null;

      create function organizations_test_plan_default() returns trigger language plpgsql as $$
        begin
          new.test_plan := coalesce(new.test_plan, new.plan);
          return new;
        end $$;
      create trigger organizations_test_plan_default before insert on organizations
        for each row execute function organizations_test_plan_default();
    `);
  }

  override down(): void {
    this.addSql(`
      drop trigger organizations_test_plan_default on organizations;
      drop function organizations_test_plan_default();
      alter table organizations drop column test_plan;
    `);
  }
}
