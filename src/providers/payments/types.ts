/**
 * The payments adapter: hosted checkout for subscriptions, off-session charges to the customer's
 * default payment method (top-ups, auto-reload) and signed webhooks. Live mode uses Stripe
 * (`stripe.ts`); test-mode keys use the sandbox (`sandbox.ts`), which behaves like it: sessions
 * expire, documented magic card numbers decline, and webhooks signed with Stripe's scheme are
 * delivered to this service once or several times.
 */
import type { Mode } from '../../platform/db/tenant.ts';

export type CardDetails = { type: 'card'; brand: string; last4: string };

export type CheckoutRequest = {
  organizationId: string;
  mode: Mode;
  planId: string;
  priceId: string;
  customerId: string | null;
  successUrl: string;
  cancelUrl: string;
  expiresAt: Date;
  /** Stable per request: a retried call creates one session. */
  idempotencyKey: string;
};
export type CheckoutSession = { id: string; url: string; expiresAt: Date };

/** Moving a subscription to another plan's price; the rest of its state as this service knows it. */
export type PlanChangeRequest = {
  organizationId: string;
  mode: Mode;
  subscriptionId: string;
  planId: string;
  priceId: string;
  status: string;
  cancelAtPeriodEnd: boolean;
  periodStart: Date;
  periodEnd: Date;
  /** Stable per request: a retried call changes the subscription once. */
  idempotencyKey: string;
};

export type ChargeRequest = {
  customerId: string;
  paymentMethodId: string;
  amount: number;
  currency: string;
  description: string;
  idempotencyKey: string;
};
export type ChargeResult =
  | { status: 'succeeded'; paymentId: string }
  | { status: 'declined'; paymentId: string | null; declineCode: string; message: string };

/** Subscription states as the provider reports them, normalised (Stripe's `canceled` → cancelled). */
export type SubscriptionStatus = 'active' | 'past_due' | 'paused' | 'cancelled';

/** Provider webhook events this service acts on, normalised from the provider's shape. */
export type BillingEvent =
  | {
    kind: 'checkout.completed'; sessionId: string; organizationId: string; mode: Mode; planId: string;
    customerId: string; subscriptionId: string; paymentMethod: ({ id: string } & CardDetails) | null;
    periodStart: Date; periodEnd: Date;
  }
  | { kind: 'checkout.expired'; sessionId: string }
  | {
    kind: 'subscription.updated'; subscriptionId: string; status: SubscriptionStatus; cancelAtPeriodEnd: boolean;
    periodStart: Date; periodEnd: Date; planId: string | null;
  }
  | { kind: 'ignored' };

/** A verified provider event: its id (processed once), type, creation time and normalised meaning. */
export type VerifiedEvent = { id: string; type: string; created: Date; event: BillingEvent };

export interface PaymentsProvider {
  /** Provider name: also the callback path segment (`/v1/providers/{name}/callbacks`). */
  readonly name: string;
  createCheckout(req: CheckoutRequest): Promise<CheckoutSession>;
  /** Moves the subscription to the plan's price (the provider then reports `customer.subscription.updated`). */
  changePlan(req: PlanChangeRequest): Promise<void>;
  charge(req: ChargeRequest): Promise<ChargeResult>;
  /** Verifies the signature (Stripe's `t=…,v1=…` scheme, 5 minutes tolerance) and normalises the event. */
  verifyWebhook(rawBody: string, signature: string | undefined, receivedAt: Date): Promise<VerifiedEvent>;
}

export class WebhookSignatureError extends Error {}

/** Normalises a Stripe-shaped event object (the sandbox emits the same shape). */
export function normaliseStripeEvent(e: { type: string; data: { object: Record<string, unknown> } }): BillingEvent {
  const o = e.data.object;
  const meta = (o.metadata ?? {}) as Record<string, string>;
  const seconds = (v: unknown) => new Date(Number(v) * 1000);
  switch (e.type) {
    case 'checkout.session.completed': {
      const sub = (o.subscription ?? {}) as Record<string, unknown>;
      const pm = (sub.default_payment_method ?? null) as { id: string; card?: { brand: string; last4: string } } | null;
      const item = ((sub.items as { data?: Record<string, unknown>[] } | undefined)?.data ?? [])[0] ?? {};
      return {
        kind: 'checkout.completed', sessionId: String(o.id), organizationId: meta.organization_id ?? '', mode: meta.mode === 'live' ? 'live' : 'test',
        planId: meta.plan_id ?? '', customerId: String(o.customer), subscriptionId: String(sub.id ?? ''),
        paymentMethod: pm?.card ? { id: pm.id, type: 'card', brand: pm.card.brand, last4: pm.card.last4 } : null,
        periodStart: seconds(sub.current_period_start ?? item.current_period_start), periodEnd: seconds(sub.current_period_end ?? item.current_period_end),
      };
    }
    case 'checkout.session.expired':
      return { kind: 'checkout.expired', sessionId: String(o.id) };
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted': {
      const item = ((o.items as { data?: Record<string, unknown>[] } | undefined)?.data ?? [])[0] ?? {};
      const raw = e.type === 'customer.subscription.deleted' ? 'canceled' : String(o.status);
      const status: SubscriptionStatus = raw === 'canceled' || raw === 'incomplete_expired' ? 'cancelled'
        : raw === 'past_due' || raw === 'unpaid' ? 'past_due' : raw === 'paused' ? 'paused' : 'active';
      return {
        kind: 'subscription.updated', subscriptionId: String(o.id), status, cancelAtPeriodEnd: o.cancel_at_period_end === true,
        periodStart: seconds(o.current_period_start ?? item.current_period_start), periodEnd: seconds(o.current_period_end ?? item.current_period_end),
        planId: meta.plan_id ?? null,
      };
    }
    default:
      return { kind: 'ignored' };
  }
}

/** One calendar month later in UTC, clamped to the month's last day (Jan 31 → Feb 28/29): a billing period. */
export function addMonth(d: Date): Date {
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth() + 1;
  const last = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  return new Date(Date.UTC(y, m, Math.min(d.getUTCDate(), last), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()));
}
