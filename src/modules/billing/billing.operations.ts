/**
 * The billing use cases as operations. Role matrix (README, Billing): everyone may read the plan
 * catalog; owners, admins and the billing role read the subscription, credits, usage and invoices;
 * only owners and the billing role manage billing (checkout, top-up, auto-reload); only owners
 * change the plan of a subscription.
 */
import { limitsRow } from '../../platform/ratelimit/plans.ts';
import { operationsOf } from '../../context.ts';
import { BILLING_ROLES, EVERY_ROLE, type Role } from '../../platform/auth/roles.ts';
import { idInput } from '../../platform/inputs.ts';
import { z } from 'zod';
import type { BillingService } from './billing.service.ts';
import type { CreditsService } from './credits.service.ts';
import type { InvoicesService } from './invoices.service.ts';
import type { UsageService } from './usage.service.ts';
import { autoReloadInput, changePlanInput, checkoutInput, listInvoicesInput, topUpInput, usageHistoryInput } from './billing.schemas.ts';

export type BillingServices = { billing: BillingService; credits: CreditsService; usage: UsageService; invoices: InvoicesService };
const op = operationsOf<BillingServices>('billing');

/** Who manages billing: owners and the billing role. */
export const BILLING_MANAGERS: readonly Role[] = ['owner', 'billing'];
/** Who reads billing: owners, admins and the billing role. */
/** Every `GET /v1/billing/*` has this row (the specification lists it with a wildcard). */
const BILLING_READ = limitsRow(60, 60, 90, 120);
export const BILLING_READERS: readonly Role[] = BILLING_ROLES;

const none = z.object({});

export const listPlansOp = op({
  name: 'billing.plans', endpoint: 'GET /v1/billing/plans', limits: BILLING_READ, roles: EVERY_ROLE, input: none,
  run: async (_ctx, _input, s) => s.billing.plans(),
});
export const currentPlanOp = op({
  name: 'billing.plan', endpoint: 'GET /v1/billing/plan', limits: BILLING_READ, roles: BILLING_READERS, input: none,
  run: (ctx, _input, s) => s.billing.current(ctx.scope),
});
/** Who changes the plan of a subscription: owners only. */
export const PLAN_CHANGERS: readonly Role[] = ['owner'];
export const changePlanOp = op({
  name: 'billing.changePlan', endpoint: 'PUT /v1/billing/plan', roles: PLAN_CHANGERS, input: changePlanInput,
  run: (ctx, input, s) => s.billing.changePlan(ctx.scope, input),
});
export const checkoutOp = op({
  name: 'billing.checkout', endpoint: 'POST /v1/billing/checkout', roles: BILLING_MANAGERS, input: checkoutInput,
  run: (ctx, input, s) => s.billing.checkout(ctx.scope, input),
});
export const creditsOp = op({
  name: 'billing.credits', endpoint: 'GET /v1/billing/credits', limits: BILLING_READ, roles: BILLING_READERS, input: none,
  run: (ctx, _input, s) => s.credits.account(ctx.scope),
});
export const topUpOp = op({
  name: 'billing.topUp', endpoint: 'POST /v1/billing/credits/topup', roles: BILLING_MANAGERS, input: topUpInput,
  run: (ctx, input, s) => s.credits.topUp(ctx.scope, input.amount),
});
export const autoReloadOp = op({
  name: 'billing.autoReload', endpoint: 'PUT /v1/billing/credits/auto-reload', roles: BILLING_MANAGERS, input: autoReloadInput,
  run: (ctx, input, s) => s.credits.setAutoReload(ctx.scope, input),
});
export const usageOp = op({
  name: 'billing.usage', endpoint: 'GET /v1/billing/usage', limits: BILLING_READ, roles: BILLING_READERS, input: none,
  run: (ctx, _input, s) => s.usage.current(ctx.scope),
});
export const usageHistoryOp = op({
  name: 'billing.usageHistory', endpoint: 'GET /v1/billing/usage/history', limits: BILLING_READ, roles: BILLING_READERS, input: usageHistoryInput,
  run: (ctx, input, s) => s.usage.history(ctx.scope, input),
});
export const listInvoicesOp = op({
  name: 'billing.invoices', endpoint: 'GET /v1/billing/invoices', limits: BILLING_READ, roles: BILLING_READERS, input: listInvoicesInput,
  run: (ctx, input, s) => s.invoices.list(ctx.scope, input),
});
export const getInvoiceOp = op({
  name: 'billing.invoice', endpoint: 'GET /v1/billing/invoices/{id}', limits: BILLING_READ, roles: BILLING_READERS, input: idInput,
  run: (ctx, input, s) => s.invoices.get(ctx.scope, input.id),
});
export const invoicePdfOp = op({
  name: 'billing.invoicePdf', endpoint: 'GET /v1/billing/invoices/{id}/pdf', limits: BILLING_READ, roles: BILLING_READERS, input: idInput,
  run: (ctx, input, s) => s.invoices.pdf(ctx.scope, input.id),
});
