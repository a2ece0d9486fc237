import { Migration } from '@mikro-orm/migrations';

/**
 * Billing: one account row per organization and mode (subscription, payment method, the credit
 * balance and auto-reload), the append-only credit ledger (integer minor units; the balance column
 * is the sum of the ledger and can never go negative), checkout sessions, provider webhook events
 * processed exactly once, and invoices with their immutable PDF.
 */
export class Migration20261125050000_billing extends Migration {
  override up(): void {
    this.addSql(`
      create table billing_accounts (
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        plan_id text not null,
        status text not null check (status in ('trialing','active','past_due','paused','cancelled')),
        current_period_start timestamptz not null,
        current_period_end timestamptz not null check (current_period_end > current_period_start),
        cancel_at_period_end boolean not null default false,
        provider text,
        customer_id text,
        subscription_id text,
        payment_method_id text,
        payment_method_brand text,
        payment_method_last4 text,
        subscription_event_at timestamptz,
        currency text not null default 'usd',
        balance bigint not null default 0 check (balance >= 0),
        auto_reload_enabled boolean not null default false,
        auto_reload_threshold bigint not null default 0 check (auto_reload_threshold >= 0),
        auto_reload_amount bigint not null default 0 check (auto_reload_amount >= 0),
        auto_reload_token text,
        last_topped_up_at timestamptz,
        invoice_seq integer not null default 0,
        sequence integer not null default 1,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        primary key (organization_id, mode)
      );
      create index billing_accounts_period_idx on billing_accounts (current_period_end);
      create unique index billing_accounts_subscription_idx on billing_accounts (subscription_id) where subscription_id is not null;

      create table credit_ledger_entries (
        id text primary key,
        organization_id text not null,
        mode text not null check (mode in ('live','test')),
        kind text not null check (kind in ('topup','reservation','capture','release','refund','adjustment')),
        amount bigint not null,
        reference_id text,
        idempotency_key text,
        payment_id text,
        description text,
        created_at timestamptz not null,
        check ((kind in ('topup','release','refund') and amount >= 0) or (kind = 'reservation' and amount <= 0)
          or (kind = 'capture' and amount = 0) or kind = 'adjustment')
      );
      create index credit_ledger_org_idx on credit_ledger_entries (organization_id, mode, id);
      create unique index credit_ledger_key_idx on credit_ledger_entries (organization_id, mode, idempotency_key) where idempotency_key is not null;
      create unique index credit_ledger_settlement_idx on credit_ledger_entries (reference_id) where kind in ('capture','release');
      create unique index credit_ledger_payment_idx on credit_ledger_entries (payment_id) where payment_id is not null;
      create function credit_ledger_append_only() returns trigger language plpgsql as $$
        begin raise exception 'credit_ledger_entries is append-only'; end $$;
      create trigger credit_ledger_append_only before update or delete on credit_ledger_entries
        for each row execute function credit_ledger_append_only();

      create table checkout_sessions (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        provider text not null,
        plan_id text not null,
        price_id text not null,
        url text not null,
        success_url text not null,
        cancel_url text not null,
        status text not null check (status in ('open','complete','expired','cancelled')),
        expires_at timestamptz not null,
        completed_at timestamptz,
        created_at timestamptz not null
      );
      create index checkout_sessions_org_idx on checkout_sessions (organization_id, mode, id);

      create table billing_provider_events (
        provider text not null,
        event_id text not null,
        type text not null,
        organization_id text,
        mode text,
        received_at timestamptz not null,
        primary key (provider, event_id)
      );

      create table invoices (
        id text primary key,
        organization_id text not null references organizations(id) on delete cascade deferrable initially deferred,
        mode text not null check (mode in ('live','test')),
        number text not null,
        amount bigint not null check (amount >= 0),
        currency text not null,
        status text not null check (status in ('paid','open','void')),
        period_start timestamptz not null,
        period_end timestamptz not null,
        lines jsonb not null,
        pdf bytea not null,
        pdf_sha256 text not null,
        created_at timestamptz not null,
        unique (organization_id, mode, period_start),
        unique (organization_id, mode, number)
      );
      create index invoices_org_idx on invoices (organization_id, mode, id);
      create function invoices_immutable() returns trigger language plpgsql as $$
        begin
          if tg_op = 'DELETE' or new.pdf is distinct from old.pdf or new.number is distinct from old.number
            or new.amount is distinct from old.amount or new.lines is distinct from old.lines then
            raise exception 'invoices are immutable';
          end if;
          return new;
        end $$;
      create trigger invoices_immutable before update or delete on invoices
        for each row execute function invoices_immutable();
    `);
  }

  override down(): void {
    this.addSql(`drop table invoices, billing_provider_events, checkout_sessions, credit_ledger_entries, billing_accounts;
      drop function invoices_immutable(); drop function credit_ledger_append_only();`);
  }
}
