import { Migration } from '@mikro-orm/migrations';

/**
 * HIPAA mode: per-organization settings, wrapped data keys, the append-only PHI access log (the
 * database itself refuses updates, truncation and deletes of the newest 10,000 entries of an
 * organization; every insert rotates older ones out), and a `phi` column on messages holding their
 * sealed content in HIPAA mode.
 */
export class Migration20261126020000_hipaa extends Migration {
  override up(): void {
    this.addSql(`
      create table hipaa_settings (
        organization_id text primary key references organizations(id) on delete cascade deferrable initially deferred,
        enabled boolean not null default false,
        baa_status text not null default 'not_signed' check (baa_status in ('signed','not_signed')),
        baa_signed_at timestamptz,
        baa_document_url text,
        retention_days integer not null default 365 check (retention_days between 30 and 3650),
        compliance_officer jsonb,
        phi_metadata_fields jsonb not null default '["*"]',
        enabled_at timestamptz,
        -- per table: the time up to which rows stored before the mode was on have been sealed
        backfilled jsonb not null default '{}',
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index hipaa_settings_enabled_idx on hipaa_settings (organization_id) where enabled;

      create table hipaa_data_keys (
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        version integer not null check (version > 0),
        master_key_id text not null,
        wrapped text not null,
        created_at timestamptz not null,
        rewrapped_at timestamptz,
        primary key (organization_id, version)
      );

      create table phi_access_log (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        actor_type text not null,
        actor_id text not null,
        role text not null,
        reason text check (reason in ('treatment','payment','operations','legal','support')),
        resource_type text not null,
        resource_ids jsonb not null,
        fields jsonb not null,
        operation text not null,
        ip text,
        request_id text,
        created_at timestamptz not null
      );
      create index phi_access_log_org_idx on phi_access_log (organization_id, id);

      create function phi_access_log_guard() returns trigger language plpgsql as $$
        begin
          if tg_op = 'DELETE' and exists (
            select 1 from phi_access_log n where n.organization_id = old.organization_id and n.id > old.id offset 9999 limit 1
          ) then
            return old;
          end if;
          raise exception 'phi_access_log is append-only' using errcode = 'insufficient_privilege';
        end $$;
      create trigger phi_access_log_guard before update or delete on phi_access_log
        for each row execute function phi_access_log_guard();
      create function phi_access_log_no_truncate() returns trigger language plpgsql as $$
        begin raise exception 'phi_access_log is append-only' using errcode = 'insufficient_privilege'; end $$;
      create trigger phi_access_log_no_truncate before truncate on phi_access_log
        for each statement execute function phi_access_log_no_truncate();
      create function phi_access_log_rotate() returns trigger language plpgsql as $$
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
      create trigger phi_access_log_rotate after insert on phi_access_log
        referencing new table as inserted for each statement execute function phi_access_log_rotate();

      alter table messages add column phi text, add column content_purged_at timestamptz;
    `);
  }

  override down(): void {
    this.addSql(`
      alter table messages drop column phi, drop column content_purged_at;
      drop table phi_access_log;
      drop function phi_access_log_guard(); drop function phi_access_log_no_truncate(); drop function phi_access_log_rotate();
      drop table hipaa_data_keys;
      drop table hipaa_settings;
    `);
  }
}
