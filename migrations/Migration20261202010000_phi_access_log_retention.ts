import { Migration } from '@mikro-orm/migrations';

/**
 * The PHI access log's rotation (the newest 10,000 entries of an organization are kept) moves into
 * one narrow `SECURITY DEFINER` function owned by the migrations' (owner) role,
 * `phi_access_log_retain(organization_id)`, which deletes only what lies beyond an organization's
 * newest 10,000 entries and records each removal in `phi_access_log_removals` (count, id and time
 * range, the session's role). The service's own role has no DELETE, UPDATE or TRUNCATE on the log
 * (platform/db/roles.ts grants it), so it can remove entries only through this function.
 *
 * The guard no longer lets a DELETE through because 10,000 newer entries exist: a delete passes
 * only while the function runs (a transaction-local flag it sets and clears). The removals record is
 * append-only the same way.
 */
export class Migration20261202010000_phi_access_log_retention extends Migration {
  override up(): void {
    this.addSql(`
      create table phi_access_log_removals (
        id bigserial primary key,
        organization_id text not null,
        removed integer not null,
        first_id text,
        last_id text,
        first_created_at timestamptz,
        last_created_at timestamptz,
        reason text not null,
        removed_by text not null default session_user,
        removed_at timestamptz not null default now()
      );
      create index phi_access_log_removals_org_idx on phi_access_log_removals (organization_id, id);

      create or replace function phi_access_log_guard() returns trigger language plpgsql as $$
        begin
          if tg_op = 'DELETE' and current_setting('omnichannel.phi_access_log_retention', true) = 'on' then
            return old;
          end if;
          raise exception 'phi_access_log is append-only' using errcode = 'insufficient_privilege';
        end $$;

      create function phi_access_log_retain(org text) returns integer
        language plpgsql security definer set search_path = public, pg_temp as $$
        declare cutoff text; n integer; first_id text; last_id text; first_at timestamptz; last_at timestamptz;
        begin
          select x.id into cutoff from phi_access_log x where x.organization_id = org order by x.id desc offset 10000 limit 1;
          if cutoff is null then return 0; end if;
          perform set_config('omnichannel.phi_access_log_retention', 'on', true);
          with d as (delete from phi_access_log where organization_id = org and id <= cutoff returning id, created_at)
            select count(*)::integer, min(d.id), max(d.id), min(d.created_at), max(d.created_at) into n, first_id, last_id, first_at, last_at from d;
          perform set_config('omnichannel.phi_access_log_retention', 'off', true);
          insert into phi_access_log_removals (organization_id, removed, first_id, last_id, first_created_at, last_created_at, reason)
            values (org, n, first_id, last_id, first_at, last_at, 'rotation: the newest 10000 entries are kept');
          return n;
        end $$;
      revoke execute on function phi_access_log_retain(text) from public;

      create or replace function phi_access_log_rotate() returns trigger language plpgsql as $$
        declare org text;
        begin
          for org in select distinct organization_id from inserted loop
            perform phi_access_log_retain(org);
          end loop;
          return null;
        end $$;

      create function phi_access_log_removals_guard() returns trigger language plpgsql as $$
        begin raise exception 'phi_access_log_removals is append-only' using errcode = 'insufficient_privilege'; end $$;
      create trigger phi_access_log_removals_guard before update or delete or truncate on phi_access_log_removals
        for each statement execute function phi_access_log_removals_guard();
    `);
  }

  override down(): void {
    this.addSql(`
      create or replace function phi_access_log_rotate() returns trigger language plpgsql as $$
        declare org text; cutoff text;
        begin
          for org in select distinct organization_id from inserted loop
            select x.id into cutoff from phi_access_log x where x.organization_id = org order by x.id desc offset 10000 limit 1;
            if cutoff is not null then
              delete from phi_access_log where organization_id = org and id <= cutoff;
            end if;
          end loop;
          return null;
        end $$;
      create or replace function phi_access_log_guard() returns trigger language plpgsql as $$
        begin
          if tg_op = 'DELETE' and exists (
            select 1 from phi_access_log n where n.organization_id = old.organization_id and n.id > old.id offset 9999 limit 1
          ) then
            return old;
          end if;
          raise exception 'phi_access_log is append-only' using errcode = 'insufficient_privilege';
        end $$;
      drop function phi_access_log_retain(text);
      drop table phi_access_log_removals;
      drop function phi_access_log_removals_guard();
    `);
  }
}
