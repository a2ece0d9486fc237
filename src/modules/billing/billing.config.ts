/** Billing's settings (`config.billing`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';
import { parseInt } from '../../platform/env.ts';

const PLANS = ['starter', 'growth', 'business'] as const;

export function billingConfig(env: EnvReader) {
  // A turn makes up to five model calls: the sweep waits at least ten of agents' LLM_TIMEOUT_MS.
  const llmTimeoutMs = Math.max(100, parseInt('LLM_TIMEOUT_MS', env.peek('LLM_TIMEOUT_MS'), 60_000));
  return {
    /** Live payments through Stripe; unset → live-mode billing calls are PAYMENT_REQUIRED (no provider). */
    stripeSecretKey: env.string('STRIPE_SECRET_KEY', 'live payments (Stripe); unset → live billing calls are 503 `SERVICE_UNAVAILABLE`'),
    /** Stripe's webhook signing secret (`whsec_…`) for `POST /v1/providers/stripe/callbacks`. */
    stripeWebhookSecret: env.string('STRIPE_WEBHOOK_SECRET', 'Stripe\'s webhook signing secret (`whsec_…`) for `POST /v1/providers/stripe/callbacks`'),
    /** Our plan price ids → Stripe price ids (`STRIPE_PRICE_STARTER`, …). */
    stripePrices: Object.fromEntries(PLANS.flatMap((plan) => {
      const id = env.string(`STRIPE_PRICE_${plan.toUpperCase()}`, `Stripe price id of our \`price_${plan}_monthly\``);
      return id ? [[`price_${plan}_monthly`, id]] : [];
    })) as Record<string, string>,
    /** Checkout sessions expire after this (Stripe's minimum is 30 minutes). */
    checkoutTtlSeconds: env.int('BILLING_CHECKOUT_TTL_SECONDS', 1800, 'checkout sessions expire after this', { min: 60 }),
    /** Development and benches only: live mode uses the payments sandbox too. */
    liveSandbox: env.bool('BILLING_LIVE_SANDBOX', false, 'development and benches: live mode uses the payments sandbox'),
    sandbox: {
      webhookDeliveries: env.int('SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES', 2, 'how often the payments sandbox delivers each webhook', { min: 1 }),
      webhookLatencyMs: env.int('SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS', 50, 'how late the payments sandbox delivers each webhook'),
    },
    /**
     * A credit reservation still open after this long is settled by the stale-reservation sweep the
     * way its owner says (an agent turn's is released; a message's by its status). Default: 10
     * minutes, or ten LLM_TIMEOUT_MS when that is longer (a turn makes up to five model calls).
     */
    staleReservationSeconds: env.int('BILLING_STALE_RESERVATION_SECONDS', Math.max(600, Math.ceil((10 * llmTimeoutMs) / 1000)),
      'a credit reservation still open this long is settled by the stale-reservation sweep (see Billing); keep it above an agent turn\'s longest run',
      { min: 1, shown: '`600`, or ten `LLM_TIMEOUT_MS` when longer' }),
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { billing: ReturnType<typeof billingConfig> }
}
