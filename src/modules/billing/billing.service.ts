/**
 * Plans, the current subscription, checkout and the provider webhooks that drive the subscription.
 * A webhook is verified by signature, then recorded in `billing_provider_events` (provider, event
 * id) in the same transaction as the change it makes: a second delivery of the same event finds
 * the row and changes nothing. Subscription updates older than the last one applied are ignored
 * (providers do not deliver in order). A plan change moves the organization's plan of the
 * subscription's mode (live or test: what that mode's keys act on) and clears every instance's
 * credential cache (`authChanged`; plan.change.ts). An owner changes the plan of a subscription
 * through its provider (`changePlan`).
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { closest } from '../../platform/suggest.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import { sqlQuery } from '../../platform/db/sql.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { WebhookSignatureError, type BillingEvent, type PaymentsProvider } from '../../providers/payments/types.ts';
import { BillingAccount, CheckoutSessionRecord } from './billing.entities.ts';
import { planById, planByPriceId, PLANS, type PlanRecord } from './billing.plans.ts';
import type { ChangePlanInput, CheckoutInput } from './billing.schemas.ts';
import { dbOf, emitSubscriptionUpdated, moveOrganizationPlan, putOnPlan } from './plan.change.ts';
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
    // Named as the client sent it (`priceId` or `price_id`).
    const field = input.fields.priceId;
    const priced = PLANS.filter((p) => p.price_monthly !== null).map((p) => p.price_id);
    if (!plan) {
      const near = closest(input.priceId, priced);
      throw new ServiceError('VALIDATION_ERROR', `${field}: unknown price ${input.priceId}; use a price_id from GET /v1/billing/plans (${priced.join(', ')})${near ? `; did you mean ${near}?` : ''}`,
        { field, value: input.priceId, expected: priced, ...(near ? { did_you_mean: near } : {}) });
    }
    if (plan.price_monthly === null) {
      throw new ServiceError('VALIDATION_ERROR', `${field}: the ${plan.name} plan has custom pricing; contact sales`, { field, value: input.priceId, expected: priced });
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

  /**
   * An owner's plan change (`PUT /v1/billing/plan`): the subscription's provider moves it to the
   * plan's price (Stripe prorates), then the account and the organization's plan of the mode move
   * at once (plan.change.ts); the provider's own event about it changes nothing more. Needs a
   * subscription (a completed checkout: else 402 PAYMENT_REQUIRED naming the checkout) that is not
   * cancelled or paused (403 SUBSCRIPTION_INACTIVE); custom pricing (enterprise) goes through sales
   * (422). The same plan again answers the subscription unchanged.
   */
  async changePlan(scope: Scope, input: ChangePlanInput): Promise<BillingAccount> {
    const plan = planById(input.plan_id)!;
    if (plan.price_monthly === null) {
      throw new ServiceError('VALIDATION_ERROR', `plan_id: the ${plan.name} plan has custom pricing; contact sales`,
        { field: 'plan_id', value: plan.id, expected: PLANS.filter((p) => p.price_monthly !== null).map((p) => p.id) });
    }
    const a = await this.#credits.account(scope);
    if (a.planId === plan.id) return a;
    if (a.status === 'cancelled' || a.status === 'paused') {
      throw new ServiceError('SUBSCRIPTION_INACTIVE', `The subscription is ${a.status}; start a new one with POST /v1/billing/checkout`, { status: a.status });
    }
    const provider = a.provider ? this.#providers.get(a.provider) : undefined;
    if (!a.subscriptionId || !provider) {
      throw new ServiceError('PAYMENT_REQUIRED', `There is no subscription to change yet: subscribe to ${plan.name} with POST /v1/billing/checkout { "price_id": "${plan.price_id}", … }`,
        { reason: 'no_subscription', checkout: 'POST /v1/billing/checkout', price_id: plan.price_id });
    }
    if (!this.#serves(provider.name, scope.mode)) {
      throw new ServiceError('SERVICE_UNAVAILABLE', `Provider ${provider.name} does not serve ${scope.mode} mode`, { service: 'payments', mode: scope.mode });
    }
    await provider.changePlan({
      organizationId: scope.organizationId, mode: scope.mode, subscriptionId: a.subscriptionId, planId: plan.id, priceId: plan.price_id,
      status: a.status, cancelAtPeriodEnd: a.cancelAtPeriodEnd, periodStart: a.currentPeriodStart, periodEnd: a.currentPeriodEnd,
      idempotencyKey: `plan:${scope.requestId}`,
    });
    const now = this.#clock.now();
    const moved = await tenantEm(this.#orm, scope).transactional((tx) => putOnPlan(tx, scope, plan.id, now, now));
    if (moved) this.#authChanged();
    return this.#credits.account(scope);
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
      const next = {
        status: e.status, cancelAtPeriodEnd: e.cancelAtPeriodEnd, planId: plan?.id ?? a.planId,
        ...(Number.isFinite(e.periodStart.getTime()) && Number.isFinite(e.periodEnd.getTime()) && e.periodEnd > e.periodStart
          ? { currentPeriodStart: e.periodStart, currentPeriodEnd: e.periodEnd } : { currentPeriodStart: a.currentPeriodStart, currentPeriodEnd: a.currentPeriodEnd }),
      };
      // The provider telling what is already applied (its echo of an owner's plan change): nothing to do.
      if (next.status === a.status && next.cancelAtPeriodEnd === a.cancelAtPeriodEnd && next.planId === a.planId
        && next.currentPeriodStart.getTime() === a.currentPeriodStart.getTime() && next.currentPeriodEnd.getTime() === a.currentPeriodEnd.getTime()) return false;
      Object.assign(a, next);
    }
    const now = this.#clock.now();
    a.subscriptionEventAt = created;
    a.sequence += 1;
    a.updatedAt = now;
    await tx.flush();
    emitSubscriptionUpdated(tx, tenant, a, before, now);
    // The organization's plan of this mode (its keys' rate limits and quotas) follows the subscription.
    return moveOrganizationPlan(tx, tenant, a.planId, now);
  }
}
