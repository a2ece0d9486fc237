/** Access fixtures of the billing module: plans, credits, usage and invoices (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

export default defineAccessFixtures(({ t, a }) => ({
  fixtures: {
    inv: async () => {
      // Closes tenant A's current billing period: one invoice.
      const period = (await t.rest('GET', '/v1/billing/plan', { key: a.testKey })).body.data;
      return (await t.app.services.invoices.closePeriod({ organizationId: a.orgId, mode: 'test' }, new Date(period.current_period_start), new Date(period.current_period_end)))!;
    },
  },
  restBodies: {
    'PUT /v1/billing/plan': { plan_id: 'growth' },
    'POST /v1/billing/checkout': { priceId: 'price_growth_monthly', successUrl: 'https://example.com/ok', cancelUrl: 'https://example.com/no' },
    'POST /v1/billing/credits/topup': { amount: 1000 },
    'PUT /v1/billing/credits/auto-reload': { enabled: false },
  },
  gqlSamples: {
    'Query.billingPlans': { doc: '{ billingPlans { id } }' },
    'Query.billingPlan': { doc: '{ billingPlan { planId status } }' },
    'Query.credits': { doc: '{ credits { balance } }' },
    'Query.billingUsage': { doc: '{ billingUsage { voiceMinutesUsed } }' },
    'Query.billingUsageHistory': { doc: '{ billingUsageHistory(startDate: "2026-01-01", endDate: "2026-01-02") { messagesTotal } }' },
    'Query.invoices': { doc: '{ invoices(first: 1) { edges { cursor } } }' },
    'Mutation.changePlan': { doc: 'mutation { changePlan(planId: "growth") { planId } }' },
    'Mutation.createCheckout': { doc: 'mutation { createCheckout(input: { priceId: "price_growth_monthly", successUrl: "https://example.com/ok", cancelUrl: "https://example.com/no" }) { checkoutUrl } }' },
    'Mutation.topUpCredits': { doc: 'mutation { topUpCredits(amount: 1000) { balance } }' },
    'Mutation.setAutoReload': { doc: 'mutation { setAutoReload(input: { enabled: false }) { balance } }' },
  },
}));
