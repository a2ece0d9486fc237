/**
 * Plans, the current subscription, checkout and the provider webhooks that drive the subscription.
 * A webhook is verified by signature, then recorded in `billing_provider_events` (provider, event
 * id) in the same transaction as the change it makes: a second delivery of the same event finds
 * the row and changes nothing. Subscription updates older than the last one applied are ignored
 * (providers do not deliver in order). Plan changes in live mode move the organization's plan
 * (rate limits) and clear every instance's credential cache (`authChanged`).
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import { sqlQuery, type sqlClient } from '../../platform/db/sql.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { notifyAuthChanged } from '../../platform/auth/authenticate.ts';
import { emitEvent } from '../../platform/events/events.ts';
import type { Transaction } from 'kysely';
import { WebhookSignatureError, type BillingEvent, type PaymentsProvider } from '../../providers/payments/types.ts';
import { BillingAccount, CheckoutSessionRecord } from './billing.entities.ts';
import { planById, planByPriceId, PLANS, type PlanRecord } from './billing.plans.ts';
import type { CheckoutInput } from './billing.schemas.ts';
import type { CreditsService, PaymentsFor } from './credits.service.ts';

export type CheckoutResult = { checkoutUrl: string; sessionId: string; expiresAt: Date };

export class BillingService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #credits: CreditsService;
  readonly #payments: PaymentsFor;
  readonly #providers: ReadonlyMap<string, PaymentsProvider>;
  readonly #checkoutTtlMs: number;
  /** Whether a provider may act for a mode (the sandbox for test mode, and live too in development). */
  readonly #serves: (provider: string, mode: TenantRef['mode']) => boolean;
  readonly #authChanged: () => void;

  constructor(deps: {
    orm: MikroORM; clock: Clock; credits: CreditsService; payments: PaymentsFor; providers: readonly PaymentsProvider[];
    checkoutTtlSeconds: number; authChanged: () => void;
  }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#credits = deps.credits;
    this.#payments = deps.payments;
    this.#providers = new Map(deps.providers.map((p) => [p.name, p]));
    this.#checkoutTtlMs = deps.checkoutTtlSeconds * 1000;
    this.#serves = (provider, mode) => deps.payments(mode)?.name === provider;
    this.#authChanged = deps.authChanged;
  }

  plans(): readonly PlanRecord[] {
    return PLANS;
  }

  current(scope: Scope): Promise<BillingAccount> {
    return this.#credits.account(scope);
  }

  async checkout(scope: Scope, input: CheckoutInput): Promise<CheckoutResult> {
    const plan = planByPriceId(input.priceId);
    if (!plan) {
      throw new ServiceError('VALIDATION_ERROR', `priceId: unknown price ${input.priceId}; use a price_id from GET /v1/billing/plans`, { field: 'priceId', value: input.priceId, expected: PLANS.filter((p) => p.price_monthly !== null).map((p) => p.price_id) });
    }
    if (plan.price_monthly === null) {
      throw new ServiceError('VALIDATION_ERROR', `priceId: the ${plan.name} plan has custom pricing; contact sales`, { field: 'priceId', value: input.priceId });
    }
    const provider = this.#payments(scope.mode);
    if (!provider) throw new ServiceError('SERVICE_UNAVAILABLE', `No payments provider is configured in ${scope.mode} mode`, { service: 'payments', mode: scope.mode });
    const account = await this.#credits.account(scope);
    const now = this.#clock.now();
    const session = await provider.createCheckout({
      organizationId: scope.organizationId, mode: scope.mode, planId: plan.id, priceId: plan.price_id, customerId: account.customerId ?? null,
      successUrl: input.successUrl, cancelUrl: input.cancelUrl, expiresAt: new Date(now.getTime() + this.#checkoutTtlMs), idempotencyKey: `checkout:${scope.requestId}`,
    });
    const em = tenantEm(this.#orm, scope);
    em.create(CheckoutSessionRecord, {
      id: session.id, organizationId: scope.organizationId, mode: scope.mode, provider: provider.name, planId: plan.id, priceId: plan.price_id,
      url: session.url, successUrl: input.successUrl, cancelUrl: input.cancelUrl, status: 'open', expiresAt: session.expiresAt, completedAt: null, createdAt: now,
    });
    await em.flush();
    return { checkoutUrl: session.url, sessionId: session.id, expiresAt: session.expiresAt };
  }

  /** A checkout session across tenants (the hosted page knows only its id); NOT_FOUND when unknown. */
  async session(id: string): Promise<CheckoutSessionRecord> {
    const s = await this.#orm.em.fork().findOne(CheckoutSessionRecord, { id }, ALL_TENANTS);
    if (!s) throw new ServiceError('NOT_FOUND', `No checkout session ${id}`, { session_id: id });
    return s;
  }

  /** Marks an open session expired when its time is up; CHECKOUT_EXPIRED for an expired one. Returns whether it just expired. */
  async assertOpen(s: CheckoutSessionRecord): Promise<void> {
    if (s.status === 'open' && this.#clock.now().getTime() >= s.expiresAt.getTime()) {
      await this.#setSessionStatus(s.id, 'expired', 'open');
      s.status = 'expired';
    }
    if (s.status === 'expired') throw new ServiceError('CHECKOUT_EXPIRED', `Checkout session ${s.id} expired at ${s.expiresAt.toISOString()}; start a new checkout`, { session_id: s.id, expired_at: s.expiresAt.toISOString() });
    if (s.status !== 'open') throw new ServiceError('CONFLICT', `Checkout session ${s.id} is already ${s.status}`, { session_id: s.id, status: s.status });
  }

  async #setSessionStatus(id: string, status: 'complete' | 'expired' | 'cancelled', from: 'open' | null, db: EntityManager = this.#orm.em.fork()): Promise<void> {
    await sqlQuery(dbOf(db), `update checkout_sessions set status = $2, completed_at = case when $2 = 'complete' then $3::timestamptz else completed_at end
      where id = $1 and ($4::text is null or status = $4)`, [id, status, this.#clock.now(), from]);
  }

  cancelSession(id: string): Promise<void> {
    return this.#setSessionStatus(id, 'cancelled', 'open');
  }

  /**
   * A provider webhook: verified (401 UNAUTHORIZED on a bad or stale signature), then applied once
   * per provider event id. Returns whether this delivery changed anything.
   */
  async handleWebhook(providerName: string, rawBody: string, signature: string | undefined): Promise<{ received: true; event_id: string; duplicate: boolean }> {
    const provider = this.#providers.get(providerName);
    if (!provider) throw new ServiceError('NOT_FOUND', `No payments provider ${providerName}`, { provider: providerName });
    let verified;
    try {
      verified = await provider.verifyWebhook(rawBody, signature, this.#clock.now());
    } catch (e) {
      if (e instanceof WebhookSignatureError) throw new ServiceError('UNAUTHORIZED', `Webhook signature verification failed: ${e.message}`, { provider: providerName });
      throw e;
    }
    const tenant = await this.#tenantOf(verified.event);
    if (tenant && !this.#serves(providerName, tenant.mode)) {
      throw new ServiceError('FORBIDDEN', `Provider ${providerName} does not serve ${tenant.mode} mode`, { provider: providerName, mode: tenant.mode });
    }
    const em = tenant ? tenantEm(this.#orm, tenant) : this.#orm.em.fork();
    let planChanged = false;
    const fresh = await em.transactional(async (tx) => {
      const inserted = await sqlQuery(dbOf(tx), `insert into billing_provider_events (provider, event_id, type, organization_id, mode, received_at)
        values ($1, $2, $3, $4, $5, $6) on conflict do nothing returning event_id`,
      [providerName, verified.id, verified.type, tenant?.organizationId ?? null, tenant?.mode ?? null, this.#clock.now()]);
      if (!inserted.length) return false;
      if (tenant) planChanged = await this.#apply(tx, tenant, providerName, verified.event, verified.created);
      return true;
    });
    if (planChanged) this.#authChanged();
    return { received: true, event_id: verified.id, duplicate: !fresh };
  }

  async #tenantOf(e: BillingEvent): Promise<TenantRef | undefined> {
    if (e.kind === 'checkout.completed' || e.kind === 'checkout.expired') {
      const s = await this.#orm.em.fork().findOne(CheckoutSessionRecord, { id: e.sessionId }, ALL_TENANTS);
      return s ? { organizationId: s.organizationId, mode: s.mode } : undefined;
    }
    if (e.kind === 'subscription.updated') {
      const a = await this.#orm.em.fork().findOne(BillingAccount, { subscriptionId: e.subscriptionId }, ALL_TENANTS);
      return a ? { organizationId: a.organizationId, mode: a.mode } : undefined;
    }
    return undefined;
  }

  /** Applies one verified event inside the transaction that records it; returns whether the organization's plan changed. */
  async #apply(tx: EntityManager, tenant: TenantRef, provider: string, e: BillingEvent, created: Date): Promise<boolean> {
    if (e.kind === 'checkout.expired') {
      await this.#setSessionStatus(e.sessionId, 'expired', 'open', tx);
      return false;
    }
    if (e.kind !== 'checkout.completed' && e.kind !== 'subscription.updated') return false;
    const a = await this.#credits.account(tenant, tx);
    // Out of order: an older subscription state than the one applied is ignored.
    if (a.subscriptionEventAt && a.subscriptionEventAt.getTime() > created.getTime()) return false;
    const before = { plan: a.planId, status: a.status };
    if (e.kind === 'checkout.completed') {
      const plan = planById(e.planId);
      if (!plan) return false;
      await this.#setSessionStatus(e.sessionId, 'complete', null, tx);
      Object.assign(a, {
        planId: plan.id, status: 'active', currentPeriodStart: e.periodStart, currentPeriodEnd: e.periodEnd, cancelAtPeriodEnd: false,
        provider, customerId: e.customerId, subscriptionId: e.subscriptionId,
        ...(e.paymentMethod ? { paymentMethodId: e.paymentMethod.id, paymentMethodBrand: e.paymentMethod.brand, paymentMethodLast4: e.paymentMethod.last4 } : {}),
      });
    } else {
      const plan = e.planId ? planById(e.planId) : undefined;
      Object.assign(a, {
        status: e.status, cancelAtPeriodEnd: e.cancelAtPeriodEnd, ...(plan ? { planId: plan.id } : {}),
        ...(Number.isFinite(e.periodStart.getTime()) && Number.isFinite(e.periodEnd.getTime()) && e.periodEnd > e.periodStart
          ? { currentPeriodStart: e.periodStart, currentPeriodEnd: e.periodEnd } : {}),
      });
    }
    const now = this.#clock.now();
    a.subscriptionEventAt = created;
    a.sequence += 1;
    a.updatedAt = now;
    await tx.flush();
    emitEvent(tx, tenant, {
      type: 'billing.subscription_updated', resourceType: 'subscription', resourceId: a.subscriptionId ?? tenant.organizationId, sequence: a.sequence,
      data: { plan_id: a.planId, previous_plan_id: before.plan, status: a.status, previous_status: before.status, cancel_at_period_end: a.cancelAtPeriodEnd, current_period_start: a.currentPeriodStart.toISOString(), current_period_end: a.currentPeriodEnd.toISOString() },
    }, now);
    // The organization's plan (rate limits, credential cache) follows its live subscription.
    if (tenant.mode !== 'live' || before.plan === a.planId) return false;
    await sqlQuery(dbOf(tx), 'update organizations set plan = $2, updated_at = $3 where id = $1', [tenant.organizationId, a.planId, now]);
    // Other instances drop their cached credentials at commit; this one right after (authChanged).
    await notifyAuthChanged(tx);
    return true;
  }
}

function dbOf(em: EntityManager): ReturnType<typeof sqlClient> | Transaction<unknown> {
  return (em.getTransactionContext() as Transaction<unknown> | undefined) ?? em.getConnection().getClient<unknown>();
}
