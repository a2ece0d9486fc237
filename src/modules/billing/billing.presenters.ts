/** REST shapes of the billing records (the spec's field names). */
import type { BillingAccount, Invoice } from './billing.entities.ts';
import { planById, type PlanRecord } from './billing.plans.ts';
import type { CheckoutResult } from './billing.service.ts';
import type { TopUpResult } from './credits.service.ts';
import { invoicePdfPath } from './invoices.service.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentPlan(p: PlanRecord) {
  return { id: p.id, name: p.name, price_id: p.price_id, price_monthly: p.price_monthly, currency: p.currency, features: p.features };
}

export function paymentMethodOf(a: BillingAccount) {
  return a.paymentMethodId ? { type: 'card', last4: a.paymentMethodLast4 ?? null, brand: a.paymentMethodBrand ?? null } : null;
}

export function presentSubscription(a: BillingAccount) {
  return {
    plan_id: a.planId, name: planById(a.planId)?.name ?? a.planId, status: a.status,
    current_period_start: iso(a.currentPeriodStart), current_period_end: iso(a.currentPeriodEnd),
    cancel_at_period_end: a.cancelAtPeriodEnd, payment_method: paymentMethodOf(a),
  };
}

export function presentCredits(a: BillingAccount) {
  return {
    balance: a.balance, currency: a.currency,
    auto_reload: { enabled: a.autoReloadEnabled, threshold: a.autoReloadThreshold, amount: a.autoReloadAmount },
    last_topped_up_at: iso(a.lastToppedUpAt),
  };
}

/**
 * The spec names the answer's field `checkoutUrl`: every field is given in that style, and each
 * with its snake_case twin, as the rest of the API spells them (the same values).
 */
export function presentCheckout(c: CheckoutResult) {
  const expiresAt = c.expiresAt.toISOString();
  return { checkoutUrl: c.checkoutUrl, sessionId: c.sessionId, expiresAt, checkout_url: c.checkoutUrl, session_id: c.sessionId, expires_at: expiresAt };
}

export function presentTopUp(t: TopUpResult) {
  return { balance: t.balance, topped_up: t.toppedUp, currency: t.currency, payment_id: t.paymentId };
}

export function presentInvoice(i: Invoice) {
  return {
    id: i.id, number: i.number, amount: i.amount, currency: i.currency, status: i.status,
    period_start: iso(i.periodStart), period_end: iso(i.periodEnd), pdf_url: invoicePdfPath(i.id), created_at: iso(i.createdAt),
    lines: i.lines,
  };
}
