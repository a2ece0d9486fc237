import { Migration } from '@mikro-orm/migrations';

/**
 * Voice: calls (hot: no organization foreign key, like the other hot tables), SIP trunks, IVR
 * flows, conferences and their participants, voicemail boxes and messages.
 */
export class Migration20261125010000_voice extends Migration {
  override up(): void {
    this.addSql(`
      create table calls (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        direction text not null check (direction in ('outbound','inbound')),
        "to" text not null,
        "from" text not null,
        agent_id text,
        ivr_id text,
        conference_id text,
        status text not null check (status in ('initiating','ringing','in_progress','completed','failed','busy','no_answer','cancelled')),
        record boolean not null,
        max_duration integer not null check (max_duration > 0),
        webhook_url text,
        metadata jsonb not null default '{}',
        duration_seconds integer check (duration_seconds >= 0),
        recording_seconds integer check (recording_seconds >= 0),
        gateway text not null,
        gateway_reference text,
        gateway_seq integer not null default 0,
        error_code text,
        sip_code integer,
        end_reason text,
        ivr_state jsonb,
        steps jsonb not null default '[]',
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        ringing_at timestamptz,
        answered_at timestamptz,
        ended_at timestamptz
      );
      create index calls_org_idx on calls (organization_id, mode, id desc);
      create index calls_status_idx on calls (organization_id, mode, status, id desc);
      create index calls_from_idx on calls (organization_id, mode, "from", id desc);
      create index calls_to_idx on calls (organization_id, mode, "to", id desc);

      create table sip_trunks (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        name text not null,
        termination_uri text not null,
        origination_uris jsonb not null default '[]',
        auth_username text,
        auth_password_sealed text,
        codecs jsonb not null,
        encryption text not null check (encryption in ('tls_srtp','tls','none')),
        status text not null,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index sip_trunks_org_idx on sip_trunks (organization_id, mode, id desc);

      create table ivr_flows (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        name text not null,
        greeting text not null,
        language text not null,
        menu jsonb not null,
        timeout_seconds integer not null check (timeout_seconds > 0),
        max_retries integer not null check (max_retries >= 0),
        fallback_action text not null check (fallback_action in ('voicemail','transfer_number','hangup')),
        fallback_target text,
        status text not null,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index ivr_flows_org_idx on ivr_flows (organization_id, mode, id desc);

      create table conferences (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        name text not null,
        status text not null check (status in ('waiting','in_progress','ended')),
        pin text not null,
        dial_in_number text not null,
        max_participants integer not null check (max_participants > 0),
        record boolean not null,
        mute_on_join boolean not null,
        webhook_url text,
        participants_count integer not null default 0,
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        started_at timestamptz,
        ended_at timestamptz
      );
      create index conferences_org_idx on conferences (organization_id, mode, id desc);

      create table conference_participants (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        conference_id text not null references conferences(id) on delete cascade,
        number text not null,
        muted boolean not null,
        call_id text not null unique,
        status text not null check (status in ('dialing','joined','left')),
        created_at timestamptz not null,
        joined_at timestamptz,
        left_at timestamptz
      );
      create index conference_participants_idx on conference_participants (organization_id, mode, conference_id, id desc);

      create table voicemail_boxes (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        name text not null,
        greeting text,
        transcribe boolean not null,
        max_duration integer not null check (max_duration > 0),
        notification_email text,
        webhook_url text,
        messages_count integer not null default 0,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index voicemail_boxes_org_idx on voicemail_boxes (organization_id, mode, id desc);

      create table voicemail_messages (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        voicemail_id text not null references voicemail_boxes(id) on delete cascade,
        call_id text,
        caller text not null,
        duration_seconds integer not null check (duration_seconds >= 0),
        transcription text,
        listened boolean not null default false,
        created_at timestamptz not null,
        listened_at timestamptz
      );
      create index voicemail_messages_idx on voicemail_messages (organization_id, mode, voicemail_id, id desc);
    `);
  }

  override down(): void {
    this.addSql('drop table voicemail_messages, voicemail_boxes, conference_participants, conferences, ivr_flows, sip_trunks, calls;');
  }
}
