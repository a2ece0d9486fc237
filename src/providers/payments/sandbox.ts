/**
 * The payments sandbox used by test-mode keys. It behaves like Stripe in test mode:
 * - checkout sessions (`cs_test_…`) are completed or cancelled on a hosted page served by this
 *   service (`POST /v1/providers/payments-sandbox-checkout/callbacks`); they expire (`expiresAt`);
 * - Stripe's documented test cards: 4242424242424242 (visa), 5555555555554444 (mastercard) and
 *   378282246310005 (amex) succeed; 4000000000000002 declines (card_declined), 4000000000009995
 *   (insufficient_funds), 4000000000000069 (expired_card), 4000000000000127 (incorrect_cvc);
 *   4000000000000341 attaches to the customer but every later charge declines;
 * - events are Stripe-shaped, signed with Stripe's scheme (`t=…,v1=…`, HMAC-SHA256) and delivered
 *   to this service `deliveries` times each after `latencyMs` (real Stripe delivers at least once).
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../../platform/clock.ts';
import {
  addMonth, normaliseStripeEvent, WebhookSignatureError, type CardDetails, type ChargeRequest, type ChargeResult, type CheckoutRequest,
  type CheckoutSession, type PaymentsProvider, type PlanChangeRequest, type VerifiedEvent,
} from './types.ts';

export const SANDBOX_PAYMENTS = 'payments-sandbox';
/** The hosted checkout page's form posts here. */
export const SANDBOX_CHECKOUT_PAGE = 'payments-sandbox-checkout';

type CardBehaviour = { brand: string; decline?: string; chargesFail?: boolean };
export const SANDBOX_CARDS: Readonly<Record<string, CardBehaviour>> = {
  '4242424242424242': { brand: 'visa' },
  '5555555555554444': { brand: 'mastercard' },
  '378282246310005': { brand: 'amex' },
  '4000000000000002': { brand: 'visa', decline: 'card_declined' },
  '4000000000009995': { brand: 'visa', decline: 'insufficient_funds' },
  '4000000000000069': { brand: 'visa', decline: 'expired_card' },
  '4000000000000127': { brand: 'visa', decline: 'incorrect_cvc' },
  '4000000000000341': { brand: 'visa', chargesFail: true },
};

export type SandboxCompletion =
  | { status: 'complete'; customerId: string; subscriptionId: string; paymentMethod: { id: string } & CardDetails }
  | { status: 'declined'; declineCode: string; message: string };

/** Receives a signed webhook delivery (the billing module's webhook handler). */
export type WebhookSink = (rawBody: string, signature: string) => Promise<unknown>;

export class SandboxPaymentsProvider implements PaymentsProvider {
  readonly name = SANDBOX_PAYMENTS;
  readonly #clock: Clock;
  readonly #secret: string;
  readonly #baseUrl: string;
  readonly #deliveries: number;
  readonly #latencyMs: number;
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #charges = new Map<string, ChargeResult>();
  #sink: WebhookSink | undefined;

  constructor(deps: { clock: Clock; webhookSecret: string; baseUrl: string; deliveries: number; latencyMs: number }) {
    this.#clock = deps.clock;
    this.#secret = deps.webhookSecret;
    this.#baseUrl = deps.baseUrl.replace(/\/$/, '');
    this.#deliveries = deps.deliveries;
    this.#latencyMs = deps.latencyMs;
  }

  /** Where signed events go (set once the billing module is built). */
  deliverTo(sink: WebhookSink): void {
    this.#sink = sink;
  }

  async createCheckout(req: CheckoutRequest): Promise<CheckoutSession> {
    const id = `cs_test_${randomBytes(18).toString('base64url')}`;
    return { id, url: `${this.#baseUrl}/v1/providers/${SANDBOX_CHECKOUT_PAGE}/callbacks?session_id=${id}`, expiresAt: req.expiresAt };
  }

  /** The hosted page's "Pay": a card from {@link SANDBOX_CARDS}; on success the completion event is sent. */
  completeCheckout(session: { id: string; organizationId: string; mode: string; planId: string; customerId: string | null }, cardNumber: string): SandboxCompletion {
    const card = SANDBOX_CARDS[cardNumber.replace(/\s+/g, '')];
    if (!card) return { status: 'declined', declineCode: 'invalid_number', message: 'Use one of the sandbox test card numbers (docs/billing.md, Payments sandbox)' };
    if (card.decline) return { status: 'declined', declineCode: card.decline, message: `Your card was declined (${card.decline})` };
    const last4 = cardNumber.slice(-4);
    const customerId = session.customerId ?? `cus_test_${randomBytes(10).toString('hex')}`;
    const subscriptionId = `sub_test_${randomBytes(10).toString('hex')}`;
    const pmId = `pm_test_${card.chargesFail ? 'chargefail' : 'ok'}_${last4}_${randomBytes(6).toString('hex')}`;
    const now = Math.floor(this.#clock.now().getTime() / 1000);
    const end = Math.floor(addMonth(this.#clock.now()).getTime() / 1000);
    this.emit('checkout.session.completed', {
      id: session.id, object: 'checkout.session', customer: customerId, mode: 'subscription', status: 'complete',
      metadata: { organization_id: session.organizationId, mode: session.mode, plan_id: session.planId },
      subscription: {
        id: subscriptionId, object: 'subscription', status: 'active', cancel_at_period_end: false, current_period_start: now, current_period_end: end,
        metadata: { plan_id: session.planId }, default_payment_method: { id: pmId, object: 'payment_method', type: 'card', card: { brand: card.brand, last4 } },
      },
    });
    return { status: 'complete', customerId, subscriptionId, paymentMethod: { id: pmId, type: 'card', brand: card.brand, last4 } };
  }

  /** Like Stripe's subscription update: the subscription takes the plan's price, and `customer.subscription.updated` follows. */
  async changePlan(req: PlanChangeRequest): Promise<void> {
    const seconds = (d: Date) => Math.floor(d.getTime() / 1000);
    this.emit('customer.subscription.updated', {
      id: req.subscriptionId, object: 'subscription', status: req.status === 'cancelled' ? 'canceled' : req.status, cancel_at_period_end: req.cancelAtPeriodEnd,
      current_period_start: seconds(req.periodStart), current_period_end: seconds(req.periodEnd),
      metadata: { organization_id: req.organizationId, mode: req.mode, plan_id: req.planId },
      items: { data: [{ price: { id: req.priceId } }] },
    });
  }

  async charge(req: ChargeRequest): Promise<ChargeResult> {
    const seen = this.#charges.get(req.idempotencyKey);
    if (seen) return seen;
    await new Promise((r) => setTimeout(r, Math.min(this.#latencyMs, 50)));
    const result: ChargeResult = req.paymentMethodId.startsWith('pm_test_chargefail_')
      ? { status: 'declined', paymentId: `pi_test_${randomBytes(10).toString('hex')}`, declineCode: 'card_declined', message: 'Your card was declined' }
      : { status: 'succeeded', paymentId: `pi_test_${randomBytes(10).toString('hex')}` };
    this.#charges.set(req.idempotencyKey, result);
    return result;
  }

  async verifyWebhook(rawBody: string, signature: string | undefined, receivedAt: Date): Promise<VerifiedEvent> {
    return verifyStripeSigned(rawBody, signature, this.#secret, receivedAt);
  }

  /** Signs a Stripe-shaped event with Stripe's scheme (also what tests use to play the provider). */
  async sign(rawBody: string): Promise<string> {
    const { default: Stripe } = await loadStripe();
    return Stripe.webhooks.generateTestHeaderString({ payload: rawBody, secret: this.#secret, timestamp: Math.floor(this.#clock.now().getTime() / 1000) });
  }

  /** Builds, signs and delivers an event `deliveries` times, `latencyMs` apart. */
  emit(type: string, object: Record<string, unknown>): string {
    const id = `evt_test_${randomBytes(12).toString('hex')}`;
    const raw = JSON.stringify({ id, object: 'event', type, created: Math.floor(this.#clock.now().getTime() / 1000), livemode: false, data: { object } });
    for (let i = 1; i <= this.#deliveries; i++) {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        void this.sign(raw).then((signature) => this.#sink?.(raw, signature)).catch(() => undefined);
      }, this.#latencyMs * i);
      this.#timers.add(timer);
    }
    return id;
  }

  close(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}

/** Verifies Stripe's signature scheme (tolerance 300 s against `receivedAt`) and normalises the event. */
export async function verifyStripeSigned(rawBody: string, signature: string | undefined, secret: string, receivedAt: Date): Promise<VerifiedEvent> {
  if (!signature) throw new WebhookSignatureError('missing signature');
  const { default: Stripe } = await loadStripe();
  let e: { id: string; type: string; created: number; data: { object: Record<string, unknown> } };
  try {
    e = await Stripe.webhooks.constructEventAsync(rawBody, signature, secret, 300, undefined, receivedAt.getTime()) as never;
  } catch (err) {
    throw new WebhookSignatureError((err as Error).message);
  }
  return { id: e.id, type: e.type, created: new Date(e.created * 1000), event: normaliseStripeEvent(e) };
}

/** The Stripe SDK, loaded on first use (it is large; most processes never need it at start). */
export function loadStripe(): Promise<typeof import('stripe')> {
  return (stripeModule ??= import('stripe'));
}
let stripeModule: Promise<typeof import('stripe')> | undefined;
