import { Migration } from '@mikro-orm/migrations';

/** The platform spine: tenants, users, memberships, API keys, audit, usage, idempotency, rate limits. */
export class Migration20261122000000_spine extends Migration {
  override up(): void {
    this.addSql(`
      create table organizations (
        id text primary key,
        name text not null,
        plan text not null check (plan in ('starter','growth','business','enterprise')),
        ip_allowlist jsonb not null default '[]',
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create table users (
        id text primary key,
        email text not null unique,
        name text,
        created_at timestamptz not null
      );
      create table team_members (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        user_id text not null references users(id) on delete cascade deferrable initially deferred,
        role text not null check (role in ('owner','admin','developer','viewer','billing')),
        created_at timestamptz not null,
        updated_at timestamptz not null,
        unique (organization_id, user_id)
      );
      create table api_keys (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        role text not null check (role in ('owner','admin','developer','viewer','billing')),
        name text,
        prefix text not null,
        last4 text not null,
        key_hash text not null unique,
        created_by text,
        created_at timestamptz not null,
        last_used_at timestamptz,
        revoked_at timestamptz
      );
      create index api_keys_org_idx on api_keys (organization_id, id);
      create table audit_log_entries (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text,
        actor_type text not null,
        actor_id text,
        action text not null,
        resource_type text,
        resource_id text,
        ip text,
        request_id text,
        details jsonb not null default '{}',
        created_at timestamptz not null
      );
      create index audit_log_entries_org_idx on audit_log_entries (organization_id, id);
      create index audit_log_entries_created_idx on audit_log_entries (created_at);
      create table usage_entries (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        context text not null,
        kind text not null,
        quantity integer not null,
        resource_id text,
        idempotency_key text not null unique,
        created_at timestamptz not null
      );
      create index usage_entries_org_idx on usage_entries (organization_id, mode, created_at);
      create table idempotency_keys (
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null,
        key text not null,
        request_hash text not null,
        state text not null check (state in ('running','done')),
        response_status integer,
        response_headers jsonb,
        response_body text,
        created_at timestamptz not null,
        locked_at timestamptz not null,
        primary key (organization_id, mode, key)
      );
      create index idempotency_keys_created_idx on idempotency_keys (created_at);
      create unlogged table rate_limit_counters (
        bucket text not null,
        window_start bigint not null,
        count integer not null,
        expires_at timestamptz not null,
        primary key (bucket, window_start)
      );
      create index rate_limit_counters_expires_idx on rate_limit_counters (expires_at);
      create table token_sessions (
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        session_id text not null,
        user_id text not null,
        first_seen_at timestamptz not null,
        primary key (organization_id, session_id)
      );
    `);
  }

  override down(): void {
    this.addSql(`drop table token_sessions, rate_limit_counters, idempotency_keys, usage_entries,
      audit_log_entries, api_keys, team_members, users, organizations;`);
  }
}
