import { Migration } from '@mikro-orm/migrations';

/**
 * Flows: flows (current version), flow_versions (every saved version, immutable), executions pinned
 * to a version, and their step log. Executions and steps are hot rows: no foreign key to organizations.
 */
export class Migration20261125030000_flows extends Migration {
  override up(): void {
    this.addSql(`
      create table flows (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        name text not null,
        trigger_type text not null check (trigger_type in ('inbound_message','webhook','schedule','api','event')),
        trigger jsonb not null,
        definition jsonb not null,
        version integer not null check (version >= 1),
        webhook_secret text,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        deleted_at timestamptz
      );
      create index flows_org_idx on flows (organization_id, mode, id desc) where deleted_at is null;
      create index flows_trigger_idx on flows (organization_id, mode, trigger_type) where deleted_at is null;

      create table flow_versions (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        flow_id text not null references flows(id) on delete cascade deferrable initially deferred,
        version integer not null,
        name text not null,
        trigger jsonb not null,
        definition jsonb not null,
        created_at timestamptz not null,
        unique (flow_id, version)
      );

      create table flow_executions (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        flow_id text not null,
        flow_version integer not null,
        status text not null check (status in ('running','waiting','completed','failed','cancelled')),
        trigger_type text not null,
        context jsonb not null,
        cursor integer not null,
        current_node_id text,
        waiting jsonb,
        error jsonb,
        steps_count integer not null default 0,
        depth integer not null default 0,
        sequence integer not null default 1,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        finished_at timestamptz
      );
      create index flow_executions_org_idx on flow_executions (organization_id, mode, id desc);
      create index flow_executions_flow_idx on flow_executions (organization_id, mode, flow_id, id desc);
      create index flow_executions_active_idx on flow_executions (organization_id, mode) where status in ('running','waiting');
      create index flow_executions_waiting_idx on flow_executions (organization_id, mode, (waiting->>'address')) where status = 'waiting' and waiting is not null;

      create table flow_execution_steps (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        execution_id text not null,
        seq integer not null,
        node_id text not null,
        node_type text not null,
        status text not null check (status in ('completed','waiting','failed')),
        input jsonb,
        output jsonb,
        error jsonb,
        started_at timestamptz not null,
        finished_at timestamptz,
        duration_ms integer,
        unique (execution_id, seq)
      );
    `);
  }

  override down(): void {
    this.addSql('drop table flow_execution_steps, flow_executions, flow_versions, flows;');
  }
}
