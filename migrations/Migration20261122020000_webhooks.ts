import { Migration } from '@mikro-orm/migrations';

/**
 * Event dispatch and webhooks: the outbox relay marks events dispatched (a trigger NOTIFYs the
 * relay at commit), webhook endpoints, one delivery per (event, target) and a log of every attempt.
 */
export class Migration20261122020000_webhooks extends Migration {
  override up(): void {
    this.addSql(`
      alter table events add column dispatched_at timestamptz;
      create index events_undispatched_idx on events (id) where dispatched_at is null;
      create function events_outbox_notify() returns trigger language plpgsql as $$
      begin
        perform pg_notify('events_outbox', '');
        return null;
      end $$;
      create trigger events_outbox_notify after insert on events for each statement execute function events_outbox_notify();

      create table webhook_endpoints (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        url text not null,
        description text,
        events jsonb not null,
        active boolean not null,
        signing_secret_sealed text not null,
        disabled_reason text,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index webhook_endpoints_org_idx on webhook_endpoints (organization_id, mode, id);

      create table webhook_deliveries (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        endpoint_id text references webhook_endpoints(id) on delete set null,
        url text not null,
        event_id text not null,
        event_type text not null,
        payload text not null,
        status text not null check (status in ('pending','success','failed','dead','cancelled')),
        attempt integer not null,
        next_attempt_at timestamptz,
        locked_until timestamptz,
        http_status integer,
        response_time_ms integer,
        last_error text,
        delivered_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        unique (event_id, endpoint_id, url)
      );
      create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status in ('pending','failed');
      create index webhook_deliveries_endpoint_idx on webhook_deliveries (organization_id, mode, endpoint_id, id);
      create index webhook_deliveries_status_idx on webhook_deliveries (organization_id, mode, status, id);

      create table webhook_attempts (
        id text primary key,
        delivery_id text not null references webhook_deliveries(id) on delete cascade,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        attempt integer not null,
        status text not null check (status in ('success','failed')),
        http_status integer,
        response_time_ms integer,
        error text,
        next_retry_at timestamptz,
        created_at timestamptz not null
      );
      create index webhook_attempts_delivery_idx on webhook_attempts (delivery_id, attempt);
    `);
  }

  override down(): void {
    this.addSql(`drop table webhook_attempts, webhook_deliveries, webhook_endpoints;
      drop trigger events_outbox_notify on events; drop function events_outbox_notify();
      drop index events_undispatched_idx; alter table events drop column dispatched_at;`);
  }
}
