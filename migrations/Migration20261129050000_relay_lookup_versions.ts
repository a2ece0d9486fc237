import { Migration } from '@mikro-orm/migrations';

/**
 * Versions of what the outbox relay's consumers look up for every batch (platform/events/relay.ts,
 * relayLookups.ts): the webhook endpoints (fan-out) and the event-triggered flows (flow triggers).
 * A statement trigger on each table they read bumps the lookup's version in the writer's
 * transaction; the relay reads the versions with its batch, and a consumer answers from its
 * per-instance cache while the version is the one its cache was filled under (else it reads again).
 * Direct writes (tests, operators) bump them as well as the API's. The flows' lookup joins the
 * organization for its plan: a statement that sets `plan` bumps it too.
 */
export class Migration20261129050000_relay_lookup_versions extends Migration {
  override up(): void {
    this.addSql(`
      create table relay_lookup_versions (name text primary key, version bigint not null);
      create function relay_lookup_bump() returns trigger language plpgsql as $$
      begin
        insert into relay_lookup_versions (name, version) values (tg_argv[0], 1)
          on conflict (name) do update set version = relay_lookup_versions.version + 1;
        return null;
      end $$;
      create trigger webhook_endpoints_relay_lookup after insert or update or delete or truncate on webhook_endpoints
        for each statement execute function relay_lookup_bump('webhook_endpoints');
      create trigger flows_relay_lookup after insert or update or delete or truncate on flows
        for each statement execute function relay_lookup_bump('flows');
      create trigger flow_versions_relay_lookup after insert or update or delete or truncate on flow_versions
        for each statement execute function relay_lookup_bump('flows');
      create trigger organizations_plan_relay_lookup after update of plan on organizations
        for each statement execute function relay_lookup_bump('flows');
    `);
  }

  override down(): void {
    this.addSql(`
      drop trigger organizations_plan_relay_lookup on organizations;
      drop trigger flow_versions_relay_lookup on flow_versions;
      drop trigger flows_relay_lookup on flows;
      drop trigger webhook_endpoints_relay_lookup on webhook_endpoints;
      drop function relay_lookup_bump();
      drop table relay_lookup_versions;
    `);
  }
}
