/**
 * Paid credit: top-ups (the default payment method charged, the amount credited once per provider
 * payment) and auto-reload (setAutoReload, the sweeper and the reload job; see credits.service.ts
 * for how a debit marks an account). CreditsService delegates to this class; its API is unchanged.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import { tenantEm, type Mode, type TenantRef } from '../../platform/db/tenant.ts';
import { systemScope, type Scope } from '../../platform/auth/scope.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import { emitEvent } from '../../platform/events/events.ts';
import type { PaymentsProvider } from '../../providers/payments/types.ts';
import type { BillingAccount } from './billing.entities.ts';
import type { AutoReloadInput } from './billing.schemas.ts';

export const AUTO_RELOAD_JOB = 'billing.auto-reload';
export const AUTO_RELOAD_SWEEP_JOB = 'billing.auto-reload-sweep';
/** A reload mark neither charged nor picked up by its job for this long is enqueued again by the sweeper. */
export const RELOAD_STALE_MS = 10 * 60_000;
/** Accounts marked per sweep (the rest wait for the next minute). */
const SWEEP_LIMIT = 500;

export type TopUpResult = { balance: number; toppedUp: number; currency: string; paymentId: string };

/** Where the payments provider of a mode comes from (undefined: none configured for that mode). */
export type PaymentsFor = (mode: TenantRef['mode']) => PaymentsProvider | undefined;

/** The statement runner of `em`'s transaction (or of the ORM's pool outside one). */
function txDb(orm: MikroORM, em: EntityManager): Transaction<unknown> | ReturnType<typeof sqlClient> {
  return (em.getTransactionContext() as Transaction<unknown> | undefined) ?? sqlClient(orm);
}

/** Paid operations refuse a cancelled or paused subscription (past_due keeps working while the provider retries). */
export function assertActive(a: Pick<BillingAccount, 'status'>): void {
  if (a.status === 'cancelled' || a.status === 'paused') {
    throw new ServiceError('SUBSCRIPTION_INACTIVE', `The subscription is ${a.status}; start a new one with POST /v1/billing/checkout`, { status: a.status });
  }
}

/** Reads (creating on first use) an organization's billing account: the credits service does (`implements`, so codegen's error analysis follows it). */
export interface AccountReader { account(tenant: TenantRef, em?: EntityManager): Promise<BillingAccount> }

export class CreditTopUps {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #payments: PaymentsFor;
  /** The ledger's accounts (a method the error catalogue script can follow, not a callback). */
  readonly #accounts: AccountReader;

  constructor(deps: { orm: MikroORM; clock: Clock; jobs: Pick<Jobs, 'enqueue'>; payments: PaymentsFor; accounts: AccountReader }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#jobs = deps.jobs;
    this.#payments = deps.payments;
    this.#accounts = deps.accounts;
  }

  /**
   * Credits a provider payment once (unique payment id); a reload (`clearReloadToken`) also once
   * per mark (ledger key `reload:<mark>`), whatever payment ids the provider answered, and clears the mark.
   */
  async #credit(tenant: TenantRef, amount: number, paymentId: string, description: string, clearReloadToken: string | null, em: EntityManager): Promise<number> {
    const now = this.#clock.now();
    const db = txDb(this.#orm, em);
    const rows = await sqlQuery<{ balance: string }>(db, `
      with e as (
        insert into credit_ledger_entries (id, organization_id, mode, kind, amount, payment_id, idempotency_key, description, created_at)
        values ($4, $1, $2, 'topup', $3, $5, case when $8::text is null then null else 'reload:' || $8 end, $6, $7)
        on conflict do nothing returning amount
      )
      update billing_accounts a set balance = a.balance + e.amount, last_topped_up_at = $7, updated_at = $7, sequence = a.sequence + 1,
        auto_reload_token = case when a.auto_reload_token = $8 then null else a.auto_reload_token end
      from e where a.organization_id = $1 and a.mode = $2 returning a.balance::text as balance`,
    [tenant.organizationId, tenant.mode, amount, newId('cle', now.getTime()), paymentId, description, now, clearReloadToken]);
    if (rows[0]) return Number(rows[0].balance);
    // Credited before (this payment, or this reload mark): the mark is done all the same.
    const [acct] = await sqlQuery<{ balance: string }>(db, `update billing_accounts set auto_reload_token = case when auto_reload_token = $3 then null else auto_reload_token end
      where organization_id = $1 and mode = $2 returning balance::text`, [tenant.organizationId, tenant.mode, clearReloadToken]);
    return Number(acct?.balance ?? 0);
  }

  #provider(tenant: TenantRef): PaymentsProvider {
    const provider = this.#payments(tenant.mode);
    if (!provider) throw new ServiceError('SERVICE_UNAVAILABLE', `No payments provider is configured in ${tenant.mode} mode`, { service: 'payments', mode: tenant.mode });
    return provider;
  }

  /** Charges the default payment method and adds the amount: PAYMENT_REQUIRED without one or on a decline. */
  async topUp(scope: Scope, amount: number): Promise<TopUpResult> {
    const a = await this.#accounts.account(scope);
    assertActive(a);
    if (!a.paymentMethodId || !a.customerId) {
      throw new ServiceError('PAYMENT_REQUIRED', 'No payment method on file; complete a checkout (POST /v1/billing/checkout) first', { field: 'payment_method' });
    }
    const provider = this.#provider(scope);
    const key = newId('cle', this.#clock.now().getTime());
    const charge = await provider.charge({ customerId: a.customerId, paymentMethodId: a.paymentMethodId, amount, currency: a.currency, description: 'Credit top-up', idempotencyKey: `topup:${key}` });
    if (charge.status === 'declined') {
      throw new ServiceError('PAYMENT_REQUIRED', `The payment method was declined (${charge.declineCode}); update it with a new checkout`, { decline_code: charge.declineCode, payment_id: charge.paymentId });
    }
    const balance = await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const b = await this.#credit(scope, amount, charge.paymentId, 'Credit top-up', null, tx);
      emitEvent(tx, scope, { type: 'billing.credits_topped_up', resourceType: 'credits', resourceId: scope.organizationId, sequence: a.sequence + 1, data: { amount, balance: b, currency: a.currency, payment_id: charge.paymentId, auto_reload: false } }, this.#clock.now());
      return b;
    });
    return { balance, toppedUp: amount, currency: a.currency, paymentId: charge.paymentId };
  }

  async setAutoReload(scope: Scope, input: AutoReloadInput): Promise<BillingAccount> {
    const a = await this.#accounts.account(scope);
    if (input.enabled) {
      assertActive(a);
      if (!a.paymentMethodId) throw new ServiceError('PAYMENT_REQUIRED', 'Auto-reload charges the default payment method; complete a checkout first', { field: 'payment_method' });
    }
    const threshold = input.threshold ?? a.autoReloadThreshold;
    const amount = input.amount ?? a.autoReloadAmount;
    if (input.enabled && amount < 1) throw new ServiceError('VALIDATION_ERROR', 'amount: must be a positive integer (minor units) when auto-reload is enabled', { field: 'amount' });
    await sqlQuery(sqlClient(this.#orm), `update billing_accounts set auto_reload_enabled = $3, auto_reload_threshold = $4, auto_reload_amount = $5,
      auto_reload_token = case when $3 then auto_reload_token else null end, updated_at = $6, sequence = sequence + 1 where organization_id = $1 and mode = $2`,
    [scope.organizationId, scope.mode, input.enabled, threshold, amount, this.#clock.now()]);
    // Already below the threshold: no debit will cross it, so the reload starts now.
    if (input.enabled) await this.sweepAutoReload(scope);
    return this.#accounts.account(scope);
  }

  /**
   * The auto-reload sweeper (`billing.auto-reload-sweep`, every minute; also for one tenant when
   * auto-reload is enabled). Marks, and enqueues the reload job of, every account with auto-reload
   * on whose balance is below its threshold and which has no mark (enabled while already below it,
   * or a refused send that no debit followed), and enqueues again the job of a mark left for
   * {@link RELOAD_STALE_MS} (a job lost or out of retries). Compare-and-set on the locked account
   * rows, in the transaction of the enqueues: several instances sweeping at once mark each account
   * once; the job charges once per mark (provider idempotency key) and credits once per mark.
   * Returns how many reload jobs it enqueued.
   */
  async sweepAutoReload(tenant?: TenantRef): Promise<number> {
    const now = this.#clock.now();
    return this.#orm.em.fork().transactional(async (tx) => {
      const rows = await sqlQuery<{ organization_id: string; mode: Mode; token: string; plan: Plan }>(txDb(this.#orm, tx), `
        with due as (
          select a.organization_id, a.mode from billing_accounts a
          where a.auto_reload_enabled and a.payment_method_id is not null and a.status not in ('cancelled', 'paused')
            and ((a.auto_reload_token is null and a.balance < a.auto_reload_threshold)
              or (a.auto_reload_token is not null and (a.auto_reload_token_at is null or a.auto_reload_token_at < $2)))
            and ($3::text is null or (a.organization_id = $3 and a.mode = $4))
          order by a.organization_id, a.mode limit ${SWEEP_LIMIT} for update skip locked
        )
        update billing_accounts a set auto_reload_token_at = $1,
          auto_reload_token = coalesce(a.auto_reload_token, 'sw_' || substr(md5(random()::text || clock_timestamp()::text || a.organization_id || a.mode), 1, 16))
        from due, organizations o where a.organization_id = due.organization_id and a.mode = due.mode and o.id = a.organization_id
        returning a.organization_id, a.mode, a.auto_reload_token as token, o.plan`,
      [now, new Date(now.getTime() - RELOAD_STALE_MS), tenant?.organizationId ?? null, tenant?.mode ?? null]);
      for (const r of rows) {
        const scope = systemScope(r.organization_id, r.mode, r.plan, `req_reload_${r.token}`);
        await this.#jobs.enqueue(AUTO_RELOAD_JOB, { token: r.token }, { scope, em: tx, singletonKey: `${r.organization_id}:${r.mode}:${r.token}` });
      }
      return rows.length;
    });
  }

  /**
   * After a group commit's debit (`credits_debit_pooled`, which cannot enqueue): the reload of each
   * of these accounts that the debit marked and no job picked up yet (`auto_reload_token_at` null).
   * One read of the accounts; a marked one goes through {@link sweepAutoReload}'s compare-and-set,
   * so concurrent commits (and the sweeper) enqueue each mark once.
   */
  async enqueueDebitMarks(tenants: readonly TenantRef[]): Promise<void> {
    if (tenants.length === 0) return;
    const seen = new Map(tenants.map((t) => [`${t.organizationId}\u0000${t.mode}`, t]));
    const marked = await sqlQuery<{ organization_id: string; mode: Mode }>(sqlClient(this.#orm), `
      select a.organization_id, a.mode from billing_accounts a, unnest($1::text[], $2::text[]) as t(o, m)
       where a.organization_id = t.o and a.mode = t.m and a.auto_reload_token is not null and a.auto_reload_token_at is null`,
    [[...seen.values()].map((t) => t.organizationId), [...seen.values()].map((t) => t.mode)]);
    for (const r of marked) await this.sweepAutoReload({ organizationId: r.organization_id, mode: r.mode });
  }

  /** The reload job: one charge per token (the provider idempotency key); a decline disables auto-reload. */
  async runAutoReload(scope: Scope, token: string): Promise<void> {
    // Picks the mark up (the sweeper leaves a mark picked up within RELOAD_STALE_MS to this job).
    const [picked] = await sqlQuery<{ ok: boolean }>(sqlClient(this.#orm), `update billing_accounts set auto_reload_token_at = $4
      where organization_id = $1 and mode = $2 and auto_reload_token = $3 returning true as ok`, [scope.organizationId, scope.mode, token, this.#clock.now()]);
    if (!picked) return;
    const a = await this.#accounts.account(scope);
    if (a.autoReloadToken !== token) return;
    // Not needed any more (enabled, then topped up by hand before the job ran), or not possible.
    if (!a.autoReloadEnabled || !a.paymentMethodId || !a.customerId || a.balance >= a.autoReloadThreshold) {
      await this.#clearToken(scope, token);
      return;
    }
    const charge = await this.#provider(scope).charge({
      customerId: a.customerId, paymentMethodId: a.paymentMethodId, amount: a.autoReloadAmount, currency: a.currency,
      description: 'Credit auto-reload', idempotencyKey: `reload:${scope.organizationId}:${scope.mode}:${token}`,
    });
    const now = this.#clock.now();
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      if (charge.status === 'succeeded') {
        const balance = await this.#credit(scope, a.autoReloadAmount, charge.paymentId, 'Credit auto-reload', token, tx);
        emitEvent(tx, scope, { type: 'billing.credits_topped_up', resourceType: 'credits', resourceId: scope.organizationId, sequence: a.sequence + 1, data: { amount: a.autoReloadAmount, balance, currency: a.currency, payment_id: charge.paymentId, auto_reload: true } }, now);
        return;
      }
      await sqlQuery(txDb(this.#orm, tx), `update billing_accounts set auto_reload_enabled = false, auto_reload_token = null, updated_at = $3, sequence = sequence + 1
        where organization_id = $1 and mode = $2`, [scope.organizationId, scope.mode, now]);
      emitEvent(tx, scope, { type: 'billing.auto_reload_failed', resourceType: 'credits', resourceId: scope.organizationId, sequence: a.sequence + 1, data: { amount: a.autoReloadAmount, decline_code: charge.declineCode, message: charge.message, payment_id: charge.paymentId, auto_reload_enabled: false } }, now);
    });
  }

  async #clearToken(tenant: TenantRef, token: string): Promise<void> {
    await sqlQuery(sqlClient(this.#orm), 'update billing_accounts set auto_reload_token = null where organization_id = $1 and mode = $2 and auto_reload_token = $3', [tenant.organizationId, tenant.mode, token]);
  }
}
