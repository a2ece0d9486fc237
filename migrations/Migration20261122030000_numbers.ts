import { Migration } from '@mikro-orm/migrations';

/**
 * Numbers: phone numbers held by organizations and port requests. `phone_numbers_holder_idx`
 * makes a number's holder unique across the platform (every organization and mode) among the
 * rows that hold it (`porting`, `active`): concurrent purchases or ports of one number cannot
 * both commit, and releasing (or a rejected port) frees it.
 */
export class Migration20261122030000_numbers extends Migration {
  override up(): void {
    this.addSql(`
      create table port_requests (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        numbers jsonb not null,
        phone_number_ids jsonb not null,
        status text not null check (status in ('pending','submitted','completed','rejected')),
        current_carrier text not null,
        authorization_name text not null,
        account_number text,
        pin_sealed text,
        provider text not null,
        provider_reference text,
        estimated_completion timestamptz not null,
        rejection_code text,
        rejection_reason text,
        submitted_at timestamptz,
        completed_at timestamptz,
        rejected_at timestamptz,
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create index port_requests_org_idx on port_requests (organization_id, mode, id);

      create table phone_numbers (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        number text not null check (number ~ '^\\+[1-9][0-9]{1,14}$'),
        country text not null,
        type text not null check (type in ('local','toll_free','mobile','short_code')),
        region text not null,
        friendly_name text not null,
        capabilities jsonb not null,
        status text not null check (status in ('porting','active','released','port_rejected')),
        sms_webhook_url text,
        voice_webhook_url text,
        agent_id text,
        monthly_cost numeric(10,2) not null,
        currency text not null,
        source text not null check (source in ('purchased','ported')),
        port_request_id text references port_requests(id) on delete set null,
        provider text not null,
        provider_reference text,
        billing_anchor_at timestamptz,
        billing_period_start timestamptz,
        billing_period_end timestamptz,
        billing_cycles integer not null,
        released_at timestamptz,
        billing_ends_at timestamptz,
        sequence integer not null,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );
      create unique index phone_numbers_holder_idx on phone_numbers (number) where status in ('porting','active');
      create index phone_numbers_org_idx on phone_numbers (organization_id, mode, id) where status = 'active';
      create index phone_numbers_renewal_idx on phone_numbers (billing_period_end) where status = 'active';
    `);
  }

  override down(): void {
    this.addSql('drop table phone_numbers, port_requests;');
  }
}
