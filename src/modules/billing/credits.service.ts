/**
 * The credit ledger. Every change of a balance is one SQL statement that moves the balance column
 * of the locked `billing_accounts` row and appends the ledger entry, so the balance is always the
 * sum of the entries; `check (balance >= 0)` plus `where balance >= amount` make overdrawing
 * impossible under any concurrency (PostgreSQL re-checks the condition on the row version it waits
 * for). Reservations are settled once (a unique index on the settled reservation), top-ups once
 * per provider payment (a unique index on the payment id). Auto-reload: the debit that takes the
 * balance below the threshold sets `auto_reload_token` (only when none is set) and enqueues the one
 * reload job; that job charges once (the token is the provider idempotency key), credits once per
 * token and clears it (credits.topups.ts, with top-ups). A sweeper every minute marks accounts already below the threshold that no
 * debit marked, and re-enqueues marks whose job was lost. Reservations left open by a process that
 * died are settled by the stale-reservation sweep (reservations.sweep.ts) through capture/release.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import { randomBytes } from 'node:crypto';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { sqlClient, sqlQuery, type PgQueryable } from '../../platform/db/sql.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import { BillingAccount } from './billing.entities.ts';
import type { AutoReloadInput } from './billing.schemas.ts';
import type { PeriodQuota, ReservationState, ReserveInput, SendReservations } from './billing.ports.ts';
import { returnPool, sendReservations, takePoolAt } from './credits.pool.ts';
import { AUTO_RELOAD_JOB, CreditTopUps, type AccountReader, type PaymentsFor, type TopUpResult } from './credits.topups.ts';

export { AUTO_RELOAD_JOB, AUTO_RELOAD_SWEEP_JOB, RELOAD_STALE_MS, assertActive, type PaymentsFor, type TopUpResult } from './credits.topups.ts';

type Db = ReturnType<typeof sqlClient> | Transaction<unknown> | PgQueryable;
/** Where a ledger change runs: the caller's ORM transaction, a pg client inside the caller's own transaction, or on its own. */
export type LedgerDb = EntityManager | PgQueryable;
const isEm = (db: LedgerDb | Db | undefined): db is EntityManager => db !== undefined && 'getTransactionContext' in db;

/** `earlier`: the key was reserved before (this is that reservation) and what became of it. */
export type Reservation = { reservationId: string; amount: number; balance: number; earlier?: 'open' | 'captured' | 'released' };


export class CreditsService implements AccountReader {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #payments: PaymentsFor;
  readonly #topUps: CreditTopUps;
  /** BILLING_STALE_RESERVATION_SECONDS: a reservation open this long is the stale-reservation sweep's. */
  readonly staleReservationMs: number;

  constructor(deps: { orm: MikroORM; clock: Clock; jobs: Pick<Jobs, 'enqueue'>; payments: PaymentsFor; staleReservationMs: number }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#jobs = deps.jobs;
    this.#payments = deps.payments;
    this.#topUps = new CreditTopUps({ ...deps, accounts: this });
    this.staleReservationMs = deps.staleReservationMs;
  }

  #db(em?: LedgerDb | Db): Db {
    if (!em) return sqlClient(this.#orm);
    if (isEm(em)) return (em.getTransactionContext() as Transaction<unknown> | undefined) ?? sqlClient(this.#orm);
    return em;
  }

  /**
   * The account row of a tenant, created on first use: a trial on the organization's plan of the
   * mode whose
   * billing periods run from the organization's creation (a month each, as the period job moves
   * them: `addMonth` of the end), so the period of the first billing call is the one that holds
   * the organization's first usage, not one starting at that call.
   */
  async account(tenant: TenantRef, em?: EntityManager): Promise<BillingAccount> {
    const now = this.#clock.now();
    await sqlQuery(this.#db(em), `
      with recursive periods (s, e) as (
        select p.s, ((p.s at time zone 'UTC') + interval '1 month') at time zone 'UTC'
          from (select least(o.created_at, $3::timestamptz) as s from organizations o where o.id = $1) p
        union all
        select e, ((e at time zone 'UTC') + interval '1 month') at time zone 'UTC' from periods where e <= $3::timestamptz
      )
      insert into billing_accounts (organization_id, mode, plan_id, status, current_period_start, current_period_end, currency, created_at, updated_at)
      select o.id, $2, case when $2 = 'test' then o.test_plan else o.plan end, 'trialing', p.s, p.e, 'usd', $3, $3
        from organizations o, (select s, e from periods where e > $3::timestamptz order by s limit 1) p
       where o.id = $1
      on conflict do nothing`, [tenant.organizationId, tenant.mode, now]);
    const a = await (em ?? tenantEm(this.#orm, tenant)).findOne(BillingAccount, { organizationId: tenant.organizationId, mode: tenant.mode }, { refresh: true });
    if (!a) throw new ServiceError('TENANT_NOT_FOUND', 'No organization for this credential');
    return a;
  }

  /**
   * Reserves `amount` (minor units) from the balance: INSUFFICIENT_CREDITS when it does not cover
   * it (nothing is written), SUBSCRIPTION_INACTIVE when the subscription is cancelled or paused.
   * Pass `em` inside a transaction to commit the reservation with the caller's change. The same
   * `key` reserves once (the first reservation is returned again; see `renewAged` for a retry).
   */
  async reserve(scope: Scope, input: ReserveInput, em?: LedgerDb): Promise<Reservation> {
    if (!Number.isSafeInteger(input.amount) || input.amount < 0) throw new Error(`reservation amount must be a non-negative integer, got ${input.amount}`);
    const db = this.#db(em);
    const id = newId('cle', this.#clock.now().getTime());
    const token = randomBytes(9).toString('base64url');
    const rows = await sqlQuery<{ balance: string; reload: boolean }>(db, `
      with acct as (
        update billing_accounts set balance = balance - $3, updated_at = $5,
          auto_reload_token = case when auto_reload_token is null and auto_reload_enabled and balance - $3 < auto_reload_threshold then $9 else auto_reload_token end,
          auto_reload_token_at = case when auto_reload_token is null and auto_reload_enabled and balance - $3 < auto_reload_threshold then $5 else auto_reload_token_at end
        where organization_id = $1 and mode = $2 and balance >= $3 and status not in ('cancelled', 'paused')
          and not exists (select 1 from credit_ledger_entries k where k.organization_id = $1 and k.mode = $2 and k.idempotency_key = $7)
        returning balance, auto_reload_token = $9 as reload
      ), entry as (
        insert into credit_ledger_entries (id, organization_id, mode, kind, amount, reference_id, idempotency_key, description, created_at)
        select $4, $1, $2, 'reservation', -$3::bigint, $6, $7, $8, $5 from acct
      )
      select balance::text as balance, reload from acct`,
    [scope.organizationId, scope.mode, input.amount, id, this.#clock.now(), input.referenceId ?? null, input.key, input.description ?? null, token]);
    const row = rows[0];
    if (row) {
      if (row.reload) await this.#enqueueReload(scope, token, em);
      return { reservationId: id, amount: input.amount, balance: Number(row.balance) };
    }
    return this.#refused(db, scope, input);
  }

  /**
   * How many of `units` (in order) the billing period's included pool of `quota` still covers; takes
   * them (atomically, the account row locked). 0 without an account or with an inactive subscription.
   */
  async takePool(scope: Scope, quota: PeriodQuota, units: readonly number[], em?: LedgerDb): Promise<number> {
    return (await this.takePoolAt(scope, quota, units, em)).taken;
  }

  /** {@link takePool}, with the billing period the units were taken from (credits.pool.ts). */
  takePoolAt(scope: Scope, quota: PeriodQuota, units: readonly number[], em?: LedgerDb): Promise<{ taken: number; periodStart: Date | null }> {
    return takePoolAt(this.#db(em), scope, quota, units);
  }

  /** Gives `units` back to a period's pool (never below 0; credits.pool.ts). */
  returnPool(tenant: TenantRef, quota: PeriodQuota, periodStart: Date, units: number, em?: LedgerDb): Promise<void> {
    return returnPool(this.#db(em), tenant, quota, periodStart, units);
  }

  /** See CreditsPort.reserveSend: the included pool first, then a reservation. */
  async reserveSend(scope: Scope, input: ReserveInput & { units: number }, em?: LedgerDb): Promise<Reservation | null> {
    if ((await this.takePool(scope, 'messages', [input.units], em)) === 1) return null;
    return this.reserve(scope, input, em);
  }

  /**
   * Reserves many amounts of one tenant in one statement (a campaign batch): items are taken in
   * order while the balance covers them (the account row is locked for the statement); the result
   * lists, per item, its reservation or null (not enough credit). An item whose key was reserved
   * before returns that reservation. SUBSCRIPTION_INACTIVE when the subscription is cancelled or paused.
   */
  async reserveMany(scope: Scope, items: readonly { amount: number; key: string; referenceId?: string | null }[], em?: LedgerDb): Promise<(Reservation | null)[]> {
    if (new Set(items.map((i) => i.key)).size !== items.length) throw new Error('reserveMany: keys must be unique');
    for (const i of items) if (!Number.isSafeInteger(i.amount) || i.amount < 0) throw new Error(`reservation amount must be a non-negative integer, got ${i.amount}`);
    if (!items.length) return [];
    const db = this.#db(em);
    const now = this.#clock.now();
    const token = randomBytes(9).toString('base64url');
    const ids = items.map(() => newId('cle', now.getTime()));
    const rows = await sqlQuery<{ idx: string; id: string; amount: string; balance: string | null; reload: boolean | null }>(db, `
      with acct as (
        select balance from billing_accounts where organization_id = $1 and mode = $2 and status not in ('cancelled', 'paused') for update
      ), req as (
        select r.* from unnest($3::bigint[], $4::text[], $5::text[], $6::text[]) with ordinality as r(amount, id, key, ref, idx)
        where not exists (select 1 from credit_ledger_entries k where k.organization_id = $1 and k.mode = $2 and k.idempotency_key = r.key)
      ), ok as (
        select x.amount, x.id, x.key, x.ref, x.idx from (select req.*, sum(req.amount) over (order by req.idx) as running from req) x, acct where x.running <= acct.balance
      ), ok_total as (select coalesce(sum(amount), 0) as total from ok
      ), upd as (
        update billing_accounts a set balance = a.balance - t.total, updated_at = $7,
          auto_reload_token = case when a.auto_reload_token is null and a.auto_reload_enabled and a.balance - t.total < a.auto_reload_threshold then $8 else a.auto_reload_token end,
          auto_reload_token_at = case when a.auto_reload_token is null and a.auto_reload_enabled and a.balance - t.total < a.auto_reload_threshold then $7 else a.auto_reload_token_at end
        from ok_total t where a.organization_id = $1 and a.mode = $2 and t.total > 0 and a.balance >= t.total
        returning a.balance, a.auto_reload_token = $8 as reload
      ), done as (
        select ok.* from ok where exists (select 1 from upd) or (select total from ok_total) = 0
      ), ins as (
        insert into credit_ledger_entries (id, organization_id, mode, kind, amount, reference_id, idempotency_key, created_at)
        select id, $1, $2, 'reservation', -amount, ref, key, $7 from done
      )
      select done.idx::text, done.id, done.amount::text, (select balance::text from upd), (select reload from upd) from done
      union all
      select r.idx::text, k.id, (-k.amount)::text, null, null
      from unnest($5::text[]) with ordinality as r(key, idx) join credit_ledger_entries k on k.organization_id = $1 and k.mode = $2 and k.idempotency_key = r.key`,
    [scope.organizationId, scope.mode, items.map((i) => i.amount), ids, items.map((i) => i.key), items.map((i) => i.referenceId ?? null), now, token]);
    const byIdx = new Map(rows.map((r) => [Number(r.idx), r]));
    let balance = rows.find((r) => r.balance !== null)?.balance;
    if (balance === undefined) {
      const [acct] = await sqlQuery<{ balance: string; status: string }>(db, 'select balance::text, status from billing_accounts where organization_id = $1 and mode = $2', [scope.organizationId, scope.mode]);
      if (acct && (acct.status === 'cancelled' || acct.status === 'paused')) {
        throw new ServiceError('SUBSCRIPTION_INACTIVE', `The subscription is ${acct.status}; start a new one with POST /v1/billing/checkout`, { status: acct.status });
      }
      balance = acct?.balance ?? '0';
    }
    if (rows.some((r) => r.reload)) await this.#enqueueReload(scope, token, em);
    return items.map((_, i) => {
      const r = byIdx.get(i + 1);
      return r ? { reservationId: r.id, amount: Number(r.amount), balance: Number(balance) } : null;
    });
  }

  /**
   * What messages cost, per group: their reservations (ledger key: the message id) minus what was
   * released, in minor units of the account's currency. Test mode: nothing (never charged).
   */
  async costByGroup(tenant: TenantRef, messageIds: readonly string[], groups: readonly string[]): Promise<Map<string, number>> {
    const byGroup = new Map<string, number>();
    if (tenant.mode === 'test' || messageIds.length === 0) return byGroup;
    const rows = await sqlQuery<{ grp: string; cost: string }>(sqlClient(this.#orm), `
      select m.grp, sum(-r.amount - coalesce(rel.amount, 0))::text as cost
      from unnest($3::text[], $4::text[]) as m(id, grp)
      join credit_ledger_entries r on r.organization_id = $1 and r.mode = $2 and r.idempotency_key = m.id and r.kind = 'reservation'
      left join credit_ledger_entries rel on rel.reference_id = r.id and rel.kind = 'release'
      group by m.grp`, [tenant.organizationId, tenant.mode, messageIds, groups]);
    for (const r of rows) byGroup.set(r.grp, Number(r.cost));
    return byGroup;
  }

  /**
   * Why a reservation was not made: already made (returned; with `renewAged`, one open for more than
   * half the stale bound is released first), inactive subscription, or not enough credit.
   */
  async #refused(db: Db, tenant: TenantRef, input: { amount: number; key: string; renewAged?: boolean }): Promise<Reservation> {
    const [existing] = await sqlQuery<{ id: string; amount: string; settled: 'capture' | 'release' | null; at: string }>(db,
      `select e.id, e.amount::text, s.kind as settled, (extract(epoch from e.created_at) * 1000)::bigint::text as at from credit_ledger_entries e
         left join credit_ledger_entries s on s.reference_id = e.id and s.kind in ('capture', 'release')
        where e.organization_id = $1 and e.mode = $2 and e.idempotency_key = $3`, [tenant.organizationId, tenant.mode, input.key]);
    if (existing && !existing.settled && input.renewAged && this.#clock.now().getTime() - Number(existing.at) > this.staleReservationMs / 2) {
      // A retry that could outlive the bound: the sweep must not release under it, so it starts afresh.
      await this.#settle(tenant, existing.id, 'release', db);
      // Settled once: by this release, or by whoever came first (a capture of the attempt it was for).
      existing.settled = (await this.stateOf(tenant, existing.id, db)) === 'captured' ? 'capture' : 'release';
    }
    const [acct] = await sqlQuery<{ balance: string; status: string }>(db,
      `select balance::text, status from billing_accounts where organization_id = $1 and mode = $2`, [tenant.organizationId, tenant.mode]);
    if (existing) {
      const earlier = existing.settled === 'capture' ? 'captured' : existing.settled === 'release' ? 'released' : 'open';
      return { reservationId: existing.id, amount: -Number(existing.amount), balance: Number(acct?.balance ?? 0), earlier };
    }
    if (acct && (acct.status === 'cancelled' || acct.status === 'paused')) {
      throw new ServiceError('SUBSCRIPTION_INACTIVE', `The subscription is ${acct.status}; start a new one with POST /v1/billing/checkout`, { status: acct.status });
    }
    const balance = Number(acct?.balance ?? 0);
    throw new ServiceError('INSUFFICIENT_CREDITS', `The credit balance (${balance}) does not cover ${input.amount}; top up with POST /v1/billing/credits/topup`, { balance, required: input.amount });
  }

  /**
   * The auto-reload job of a threshold crossing. In an ORM transaction it commits with it; on a pg
   * client it is enqueued at once (should the caller roll back, the job finds no mark and does
   * nothing; the sweeper catches a crossing whose job was lost).
   */
  async #enqueueReload(scope: Scope, token: string, em: LedgerDb | undefined): Promise<void> {
    await this.#jobs.enqueue(AUTO_RELOAD_JOB, { token }, { scope, ...(isEm(em) ? { em } : {}), singletonKey: `${scope.organizationId}:${scope.mode}:${token}` });
  }

  /** See CreditsPort.sendReservations: the pooled group-commit CTE of credits.pool.ts, refused like {@link reserve}. */
  readonly sendReservations: SendReservations = sendReservations((scope, amount) => this.#refuse(scope, amount), (tenants) => this.#topUps.enqueueDebitMarks(tenants));

  /**
   * Throws what {@link reserve} would throw for `amount` now (INSUFFICIENT_CREDITS, SUBSCRIPTION_INACTIVE)
   * and reserves nothing: a check before a stream starts, so that a refusal is still a plain HTTP
   * error. Advisory: a concurrent debit may still make the reservation that follows fail.
   */
  async assertCovers(tenant: TenantRef, amount: number): Promise<void> {
    const [acct] = await sqlQuery<{ ok: boolean }>(this.#db(),
      `select balance >= $3 and status not in ('cancelled', 'paused') as ok from billing_accounts where organization_id = $1 and mode = $2`, [tenant.organizationId, tenant.mode, amount]);
    if (acct?.ok) return;
    await this.#refuse(tenant, amount);
  }

  /** Throws why `amount` is refused now (a one-off key: never an earlier reservation). */
  async #refuse(tenant: TenantRef, amount: number): Promise<void> {
    await this.#refused(this.#db(), tenant, { amount, key: `refusal:${randomBytes(6).toString('hex')}` });
  }

  /** Live sends are charged only with a live payments provider (else no balance could ever be topped up). */
  chargesLive(): boolean {
    return this.#payments('live') !== undefined;
  }

  /** Captures (delivered) or releases (failed) the reservation made under `key` (a message id); idempotent; false when there is none. */
  async settleByKey(tenant: TenantRef, key: string, kind: 'capture' | 'release'): Promise<boolean> {
    const [r] = await sqlQuery<{ id: string }>(this.#db(), `select id from credit_ledger_entries where organization_id = $1 and mode = $2 and idempotency_key = $3 and kind = 'reservation'`,
      [tenant.organizationId, tenant.mode, key]);
    return r ? this.#settle(tenant, r.id, kind) : false;
  }

  /**
   * What the ledger charged under each reservation key (a message id, `call:<id>`): the captured
   * part of the reservation (what was reserved less what its capture gave back), in minor units, in
   * the account's currency. A key whose reservation is open, was released, or that never reserved
   * (test mode, a send the plan's included units covered) is absent.
   */
  async chargesOf(tenant: TenantRef, keys: readonly string[]): Promise<Map<string, { amount: number; currency: string }>> {
    if (keys.length === 0) return new Map();
    const rows = await sqlQuery<{ key: string; amount: string; currency: string }>(this.#db(), `
      select r.idempotency_key as key, sum(-r.amount - s.amount)::bigint as amount, min(a.currency) as currency
        from credit_ledger_entries r
        join credit_ledger_entries s on s.reference_id = r.id and s.kind = 'capture'
        join billing_accounts a on a.organization_id = r.organization_id and a.mode = r.mode
       where r.organization_id = $1 and r.mode = $2 and r.idempotency_key = any($3::text[]) and r.kind = 'reservation'
       group by r.idempotency_key`, [tenant.organizationId, tenant.mode, [...keys]]);
    return new Map(rows.map((r) => [r.key, { amount: Number(r.amount), currency: r.currency }]));
  }

  /** Makes a reservation final (delivered). Idempotent: a settled reservation is left as it is. Returns whether this call settled it. */
  capture(tenant: TenantRef, reservationId: string, em?: LedgerDb, keep?: number): Promise<boolean> {
    return this.#settle(tenant, reservationId, 'capture', em, keep);
  }

  /** Gives a reservation back to the balance (failed send). Idempotent like {@link capture}. */
  release(tenant: TenantRef, reservationId: string, em?: LedgerDb): Promise<boolean> {
    return this.#settle(tenant, reservationId, 'release', em);
  }

  /** What became of a reservation: open, captured or released (null: none with this id). */
  async stateOf(tenant: TenantRef, reservationId: string, em?: LedgerDb | Db): Promise<ReservationState> {
    const [r] = await sqlQuery<{ settled: 'capture' | 'release' | null }>(this.#db(em), `
      select s.kind as settled from credit_ledger_entries r
        left join credit_ledger_entries s on s.reference_id = r.id and s.kind in ('capture', 'release')
       where r.organization_id = $1 and r.mode = $2 and r.id = $3 and r.kind = 'reservation'`, [tenant.organizationId, tenant.mode, reservationId]);
    if (!r) return null;
    return r.settled === 'capture' ? 'captured' : r.settled === 'release' ? 'released' : 'open';
  }

  /**
   * The one settlement of a reservation: its capture or release entry and the balance move in one
   * statement. Concurrent settlements of one reservation meet on the unique index on the settled
   * reservation: the second waits for the first to commit and then does nothing (returns false),
   * whatever kind each was, so a reservation is settled exactly once. A capture that `keep`s less
   * than was reserved gives the difference back in its own entry (amount: what returns).
   */
  async #settle(tenant: TenantRef, reservationId: string, kind: 'capture' | 'release', em?: LedgerDb | Db, keep?: number): Promise<boolean> {
    if (keep !== undefined && (!Number.isSafeInteger(keep) || keep < 0)) throw new Error(`captured amount must be a non-negative integer, got ${keep}`);
    const now = this.#clock.now();
    const rows = await sqlQuery<{ settled: number }>(this.#db(em), `
      with r as (
        select id, amount from credit_ledger_entries where organization_id = $1 and mode = $2 and id = $3 and kind = 'reservation'
      ), s as (
        insert into credit_ledger_entries (id, organization_id, mode, kind, amount, reference_id, created_at)
        select $4, $1, $2, $5::text, case when $5::text = 'release' then -r.amount when $7::bigint is null then 0 else greatest(0, -r.amount - $7::bigint) end, r.id, $6 from r
        on conflict (reference_id) where kind in ('capture', 'release') do nothing
        returning amount
      ), u as (
        update billing_accounts a set balance = a.balance + s.amount, updated_at = $6 from s
        where a.organization_id = $1 and a.mode = $2 and s.amount <> 0 returning a.balance
      )
      select (select count(*) from s)::int as settled, (select count(*) from u)::int as moved`,
    [tenant.organizationId, tenant.mode, reservationId, newId('cle', now.getTime()), kind, now, keep ?? null]);
    return (rows[0]?.settled ?? 0) > 0;
  }

  /** Charges the default payment method and adds the amount (credits.topups.ts). */
  topUp(scope: Scope, amount: number): Promise<TopUpResult> {
    return this.#topUps.topUp(scope, amount);
  }

  setAutoReload(scope: Scope, input: AutoReloadInput): Promise<BillingAccount> {
    return this.#topUps.setAutoReload(scope, input);
  }

  /** The auto-reload sweeper (credits.topups.ts); returns how many reload jobs it enqueued. */
  sweepAutoReload(tenant?: TenantRef): Promise<number> {
    return this.#topUps.sweepAutoReload(tenant);
  }

  /** The reload job (credits.topups.ts). */
  runAutoReload(scope: Scope, token: string): Promise<void> {
    return this.#topUps.runAutoReload(scope, token);
  }
}
