/** The /v1/billing routes. */
import { PAGE_QUERY, pageQuery, route, type RawResponse } from '../../rest/route.ts';
import type { PlanRecord } from './billing.plans.ts';
import {
  autoReloadOp, changePlanOp, checkoutOp, creditsOp, currentPlanOp, getInvoiceOp, invoicePdfOp, listInvoicesOp, listPlansOp, topUpOp, usageHistoryOp, usageOp,
} from './billing.operations.ts';
import { presentCheckout, presentCredits, presentInvoice, presentPlan, presentSubscription, presentTopUp } from './billing.presenters.ts';

export const billingRoutes = [
  route({ method: 'GET', path: '/v1/billing/plans', operation: listPlansOp, output: (plans: readonly PlanRecord[]) => plans.map(presentPlan) }),
  route({ method: 'GET', path: '/v1/billing/plan', operation: currentPlanOp, output: presentSubscription }),
  route({ method: 'PUT', path: '/v1/billing/plan', operation: changePlanOp, input: (r) => r.body, output: presentSubscription, errors: ['PAYMENT_REQUIRED', 'SUBSCRIPTION_INACTIVE'] }),
  route({ method: 'POST', path: '/v1/billing/checkout', operation: checkoutOp, input: (r) => r.body, output: presentCheckout }),
  route({ method: 'GET', path: '/v1/billing/credits', operation: creditsOp, output: presentCredits }),
  route({ method: 'POST', path: '/v1/billing/credits/topup', operation: topUpOp, input: (r) => r.body, output: presentTopUp }),
  route({ method: 'PUT', path: '/v1/billing/credits/auto-reload', operation: autoReloadOp, input: (r) => r.body, output: presentCredits }),
  route({ method: 'GET', path: '/v1/billing/usage', operation: usageOp }),
  route({
    method: 'GET', path: '/v1/billing/usage/history', operation: usageHistoryOp, query: ['start_date', 'end_date', 'granularity'],
    input: (r) => r.query,
  }),
  route({
    method: 'GET', path: '/v1/billing/invoices', operation: listInvoicesOp, query: PAGE_QUERY,
    input: (r) => pageQuery(r.query), paginated: true, output: presentInvoice,
  }),
  route({ method: 'GET', path: '/v1/billing/invoices/{id}', operation: getInvoiceOp, input: (r) => r.params, output: presentInvoice, resource: 'inv' }),
  route({
    method: 'GET', path: '/v1/billing/invoices/{id}/pdf', operation: invoicePdfOp, input: (r) => r.params, resource: 'inv',
    output: (r: { number: string; pdf: Buffer }): RawResponse => ({
      raw: true, status: 200, contentType: 'application/pdf', body: r.pdf,
      headers: { 'Content-Disposition': `inline; filename="${r.number}.pdf"`, 'Cache-Control': 'private, max-age=31536000, immutable' },
    }),
  }),
];
