import { Migration } from '@mikro-orm/migrations';

/** Messaging: messages (both directions), templates, senders; the event outbox; the sandbox providers' send log. */
export class Migration20261122010000_messaging extends Migration {
  override up(): void {
    this.addSql(`
      create table events (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        type text not null,
        resource_type text not null,
        resource_id text not null,
        sequence integer not null,
        data jsonb not null,
        created_at timestamptz not null
      );
      create index events_org_idx on events (organization_id, mode, id);
      create index events_resource_idx on events (resource_id, sequence);

      create table messages (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        channel text not null check (channel in ('sms','whatsapp','email','rcs','viber')),
        direction text not null check (direction in ('outbound','inbound')),
        "to" text not null,
        recipients jsonb not null,
        "from" text not null,
        body text,
        content jsonb not null,
        status text not null check (status in ('queued','sent','delivered','read','failed')),
        status_history jsonb not null,
        encoding text,
        segments integer,
        error_code text,
        error_message text,
        provider text,
        provider_message_id text,
        template_id text,
        variables jsonb,
        fallback jsonb,
        original_message_id text,
        metadata jsonb not null,
        webhook_url text,
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        sent_at timestamptz,
        delivered_at timestamptz,
        read_at timestamptz,
        failed_at timestamptz
      );
      create index messages_org_idx on messages (organization_id, mode, id);
      create index messages_to_idx on messages (organization_id, mode, "to", id);
      create index messages_recipients_idx on messages using gin (recipients jsonb_path_ops);
      create index messages_inbound_idx on messages (organization_id, mode, channel, "from", created_at) where direction = 'inbound';
      create unique index messages_provider_idx on messages (provider, provider_message_id) where provider_message_id is not null;

      create table message_templates (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        channel text not null check (channel in ('sms','whatsapp','email','rcs','viber')),
        name text not null,
        content text not null,
        category text,
        language text not null,
        variables jsonb not null,
        status text not null check (status in ('draft','pending_approval','approved','rejected')),
        rejection_reason text,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        unique (organization_id, mode, channel, name)
      );
      create index message_templates_org_idx on message_templates (organization_id, mode, id);

      create table message_senders (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        channel text not null check (channel in ('sms','whatsapp','email','rcs','viber')),
        address text not null,
        is_default boolean not null,
        created_at timestamptz not null,
        unique (mode, channel, address)
      );
      create index message_senders_org_idx on message_senders (organization_id, mode, channel, id);

      create table sandbox_sends (
        idempotency_key text primary key,
        provider text not null,
        channel text not null,
        provider_message_id text not null unique,
        recipients jsonb not null,
        payload jsonb not null,
        created_at timestamptz not null default now()
      );
    `);
  }

  override down(): void {
    this.addSql('drop table sandbox_sends, message_senders, message_templates, messages, events;');
  }
}
