/**
 * Billing: plans, checkout through the payments provider (Stripe live, the sandbox for test-mode
 * keys), provider webhooks, the credit ledger with auto-reload, usage reads and invoices. Offers
 * the `credits` port (reserve, capture, release) for paid sends; settles reservations left open
 * past BILLING_STALE_RESERVATION_SECONDS by asking their owners (optional ports `messageCharges`,
 * `agentCharges`, `callCharges`; reservations.sweep.ts).
 */
import { SANDBOX_CHECKOUT_PAGE, SANDBOX_PAYMENTS, SandboxPaymentsProvider } from '../../providers/payments/sandbox.ts';
import { STRIPE, StripePaymentsProvider } from '../../providers/payments/stripe.ts';
import type { PaymentsProvider } from '../../providers/payments/types.ts';
import { defineModule } from '../manifest.ts';
import { BILLING_COMMANDS } from './billing.commands.ts';
import { billingConfig } from './billing.config.ts';
import { BillingAccount, CheckoutSessionRecord, CreditLedgerEntry, Invoice } from './billing.entities.ts';
import { BILLING_EVENTS } from './billing.ports.ts';
import { BillingService } from './billing.service.ts';
import { CreditsService } from './credits.service.ts';
import { UsageService } from './usage.service.ts';
import { InvoicesService } from './invoices.service.ts';
import { CURRENCY, priceOf } from './billing.plans.ts';
import { QuotasService } from './quotas.service.ts';
import { StaleReservationSweep } from './reservations.sweep.ts';
import { registerBillingJobs } from './billing.jobs.ts';
import { billingRoutes } from './billing.rest.ts';
import { handleCheckoutPage, renderCheckoutPage } from './billing.checkoutPage.ts';
import type { BillingServices } from './billing.operations.ts';
import './billing.graphql.ts';

type Services = BillingServices & { paymentsSandbox: SandboxPaymentsProvider; quotas: QuotasService; reservationSweep: StaleReservationSweep };

/** The usage unit a message of `channel` is priced by (as messaging records its usage). */
const UNIT_OF_CHANNEL: Readonly<Record<string, string>> = { sms: 'sms.segment', email: 'email.recipient', whatsapp: 'whatsapp.message', rcs: 'rcs.message', viber: 'viber.message' };

/** Billing's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { cle: 'CreditLedgerEntry', inv: 'Invoice' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

/** Billing's error codes (the manifest's `errors`); `ServiceError` accepts them by the derived augmentation. */
const errors = {
  PAYMENT_REQUIRED: { status: 402, message: 'A valid payment method is required' },
  SUBSCRIPTION_INACTIVE: { status: 403, message: 'Subscription is paused or cancelled' },
  INSUFFICIENT_CREDITS: { status: 402, message: 'Credit balance is too low' },
  CHECKOUT_EXPIRED: { status: 410, message: 'Checkout session expired' },
} as const;
declare module '../../platform/errors.ts' {
  interface ModuleErrorCodes extends Readonly<typeof errors> {}
}

export const billingModule = defineModule({
  name: 'billing',
  commands: BILLING_COMMANDS,
  config: billingConfig,
  entities: [BillingAccount, CreditLedgerEntry, CheckoutSessionRecord, Invoice],
  ids,
  errors,
  events: BILLING_EVENTS,
  // The owners of reservations the stale-reservation sweep asks (reservations.sweep.ts).
  optional: ['messageCharges', 'agentCharges', 'callCharges'],
  create: (p, ports): Services => {
    const cfg = p.config.billing;
    const sandbox = new SandboxPaymentsProvider({
      clock: p.clock, webhookSecret: p.config.providerSecret('payments_sandbox'), baseUrl: p.config.publicBaseUrl,
      deliveries: cfg.sandbox.webhookDeliveries, latencyMs: cfg.sandbox.webhookLatencyMs,
    });
    const stripe = cfg.stripeSecretKey && cfg.stripeWebhookSecret
      ? new StripePaymentsProvider({ secretKey: cfg.stripeSecretKey, webhookSecret: cfg.stripeWebhookSecret, prices: cfg.stripePrices })
      : undefined;
    const payments = (mode: 'live' | 'test'): PaymentsProvider | undefined => (mode === 'test' || cfg.liveSandbox ? sandbox : stripe);
    const credits = new CreditsService({ orm: p.orm, clock: p.clock, jobs: p.jobs, payments, staleReservationMs: cfg.staleReservationSeconds * 1000 });
    const reservationSweep = new StaleReservationSweep({
      orm: p.orm, clock: p.clock, credits,
      owners: [{ prefix: 'msg_', port: ports.optional('messageCharges') }, { prefix: 'agent_turn:', port: ports.optional('agentCharges') }, { prefix: 'call:', port: ports.optional('callCharges') }],
    });
    const billing = new BillingService({
      orm: p.orm, clock: p.clock, credits, payments, providers: [sandbox, ...(stripe ? [stripe] : [])],
      checkoutTtlSeconds: cfg.checkoutTtlSeconds, authChanged: () => p.authChanged(),
    });
    sandbox.deliverTo((raw, signature) => billing.handleWebhook(SANDBOX_PAYMENTS, raw, signature));
    const usage = new UsageService({ orm: p.orm, credits });
    return { billing, credits, usage, quotas: new QuotasService({ clock: p.clock, credits, usage }), invoices: new InvoicesService({ orm: p.orm, clock: p.clock, cursors: p.cursors, usage }), paymentsSandbox: sandbox, reservationSweep };
  },
  provides: (s) => ({
    credits: {
      chargesLive: () => s.credits.chargesLive(),
      priceOf: (scope, unit, quantity) => priceOf(scope.plan, unit, quantity),
      reserve: (scope, input, em) => s.credits.reserve(scope, input, em),
      assertCovers: (scope, amount) => s.credits.assertCovers(scope, amount),
      reserveMany: (scope, items, em) => s.credits.reserveMany(scope, items, em),
      capture: (tenant, id, em, keep) => s.credits.capture(tenant, id, em, keep),
      stateOf: (tenant, id, em) => s.credits.stateOf(tenant, id, em),
      settleByKey: (tenant, key, kind) => s.credits.settleByKey(tenant, key, kind),
      chargesOf: (tenant, keys) => s.credits.chargesOf(tenant, keys),
      sendReservations: s.credits.sendReservations,
      reserveSend: (scope, input, em) => s.credits.reserveSend(scope, input, em),
      takePool: (scope, quota, units, em) => s.credits.takePoolAt(scope, quota, units, em),
      returnPool: (tenant, quota, period, units, em) => s.credits.returnPool(tenant, quota, period, units, em),
      release: (tenant, id, em) => s.credits.release(tenant, id, em),
    },
    campaignCredits: {
      charge: async (scope, messages, tx) => {
        if (scope.mode === 'test' || messages.length === 0) return messages.length;
        // The plan's included messages first (1 per message, 1 per email recipient), in order; credits for the rest.
        const pooled = await s.credits.takePool(scope, 'messages', messages.map((m) => (m.channel === 'email' ? m.units : 1)), tx);
        const items = messages.slice(pooled).map((m) => ({ amount: priceOf(scope.plan, UNIT_OF_CHANNEL[m.channel] ?? `${m.channel}.message`, m.units), key: m.messageId, referenceId: m.messageId }));
        const reserved = await s.credits.reserveMany(scope, items, tx);
        const short = reserved.indexOf(null);
        return pooled + (short === -1 ? reserved.length : short);
      },
      costByGroup: async (tenant, ids, groups) => ({ currency: CURRENCY, byGroup: await s.credits.costByGroup(tenant, ids, groups) }),
    },
    planQuotas: {
      check: (scope, quota, quantity) => s.quotas.check(scope, quota, quantity),
      remaining: (scope, quota, em) => s.quotas.remaining(scope, quota, em),
      checkAgents: (scope, existing) => s.quotas.checkAgents(scope, existing),
    },
  }),
  routes: billingRoutes,
  jobs: (registry, s) => registerBillingJobs(registry, { credits: s.credits, invoices: s.invoices, reservationSweep: s.reservationSweep }),
  callbacks: (s) => ({
    [SANDBOX_PAYMENTS]: (_provider, raw, signature) => s.billing.handleWebhook(SANDBOX_PAYMENTS, raw, signature),
    [STRIPE]: (_provider, raw, signature) => s.billing.handleWebhook(STRIPE, raw, signature),
    [SANDBOX_CHECKOUT_PAGE]: (_provider, raw) => handleCheckoutPage(s.billing, s.paymentsSandbox, raw),
  }),
  pages: (s) => ({
    [SANDBOX_CHECKOUT_PAGE]: (_provider, query) => renderCheckoutPage(s.billing, s.paymentsSandbox, query),
  }),
  close: async (s) => {
    s.paymentsSandbox.close();
  },
});
