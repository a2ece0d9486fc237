import { Migration } from '@mikro-orm/migrations';

/**
 * Contacts: contacts with per-channel consent, lists and their members, segments (rules compiled
 * to SQL), and CSV imports. Search runs on two generated columns: `search_vector` (full-text,
 * `simple` configuration, GIN) for words and prefixes, `search_text` (lower-cased name, phone and
 * email, GIN trigram) for fragments and typos. Phone and email are each unique per organization
 * and mode. Deleting a contact removes its memberships (cascade); deleting a list keeps the contacts.
 */
export class Migration20261122050000_contacts extends Migration {
  override up(): void {
    this.addSql(`
      create extension if not exists pg_trgm;

      create table contacts (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        phone text check (phone ~ '^\\+[1-9][0-9]{1,14}$'),
        email text check (email = lower(email)),
        first_name text,
        last_name text,
        country text check (country ~ '^[A-Z]{2}$'),
        lifecycle_stage text,
        tags jsonb not null default '[]',
        metadata jsonb not null default '{}',
        consent jsonb not null default '{}',
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        search_vector tsvector generated always as (
          to_tsvector('simple', coalesce(first_name, '') || ' ' || coalesce(last_name, '') || ' ' || coalesce(email, '') || ' ' || coalesce(phone, '') || ' ' || coalesce(ltrim(phone, '+'), ''))
        ) stored,
        search_text text generated always as (
          lower(coalesce(first_name, '') || ' ' || coalesce(last_name, '') || ' ' || coalesce(email, '') || ' ' || coalesce(phone, ''))
        ) stored
      );
      create index contacts_org_idx on contacts (organization_id, mode, id);
      create unique index contacts_phone_idx on contacts (organization_id, mode, phone) where phone is not null;
      create unique index contacts_email_idx on contacts (organization_id, mode, email) where email is not null;
      create index contacts_stage_idx on contacts (organization_id, mode, lifecycle_stage, id);
      create index contacts_country_idx on contacts (organization_id, mode, country, id);
      create index contacts_tags_idx on contacts using gin (tags jsonb_path_ops);
      create index contacts_consent_idx on contacts using gin (consent jsonb_path_ops);
      create index contacts_search_vector_idx on contacts using gin (search_vector);
      create index contacts_search_text_idx on contacts using gin (search_text gin_trgm_ops);

      create table contact_lists (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        name text not null,
        description text,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index contact_lists_org_idx on contact_lists (organization_id, mode, id);

      create table contact_list_members (
        list_id text not null references contact_lists(id) on delete cascade,
        contact_id text not null references contacts(id) on delete cascade,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        added_at timestamptz not null,
        primary key (list_id, contact_id)
      );
      create index contact_list_members_contact_idx on contact_list_members (contact_id);
      create index contact_list_members_page_idx on contact_list_members (list_id, contact_id desc);

      create table segments (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        name text not null,
        description text,
        rules jsonb not null,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index segments_org_idx on segments (organization_id, mode, id);

      create table contact_imports (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        status text not null check (status in ('queued','processing','completed','failed')),
        csv text not null,
        list_id text,
        total_rows integer not null,
        processed_rows integer not null,
        created_count integer not null,
        updated_count integer not null,
        rejected_count integer not null,
        rejections jsonb not null,
        error text,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        completed_at timestamptz
      );
      create index contact_imports_org_idx on contact_imports (organization_id, mode, id);

      -- The activity timeline reads messages from a contact's address.
      create index if not exists messages_from_idx on messages (organization_id, mode, "from", id);
    `);
  }

  override down(): void {
    this.addSql('drop index if exists messages_from_idx; drop table contact_imports, segments, contact_list_members, contact_lists, contacts;');
  }
}
