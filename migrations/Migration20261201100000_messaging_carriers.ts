import { Migration } from '@mikro-orm/migrations';

/**
 * Carrier connectors and the route table (messaging, README "Carriers"), and the carriers' record
 * of what they sent (providers/messaging/carrierSends.ts).
 *
 * `messaging_connectors`: one SMSC account (or, later, a carrier API account) of an organization;
 * `shared` ones belong to the platform operator's organization and carry every organization's
 * traffic after its own routes. Credentials are sealed (never returned); `status`, `binds_up` and
 * `last_error` are what the instances running the connector report. `messaging_routes` pick the
 * connector of a live message: channel, destination prefix, sender, priority and weight.
 *
 * Every instance keeps the whole table of both in memory (accept-time checks, routing): a statement
 * trigger NOTIFYs `messaging_carriers` at the commit of any change to them, except status reports.
 *
 * `carrier_sends`: one row per message a connector began to send (sending, partial, sent, failed);
 * `carrier_parts`: each accepted segment by the SMSC's id, for delivery receipts.
 */
export class Migration20261201100000_messaging_carriers extends Migration {
  override up(): void {
    this.addSql(`
      create table messaging_connectors (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        name text not null,
        kind text not null check (kind in ('smpp')),
        channel text not null check (channel in ('sms')),
        shared boolean not null default false,
        enabled boolean not null default true,
        settings jsonb not null,
        sealed_credentials text not null,
        status text not null default 'down' check (status in ('connected','degraded','down','disabled')),
        binds_up integer not null default 0,
        last_error text,
        last_error_at timestamptz,
        status_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        unique (organization_id, name)
      );
      create index messaging_connectors_org_idx on messaging_connectors (organization_id, id);

      create table messaging_routes (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        connector_id text not null references messaging_connectors(id) deferrable initially deferred,
        shared boolean not null default false,
        channel text not null check (channel in ('sms')),
        prefix text not null default '',
        sender text,
        priority integer not null,
        weight integer not null check (weight > 0),
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index messaging_routes_org_idx on messaging_routes (organization_id, id);
      create index messaging_routes_connector_idx on messaging_routes (connector_id);

      create function messaging_carriers_changed() returns trigger language plpgsql as $$
      begin
        perform pg_notify('messaging_carriers', '');
        return null;
      end $$;
      create trigger messaging_connectors_changed after insert or delete or truncate on messaging_connectors
        for each statement execute function messaging_carriers_changed();
      create trigger messaging_connectors_config_changed
        after update of organization_id, name, kind, channel, shared, enabled, settings, sealed_credentials, updated_at on messaging_connectors
        for each statement execute function messaging_carriers_changed();
      create trigger messaging_routes_changed after insert or update or delete or truncate on messaging_routes
        for each statement execute function messaging_carriers_changed();

      create table carrier_sends (
        message_id text primary key,
        connector_id text not null,
        state text not null check (state in ('sending','partial','sent','failed')),
        ref integer not null,
        parts text[],
        pending integer not null default 0,
        failed_code text,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );
      create table carrier_parts (
        connector_id text not null,
        smsc_message_id text not null,
        message_id text not null,
        part integer not null,
        outcome text,
        primary key (connector_id, smsc_message_id, message_id)
      );
    `);
  }

  override down(): void {
    this.addSql(`
      drop table carrier_parts, carrier_sends;
      drop trigger messaging_routes_changed on messaging_routes;
      drop trigger messaging_connectors_config_changed on messaging_connectors;
      drop trigger messaging_connectors_changed on messaging_connectors;
      drop function messaging_carriers_changed();
      drop table messaging_routes, messaging_connectors;
    `);
  }
}
