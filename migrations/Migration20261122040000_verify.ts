import { Migration } from '@mikro-orm/migrations';

/**
 * Verify: one-time verifications (the code only as an HMAC) and per-organization verify settings.
 * Also gives messages a sealed copy of a payload whose stored body and content show secrets masked
 * (verify's codes): the delivery job opens it, the API never shows it.
 */
export class Migration20261122040000_verify extends Migration {
  override up(): void {
    this.addSql(`
      create table verifications (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        channel text not null check (channel in ('sms','whatsapp','email')),
        "to" text not null,
        status text not null check (status in ('pending','approved','rejected','expired','maxed')),
        code_hash text check (code_hash is null or code_hash ~ '^[0-9a-f]{64}$'),
        code_length integer not null check (code_length between 4 and 10),
        locale text not null,
        max_attempts integer not null check (max_attempts between 1 and 10),
        attempts integer not null check (attempts >= 0),
        expires_at timestamptz not null,
        message_id text,
        expiry_reason text check (expiry_reason in ('timeout','superseded')),
        superseded_by text,
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        approved_at timestamptz,
        expired_at timestamptz,
        maxed_at timestamptz
      );
      create index verifications_org_idx on verifications (organization_id, mode, id);
      create index verifications_to_idx on verifications (organization_id, mode, "to", created_at);
      create index verifications_created_idx on verifications (organization_id, mode, created_at);
      create index verifications_due_idx on verifications (expires_at) where status in ('pending','rejected');

      create table verify_settings (
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        code_ttl_seconds integer check (code_ttl_seconds between 60 and 86400),
        code_length integer check (code_length between 4 and 10),
        max_attempts integer check (max_attempts between 1 and 10),
        app_name text,
        updated_at timestamptz not null,
        primary key (organization_id, mode)
      );

      alter table messages add column sealed_content text;
    `);
  }

  override down(): void {
    this.addSql('alter table messages drop column sealed_content; drop table verify_settings, verifications;');
  }
}
