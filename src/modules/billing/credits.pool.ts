/**
 * The plan's included pools (billing_pool_usage): the units of a quota a billing period includes
 * before credits are charged. `credits_take_pool` takes units in order while they fit, the account
 * row locked; `credits_debit_pooled` does the same for messaging's group commit and debits the
 * balance for the sends past the pool. CreditsService delegates to these (its public API is unchanged).
 */
import { includedOf } from './billing.plans.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { sqlQuery } from '../../platform/db/sql.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { PeriodQuota, SendReservations } from './billing.ports.ts';

/** Where a pool statement runs (what CreditsService resolved its `em` to). */
type PoolDb = Parameters<typeof sqlQuery>[0];

/** How many of `units` (in order) the billing period's included pool of `quota` still covers, taken; with the period they came from. */
export async function takePoolAt(db: PoolDb, scope: Scope, quota: PeriodQuota, units: readonly number[]): Promise<{ taken: number; periodStart: Date | null }> {
  if (units.length === 0) return { taken: 0, periodStart: null };
  const [r] = await sqlQuery<{ n: number; period: Date | null }>(db,
    `select credits_take_pool($1, $2, $3, $4::bigint[], $5) as n,
            (select current_period_start from billing_accounts where organization_id = $1 and mode = $2) as period`,
    [scope.organizationId, scope.mode, quota, units, includedOf(scope.plan, quota)]);
  const taken = Number(r?.n ?? 0);
  return { taken, periodStart: taken > 0 && r?.period ? new Date(r.period) : null };
}

/** Gives `units` back to a period's pool (never below 0). */
export async function returnPool(db: PoolDb, tenant: TenantRef, quota: PeriodQuota, periodStart: Date, units: number): Promise<void> {
  if (units <= 0) return;
  await sqlQuery(db, `update billing_pool_usage set used = greatest(0, used - $5) where organization_id = $1 and mode = $2 and quota = $3 and period_start = $4`,
    [tenant.organizationId, tenant.mode, quota, periodStart, units]);
}

/**
 * See CreditsPort.sendReservations: reservations as a CTE of messaging's group-commit statement.
 * `credits_debit_pooled` runs once (an uncorrelated subquery): it takes each tenant's pooled
 * sends from the plan's included messages and debits the balance for the rest, answering which
 * items it charged; only those get a reservation entry. `refused` throws why a send of `amount`
 * is refused now (CreditsService's refusal). The function also marks an account whose balance it takes
 * below the auto-reload threshold; `marked` enqueues those marks' reloads once the statement committed.
 */
export function sendReservations(refused: (scope: Scope, amount: number) => Promise<unknown>, marked: (tenants: readonly TenantRef[]) => Promise<unknown>): SendReservations {
  return {
    cte: (n: number) => `insert into credit_ledger_entries (id, organization_id, mode, kind, amount, reference_id, idempotency_key, created_at)
      select x.i, x.o, x.m, 'reservation', -x.a, x.k, x.k, $${n + 7}::timestamptz
        from unnest($${n}::text[], $${n + 1}::text[], $${n + 2}::bigint[], $${n + 3}::text[], $${n + 4}::text[]) with ordinality as x(o, m, a, k, i, idx)
       where x.idx::int = any(coalesce((select credits_debit_pooled($${n}::text[], $${n + 1}::text[], $${n + 2}::bigint[], $${n + 5}::bigint[], $${n + 6}::bigint[], $${n + 7}::timestamptz)), '{}'::int[]))`,
    params: (items, now) => [
      items.map((i) => i.organizationId), items.map((i) => i.mode), items.map((i) => i.amount), items.map((i) => i.key),
      items.map(() => newId('cle', now.getTime())), items.map((i) => i.units), items.map((i) => includedOf(i.plan, 'messages')), now,
    ],
    isRefusal: (e: unknown): boolean => (e as { code?: string }).code === 'P0402',
    refusal: async (scope: Scope, amount: number): Promise<Error> => {
      try {
        await refused(scope, amount);
      } catch (e) {
        return e as Error;
      }
      return new ServiceError('INSUFFICIENT_CREDITS', 'The credit balance does not cover this send', { required: amount });
    },
    committed: (tenants) => {
      // Best effort after the commit: the auto-reload sweeper enqueues any mark this misses within a minute.
      marked(tenants).catch(() => {});
    },
  };
}
