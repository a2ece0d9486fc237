/**
 * The live payments adapter on the official Stripe SDK: Checkout Sessions in subscription mode
 * (the plan's price), off-session PaymentIntents on the customer's default payment method for
 * top-ups and auto-reload, and webhooks verified with Stripe's signature scheme. Every call that
 * creates something carries a stable idempotency key.
 */
import type Stripe from 'stripe';
import { loadStripe, verifyStripeSigned } from './sandbox.ts';
import type { ChargeRequest, ChargeResult, CheckoutRequest, CheckoutSession, PaymentsProvider, PlanChangeRequest, VerifiedEvent } from './types.ts';

export const STRIPE = 'stripe';

export class StripePaymentsProvider implements PaymentsProvider {
  readonly name = STRIPE;
  readonly #secretKey: string;
  #client: Promise<Stripe> | undefined;
  readonly #webhookSecret: string;
  /** Our plan price ids (`price_growth_monthly`) → the Stripe price ids configured for them. */
  readonly #prices: Readonly<Record<string, string>>;

  constructor(deps: { secretKey: string; webhookSecret: string; prices: Readonly<Record<string, string>> }) {
    this.#secretKey = deps.secretKey;
    this.#webhookSecret = deps.webhookSecret;
    this.#prices = deps.prices;
  }

  #stripe(): Promise<Stripe> {
    return (this.#client ??= loadStripe().then(({ default: S }) => new S(this.#secretKey, { maxNetworkRetries: 2, timeout: 20_000 })));
  }

  async createCheckout(req: CheckoutRequest): Promise<CheckoutSession> {
    const price = this.#prices[req.priceId] ?? req.priceId;
    const metadata = { organization_id: req.organizationId, mode: req.mode, plan_id: req.planId };
    const session = await (await this.#stripe()).checkout.sessions.create({
      mode: 'subscription',
      line_items: [{ price, quantity: 1 }],
      success_url: req.successUrl,
      cancel_url: req.cancelUrl,
      client_reference_id: req.organizationId,
      ...(req.customerId ? { customer: req.customerId } : {}),
      metadata,
      subscription_data: { metadata },
      expires_at: Math.floor(req.expiresAt.getTime() / 1000),
    }, { idempotencyKey: req.idempotencyKey });
    return { id: session.id, url: session.url ?? '', expiresAt: new Date((session.expires_at ?? 0) * 1000) };
  }

  /** Moves the subscription's item to the plan's Stripe price (prorated) and its metadata to the plan. */
  async changePlan(req: PlanChangeRequest): Promise<void> {
    const stripe = await this.#stripe();
    const sub = await stripe.subscriptions.retrieve(req.subscriptionId);
    const item = sub.items.data[0];
    await stripe.subscriptions.update(req.subscriptionId, {
      ...(item ? { items: [{ id: item.id, price: this.#prices[req.priceId] ?? req.priceId }] } : {}),
      metadata: { ...sub.metadata, plan_id: req.planId },
      proration_behavior: 'create_prorations',
    }, { idempotencyKey: req.idempotencyKey });
  }

  async charge(req: ChargeRequest): Promise<ChargeResult> {
    try {
      const intent = await (await this.#stripe()).paymentIntents.create({
        amount: req.amount, currency: req.currency, customer: req.customerId, payment_method: req.paymentMethodId,
        off_session: true, confirm: true, description: req.description,
      }, { idempotencyKey: req.idempotencyKey });
      if (intent.status === 'succeeded') return { status: 'succeeded', paymentId: intent.id };
      return { status: 'declined', paymentId: intent.id, declineCode: intent.status, message: `Payment ${intent.status}` };
    } catch (e) {
      const { default: S } = await loadStripe();
      if (e instanceof S.errors.StripeCardError) {
        return { status: 'declined', paymentId: (e.payment_intent as { id?: string } | undefined)?.id ?? null, declineCode: e.decline_code ?? e.code ?? 'card_declined', message: e.message };
      }
      throw e;
    }
  }

  async verifyWebhook(rawBody: string, signature: string | undefined, receivedAt: Date): Promise<VerifiedEvent> {
    const verified = await verifyStripeSigned(rawBody, signature, this.#webhookSecret, receivedAt);
    const e = verified.event;
    // A completed session names its subscription by id: read it back with the payment method.
    if (e.kind === 'checkout.completed' && !e.paymentMethod) {
      const session = await (await this.#stripe()).checkout.sessions.retrieve(e.sessionId, { expand: ['subscription.default_payment_method'] });
      const sub = session.subscription as Stripe.Subscription | null;
      const pm = sub?.default_payment_method as Stripe.PaymentMethod | null | undefined;
      const item = sub?.items.data[0];
      return {
        ...verified,
        event: {
          ...e, subscriptionId: sub?.id ?? e.subscriptionId,
          paymentMethod: pm?.card ? { id: pm.id, type: 'card', brand: pm.card.brand, last4: pm.card.last4 } : null,
          ...(item ? { periodStart: new Date(item.current_period_start * 1000), periodEnd: new Date(item.current_period_end * 1000) } : {}),
        },
      };
    }
    return verified;
  }
}
