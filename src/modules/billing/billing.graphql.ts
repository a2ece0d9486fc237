/** GraphQL twins of the billing routes, run through the same operations. */
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import type { BillingAccount, Invoice, InvoiceLine } from './billing.entities.ts';
import { SUBSCRIPTION_STATUSES } from './billing.entities.ts';
import type { PlanFeatures, PlanRecord, Quota } from './billing.plans.ts';
import type { CheckoutResult } from './billing.service.ts';
import type { TopUpResult } from './credits.service.ts';
import type { CurrentUsage, UsageBucket } from './usage.service.ts';
import { MESSAGE_CHANNELS } from './usage.service.ts';
import {
  autoReloadOp, changePlanOp, checkoutOp, creditsOp, currentPlanOp, getInvoiceOp, listInvoicesOp, listPlansOp, topUpOp, usageHistoryOp, usageOp,
} from './billing.operations.ts';
import { invoicePdfPath } from './invoices.service.ts';
import { paymentMethodOf } from './billing.presenters.ts';

const quota = (q: Quota) => (q === 'unlimited' ? null : q);
const QUOTA_NOTE = 'null: unlimited';

const SubscriptionStatusEnum = builder.enumType('SubscriptionStatus', { values: SUBSCRIPTION_STATUSES });
const UsageGranularityEnum = builder.enumType('UsageGranularity', { values: ['day', 'month'] as const });

const PlanFeaturesRef = builder.objectRef<PlanFeatures>('PlanFeatures').implement({
  fields: (t) => ({
    messagesIncluded: t.int({ nullable: true, description: QUOTA_NOTE, resolve: (f) => quota(f.messages_included) }),
    channels: t.exposeStringList('channels'),
    agents: t.int({ nullable: true, description: QUOTA_NOTE, resolve: (f) => quota(f.agents) }),
    voiceMinutes: t.int({ nullable: true, description: QUOTA_NOTE, resolve: (f) => quota(f.voice_minutes) }),
    support: t.exposeString('support'),
  }),
});

const BillingPlanRef = builder.objectRef<PlanRecord>('BillingPlan').implement({
  fields: (t) => ({
    id: t.exposeString('id'),
    name: t.exposeString('name'),
    priceId: t.exposeString('price_id'),
    priceMonthly: t.float({ nullable: true, description: 'Major units; null: custom pricing', resolve: (p) => p.price_monthly }),
    currency: t.exposeString('currency'),
    features: t.field({ type: PlanFeaturesRef, resolve: (p) => p.features }),
  }),
});

type Card = { type: string; last4: string | null; brand: string | null };
const PaymentMethodRef = builder.objectRef<Card>('PaymentMethod').implement({
  fields: (t) => ({
    type: t.exposeString('type'),
    last4: t.string({ nullable: true, resolve: (c) => c.last4 }),
    brand: t.string({ nullable: true, resolve: (c) => c.brand }),
  }),
});

const SubscriptionRef = builder.objectRef<BillingAccount>('BillingSubscription').implement({
  fields: (t) => ({
    planId: t.exposeString('planId'),
    status: t.field({ type: SubscriptionStatusEnum, resolve: (a) => a.status }),
    currentPeriodStart: t.expose('currentPeriodStart', { type: 'DateTime' }),
    currentPeriodEnd: t.expose('currentPeriodEnd', { type: 'DateTime' }),
    cancelAtPeriodEnd: t.exposeBoolean('cancelAtPeriodEnd'),
    paymentMethod: t.field({ type: PaymentMethodRef, nullable: true, resolve: (a) => paymentMethodOf(a) }),
  }),
});

const AutoReloadRef = builder.objectRef<BillingAccount>('AutoReload').implement({
  fields: (t) => ({
    enabled: t.exposeBoolean('autoReloadEnabled'),
    threshold: t.int({ resolve: (a) => a.autoReloadThreshold }),
    amount: t.int({ resolve: (a) => a.autoReloadAmount }),
  }),
});

const CreditsRef = builder.objectRef<BillingAccount>('Credits').implement({
  fields: (t) => ({
    balance: t.int({ description: 'Smallest currency unit', resolve: (a) => a.balance }),
    currency: t.exposeString('currency'),
    autoReload: t.field({ type: AutoReloadRef, resolve: (a) => a }),
    lastToppedUpAt: t.field({ type: 'DateTime', nullable: true, resolve: (a) => a.lastToppedUpAt ?? null }),
  }),
});

const TopUpRef = builder.objectRef<TopUpResult>('CreditTopUp').implement({
  fields: (t) => ({
    balance: t.exposeInt('balance'),
    toppedUp: t.exposeInt('toppedUp'),
    currency: t.exposeString('currency'),
    paymentId: t.exposeString('paymentId'),
  }),
});

const CheckoutRef = builder.objectRef<CheckoutResult>('CheckoutSession').implement({
  fields: (t) => ({
    checkoutUrl: t.exposeString('checkoutUrl'),
    sessionId: t.exposeString('sessionId'),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
  }),
});

type ChannelUsage = { channel: string; sent: number; included: Quota };
const ChannelUsageRef = builder.objectRef<ChannelUsage>('ChannelUsage').implement({
  fields: (t) => ({
    channel: t.exposeString('channel'),
    sent: t.exposeInt('sent'),
    included: t.int({ nullable: true, description: `Shared across channels; ${QUOTA_NOTE}`, resolve: (c) => quota(c.included) }),
  }),
});

const UsageRef = builder.objectRef<CurrentUsage>('BillingUsage').implement({
  fields: (t) => ({
    periodStart: t.field({ type: 'DateTime', resolve: (u) => new Date(u.billing_period.start) }),
    periodEnd: t.field({ type: 'DateTime', resolve: (u) => new Date(u.billing_period.end) }),
    messages: t.field({ type: [ChannelUsageRef], resolve: (u) => MESSAGE_CHANNELS.map((c) => ({ channel: c, ...u.messages[c] })) }),
    voiceMinutesUsed: t.int({ resolve: (u) => u.voice.minutes_used }),
    voiceMinutesIncluded: t.int({ nullable: true, description: QUOTA_NOTE, resolve: (u) => quota(u.voice.minutes_included) }),
    agentInvocations: t.int({ resolve: (u) => u.agents.invocations }),
    agentInvocationsIncluded: t.int({ nullable: true, description: QUOTA_NOTE, resolve: (u) => quota(u.agents.invocations_included) }),
  }),
});

const UsageBucketRef = builder.objectRef<UsageBucket>('UsageBucket').implement({
  fields: (t) => ({
    start: t.field({ type: 'DateTime', resolve: (b) => new Date(b.start) }),
    end: t.field({ type: 'DateTime', resolve: (b) => new Date(b.end) }),
    messages: t.field({ type: [ChannelUsageRef], resolve: (b) => MESSAGE_CHANNELS.map((c) => ({ channel: c, sent: b.messages[c], included: 'unlimited' as const })) }),
    messagesTotal: t.int({ resolve: (b) => b.messages.total }),
    smsSegments: t.exposeInt('sms_segments'),
    voiceMinutes: t.exposeInt('voice_minutes'),
    agentInvocations: t.exposeInt('agent_invocations'),
    verifications: t.exposeInt('verifications'),
  }),
});

const InvoiceLineRef = builder.objectRef<InvoiceLine>('InvoiceLine').implement({
  fields: (t) => ({
    kind: t.exposeString('kind', { description: 'plan, overage or topup' }),
    description: t.exposeString('description'),
    quantity: t.exposeInt('quantity'),
    unitAmount: t.exposeInt('unit_amount'),
    amount: t.exposeInt('amount'),
  }),
});

const InvoiceRef = builder.node(builder.objectRef<Invoice>('Invoice'), {
  id: { resolve: (i) => i.id },
  loadOne: (id, ctx) => run(getInvoiceOp, ctx, { id }),
  fields: (t) => ({
    number: t.exposeString('number'),
    amount: t.int({ description: 'Smallest currency unit', resolve: (i) => i.amount }),
    currency: t.exposeString('currency'),
    status: t.exposeString('status'),
    periodStart: t.expose('periodStart', { type: 'DateTime' }),
    periodEnd: t.expose('periodEnd', { type: 'DateTime' }),
    pdfUrl: t.string({ description: 'Served by this service to billing readers (same credentials)', resolve: (i) => invoicePdfPath(i.id) }),
    lines: t.field({ type: [InvoiceLineRef], resolve: (i) => i.lines }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const CheckoutInput = builder.inputType('CheckoutInput', {
  fields: (t) => ({
    priceId: t.string({ required: true }),
    successUrl: t.string({ required: true }),
    cancelUrl: t.string({ required: true }),
  }),
});

const AutoReloadInput = builder.inputType('AutoReloadInput', {
  fields: (t) => ({
    enabled: t.boolean({ required: true }),
    threshold: t.int({ required: false, description: 'Smallest currency unit' }),
    amount: t.int({ required: false, description: 'Smallest currency unit' }),
  }),
});

builder.queryFields((t) => ({
  billingPlans: t.field({
    type: [BillingPlanRef], ...guard('Query', 'billingPlans', listPlansOp),
    resolve: async (_r, _a, ctx) => [...(await run(listPlansOp, ctx, {}))],
  }),
  billingPlan: t.field({ type: SubscriptionRef, ...guard('Query', 'billingPlan', currentPlanOp), resolve: (_r, _a, ctx) => run(currentPlanOp, ctx, {}) }),
  credits: t.field({ type: CreditsRef, ...guard('Query', 'credits', creditsOp), resolve: (_r, _a, ctx) => run(creditsOp, ctx, {}) }),
  billingUsage: t.field({ type: UsageRef, ...guard('Query', 'billingUsage', usageOp), resolve: (_r, _a, ctx) => run(usageOp, ctx, {}) }),
  billingUsageHistory: t.field({
    type: [UsageBucketRef], ...guard('Query', 'billingUsageHistory', usageHistoryOp),
    args: {
      startDate: t.arg.string({ required: true, description: 'YYYY-MM-DD' }),
      endDate: t.arg.string({ required: true, description: 'YYYY-MM-DD, inclusive' }),
      granularity: t.arg({ type: UsageGranularityEnum, required: false }),
    },
    resolve: (_r, args, ctx) => run(usageHistoryOp, ctx, { start_date: args.startDate, end_date: args.endDate, granularity: args.granularity }),
  }),
  invoices: t.connection({
    type: InvoiceRef, ...guard('Query', 'invoices', listInvoicesOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listInvoicesOp, ctx, pageRequest(args))),
  }),
}));

builder.mutationFields((t) => ({
  changePlan: t.field({
    type: SubscriptionRef, ...guard('Mutation', 'changePlan', changePlanOp),
    description: 'Moves the subscription to another plan through its payment provider (owner only; needs a completed checkout)',
    args: { planId: t.arg.string({ required: true, description: 'starter, growth or business (enterprise: contact sales)' }) },
    resolve: (_r, args, ctx) => run(changePlanOp, ctx, { plan_id: args.planId }),
  }),
  createCheckout: t.field({
    type: CheckoutRef, ...guard('Mutation', 'createCheckout', checkoutOp),
    args: { input: t.arg({ type: CheckoutInput, required: true }) },
    resolve: (_r, args, ctx) => run(checkoutOp, ctx, args.input),
  }),
  topUpCredits: t.field({
    type: TopUpRef, ...guard('Mutation', 'topUpCredits', topUpOp),
    args: { amount: t.arg.int({ required: true, description: 'Smallest currency unit' }) },
    resolve: (_r, args, ctx) => run(topUpOp, ctx, { amount: args.amount }),
  }),
  setAutoReload: t.field({
    type: CreditsRef, ...guard('Mutation', 'setAutoReload', autoReloadOp),
    args: { input: t.arg({ type: AutoReloadInput, required: true }) },
    resolve: (_r, args, ctx) => run(autoReloadOp, ctx, args.input),
  }),
}));
