/**
 * Plan quotas (port `planQuotas`): `messages_included` (one pool for every channel, counted as
 * GET /v1/billing/usage counts `messages.total`) and `voice_minutes` per billing period, counted from
 * the usage entries the sending contexts record; `agents` is the number of agents an organization
 * may have. Past an included quota the plan's {@link OVERAGE_POLICY} decides: `block` → 429
 * QUOTA_EXCEEDED, `overage` → no limit here (each live send is paid from credits). Live mode only:
 * test mode is never billed and never blocked.
 *
 * `check` (per send) is not serialized with the sends: it sees the usage committed before it and
 * reuses a count for {@link QUOTA_CACHE_MS}, so sends in flight at the same time can pass a blocked
 * pool by as many as were in flight. `remaining` inside a transaction is serialized per tenant.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Clock } from '../../platform/clock.ts';
import { sqlQuery } from '../../platform/db/sql.ts';
import { ServiceError } from '../../platform/errors.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CreditsService } from './credits.service.ts';
import { voiceMinutesOf, type UsageService } from './usage.service.ts';
import { OVERAGE_POLICY, planById, type Quota } from './billing.plans.ts';
import type { PeriodQuota } from './billing.ports.ts';

/** How long `check` reuses a tenant's counted usage (per instance). */
export const QUOTA_CACHE_MS = 5_000;

export class QuotasService {
  readonly #clock: Clock;
  readonly #credits: CreditsService;
  readonly #usage: UsageService;
  readonly #cache = new Map<string, { at: number; used: number; periodEnd: Date }>();

  constructor(deps: { clock: Clock; credits: CreditsService; usage: UsageService }) {
    this.#clock = deps.clock;
    this.#credits = deps.credits;
    this.#usage = deps.usage;
  }

  /** The included amount that limits this scope, or null when nothing blocks (test mode, unlimited, overage billed). */
  #limit(scope: Scope, quota: PeriodQuota): number | null {
    if (scope.mode === 'test' || OVERAGE_POLICY[scope.plan] === 'overage') return null;
    const plan = planById(scope.plan);
    const included: Quota | undefined = quota === 'messages' ? plan?.features.messages_included : plan?.features.voice_minutes;
    return included === undefined || included === 'unlimited' ? null : included;
  }

  async #used(scope: Scope, quota: PeriodQuota, cached: boolean, em?: EntityManager): Promise<{ used: number; periodEnd: Date }> {
    const key = `${scope.organizationId}:${scope.mode}:${quota}`;
    const now = this.#clock.now().getTime();
    const hit = this.#cache.get(key);
    if (cached && hit && now - hit.at < QUOTA_CACHE_MS && now < hit.periodEnd.getTime()) return hit;
    const a = await this.#credits.account(scope, em);
    const totals = await this.#usage.totals(scope, a.currentPeriodStart, a.currentPeriodEnd, em);
    const used = quota === 'messages' ? this.#usage.messagesOf(totals) : voiceMinutesOf(totals);
    const entry = { at: now, used, periodEnd: a.currentPeriodEnd };
    // An uncached count is taken by a caller about to spend (a campaign batch): it would be stale at once.
    if (cached) this.#cache.set(key, entry);
    else this.#cache.delete(key);
    return entry;
  }

  /**
   * Units of `quota` still allowed this period; null: no limit. Counted now. With `em` (a
   * transaction that will record the usage it spends, as a campaign batch does), the count waits
   * for the other transactions that asked the same before it to commit (a transaction-scoped
   * advisory lock per tenant and quota), so those callers never pass the quota between them.
   */
  async remaining(scope: Scope, quota: PeriodQuota, em?: EntityManager): Promise<number | null> {
    const limit = this.#limit(scope, quota);
    if (limit === null) return null;
    const tx = em?.getTransactionContext() as Transaction<unknown> | undefined;
    if (tx) await sqlQuery(tx, 'select pg_advisory_xact_lock(hashtext($1))', [`quota:${scope.organizationId}:${scope.mode}:${quota}`]);
    const { used } = await this.#used(scope, quota, false, em);
    return Math.max(0, limit - used);
  }

  /** QUOTA_EXCEEDED (429) when `quantity` more units would pass the plan's included amount of a blocking plan. */
  async check(scope: Scope, quota: PeriodQuota, quantity: number): Promise<void> {
    const limit = this.#limit(scope, quota);
    if (limit === null) return;
    const entry = await this.#used(scope, quota, true);
    const { used, periodEnd } = entry;
    if (used + quantity <= limit) {
      // Counted here until the next read: sends this instance admits meanwhile use the pool up too.
      entry.used += quantity;
      return;
    }
    const name = quota === 'messages' ? 'messages_included' : 'voice_minutes';
    throw new ServiceError('QUOTA_EXCEEDED', `The ${scope.plan} plan includes ${limit} ${quota === 'messages' ? 'messages' : 'voice minutes'} per period and ${used} are used; upgrade the plan (POST /v1/billing/checkout) or wait for the next period`,
      { quota: name, limit, used, requested: quantity, period_end: periodEnd.toISOString() });
  }

  /** QUOTA_EXCEEDED (429) when one more agent would pass the plan's `agents` (live mode). */
  checkAgents(scope: Scope, existing: number): void {
    if (scope.mode === 'test') return;
    const included = planById(scope.plan)?.features.agents;
    if (included === undefined || included === 'unlimited' || existing + 1 <= included) return;
    throw new ServiceError('QUOTA_EXCEEDED', `The ${scope.plan} plan allows ${included} agent${included === 1 ? '' : 's'}; delete one or upgrade the plan`, { quota: 'agents', limit: included, used: existing });
  }
}
