import { Migration } from '@mikro-orm/migrations';

/**
 * Campaigns (bulk sends with a frozen audience of recipient rows) and 10DLC compliance (brands,
 * 10DLC campaigns and the per-sender throughput an approved registration grants), plus the GCRA
 * pacing state shared by every instance. No foreign key to organizations: campaign_recipients is a
 * hot table (see README notes) and the other tables follow the same rule.
 */
export class Migration20261125040000_campaigns extends Migration {
  override up(): void {
    this.addSql(`
      create table campaigns (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        name text not null,
        channel text not null check (channel in ('sms','whatsapp','email','rcs','viber')),
        segment_id text,
        list_id text,
        template_id text,
        template_variables jsonb not null default '{}',
        body text,
        subject text,
        "from" text,
        scheduled_at timestamptz,
        ab_test jsonb,
        quiet_hours jsonb,
        frequency_cap jsonb,
        status text not null check (status in ('draft','scheduled','sending','paused','completed','cancelled')),
        pause_reason text,
        winner_variant text,
        generation integer not null default 0,
        audience_count integer,
        snapshot_at timestamptz,
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        started_at timestamptz,
        paused_at timestamptz,
        completed_at timestamptz,
        cancelled_at timestamptz,
        check ((segment_id is null) <> (list_id is null))
      );
      create index campaigns_org_idx on campaigns (organization_id, mode, id desc);
      create index campaigns_status_idx on campaigns (organization_id, mode, status, id desc);

      create table campaign_recipients (
        campaign_id text not null,
        seq integer not null,
        organization_id text not null,
        mode text not null,
        contact_id text not null,
        address text,
        variant text,
        status text not null check (status in ('pending','sent','skipped','failed','cancelled')),
        reason text,
        wait_reason text check (wait_reason in ('quiet_hours','ab_test_winner')),
        not_before timestamptz,
        vars jsonb not null,
        message_id text,
        processed_at timestamptz,
        primary key (campaign_id, seq)
      );
      create unique index campaign_recipients_address_idx on campaign_recipients (campaign_id, address) where address is not null;
      create index campaign_recipients_pending_idx on campaign_recipients (campaign_id, seq) where status = 'pending';
      create index campaign_recipients_cap_idx on campaign_recipients (organization_id, mode, address, processed_at) where status = 'sent';

      create table send_pacing (
        key text primary key,
        tat timestamptz not null
      );

      create table compliance_brands (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        company_name text not null,
        ein text not null,
        country text not null,
        entity_type text not null,
        vertical text not null,
        stock_symbol text,
        website text,
        contact_email text not null,
        contact_phone text not null,
        status text not null check (status in ('pending','vetted','failed')),
        tcr_brand_id text,
        vetting_score integer check (vetting_score between 0 and 100),
        failure_reason text,
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        vetted_at timestamptz
      );
      create index compliance_brands_org_idx on compliance_brands (organization_id, mode, id desc);

      create table compliance_campaigns (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        brand_id text not null references compliance_brands(id) on delete cascade,
        use_case text not null,
        description text not null,
        sample_messages jsonb not null,
        message_flow text not null,
        opt_in_type text not null,
        opt_in_keywords jsonb not null,
        opt_out_keywords jsonb not null,
        help_keywords jsonb not null,
        number_ids jsonb not null,
        numbers jsonb not null,
        status text not null check (status in ('pending','approved','rejected','suspended')),
        rejection_reason text,
        suspension_reason text,
        tcr_campaign_id text,
        throughput_mps integer,
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        reviewed_at timestamptz,
        suspended_at timestamptz
      );
      create index compliance_campaigns_org_idx on compliance_campaigns (organization_id, mode, id desc);

      create table sender_registrations (
        organization_id text not null,
        mode text not null,
        address text not null,
        compliance_campaign_id text not null,
        throughput_mps integer not null,
        updated_at timestamptz not null,
        primary key (organization_id, mode, address)
      );
    `);
  }
}
