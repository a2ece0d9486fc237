import { Migration } from '@mikro-orm/migrations';

/**
 * Contacts, second step (issue 5):
 *
 * 1. The activity timeline reads the `events` outbox. `event_counterpart(data)` is the address on
 *    the other side of a communication event: `data.to` when `data.direction` is outbound,
 *    `data.from` when inbound, null for events without a direction (contact, template, number…
 *    events). A partial expression index on (organization, mode, counterpart, id) answers "newest
 *    events with this address" as a backward index scan, for any context whose event data carries
 *    `direction`, `from` and `to` (messages today, calls later) without another migration.
 * 2. `contact_consent_changes`: the append-only consent history (one row per channel change),
 *    removed with its contact (cascade).
 * 3. `search_vector` is rebuilt with weights (names A; email, its local part, domain and words,
 *    and the phone B; metadata string and number values C) for ts_rank ordering.
 */
export class Migration20261123020000_contacts_activity_consent_search extends Migration {
  override up(): void {
    this.addSql(`
      create function event_counterpart(data jsonb) returns text language sql immutable parallel safe as $$
        select case data->>'direction' when 'outbound' then data->>'to' when 'inbound' then data->>'from' end
      $$;
      create index events_counterpart_idx on events (organization_id, mode, event_counterpart(data), id) where event_counterpart(data) is not null;

      create table contact_consent_changes (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        contact_id text not null references contacts(id) on delete cascade deferrable initially deferred,
        channel text not null check (channel in ('sms','whatsapp','email','rcs','viber','voice')),
        status text not null check (status in ('opted_in','opted_out','unknown')),
        previous_status text not null check (previous_status in ('opted_in','opted_out','unknown')),
        source text not null check (source in ('api','keyword','import','campaign_link')),
        actor_type text check (actor_type in ('api_key','user','system')),
        actor_id text,
        request_id text,
        details jsonb not null default '{}',
        created_at timestamptz not null
      );
      create index contact_consent_changes_contact_idx on contact_consent_changes (contact_id, id);

      alter table contacts drop column search_vector;
      alter table contacts add column search_vector tsvector generated always as (
        setweight(to_tsvector('simple', coalesce(first_name, '') || ' ' || coalesce(last_name, '')), 'A')
        || setweight(to_tsvector('simple',
             coalesce(email, '') || ' ' || coalesce(replace(email, '@', ' '), '') || ' ' || coalesce(translate(email, '@.', '  '), '') || ' ' ||
             coalesce(phone, '') || ' ' || coalesce(ltrim(phone, '+'), '')), 'B')
        || setweight(jsonb_to_tsvector('simple', metadata, '["string", "numeric"]'), 'C')
      ) stored;
      create index contacts_search_vector_idx on contacts using gin (search_vector);
    `);
  }

  override down(): void {
    this.addSql(`
      alter table contacts drop column search_vector;
      alter table contacts add column search_vector tsvector generated always as (
        to_tsvector('simple', coalesce(first_name, '') || ' ' || coalesce(last_name, '') || ' ' || coalesce(email, '') || ' ' || coalesce(phone, '') || ' ' || coalesce(ltrim(phone, '+'), ''))
      ) stored;
      create index contacts_search_vector_idx on contacts using gin (search_vector);
      drop table contact_consent_changes;
      drop index events_counterpart_idx;
      drop function event_counterpart(jsonb);
    `);
  }
}
