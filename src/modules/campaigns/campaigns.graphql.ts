/** GraphQL twins of the campaign routes, and the `campaignProgress` subscription. */
import { builder } from '../../graphql/builder.ts';
import { resourceNotices } from '../../graphql/live.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { patchWire, toWire } from '../../graphql/wire.ts';
import { READERS } from '../../platform/auth/roles.ts';
import { CAMPAIGN_CHANNELS, CAMPAIGN_STATUSES, type Campaign } from './campaigns.entities.ts';
import type { CampaignStats, Counters, OrganizationStats } from './campaigns.stats.ts';
import {
  campaignStatsOp, cancelCampaignOp, createCampaignOp, deleteCampaignOp, getCampaignOp, getCampaignWithStatsOp, listCampaignsOp,
  pauseCampaignOp, resumeCampaignOp, sendCampaignOp, updateCampaignOp,
} from './campaigns.operations.ts';
import { progressStream } from './campaigns.live.ts';

const StatusEnum = builder.enumType('CampaignStatus', { values: CAMPAIGN_STATUSES });
const ChannelEnum = builder.enumType('CampaignChannel', { values: CAMPAIGN_CHANNELS });

const CountersRef = builder.interfaceRef<Counters>('CampaignCounters').implement({
  description: 'Recipient counters of a campaign (or a variant, or the organization)',
  fields: (t) => ({
    recipients: t.exposeInt('recipients'), pending: t.exposeInt('pending'), sent: t.exposeInt('sent', { description: 'messages accepted' }),
    delivered: t.exposeInt('delivered'), read: t.exposeInt('read'), failed: t.exposeInt('failed', { description: 'refused at acceptance or failed on delivery' }),
    replied: t.exposeInt('replied'), skipped: t.exposeInt('skipped'), optedOut: t.int({ resolve: (c) => c.opted_out }),
    cancelled: t.exposeInt('cancelled'), segments: t.exposeInt('segments'),
    cost: t.exposeInt('cost', { description: 'charged to the credit balance for these messages, less releases (minor units; 0 in test mode)' }),
    skippedByReason: t.field({ type: 'JSON', description: 'opted_out, no_address, invalid, frequency_cap', resolve: (c) => c.skipped_by_reason }),
    waitingByReason: t.field({ type: 'JSON', description: 'paced, quiet_hours_deferred, ab_test_winner, paused', resolve: (c) => c.waiting_by_reason }),
    failedByReason: t.field({ type: 'JSON', description: 'error code (or delivery_failed) → count', resolve: (c) => c.failed_by_reason }),
  }),
});

const VariantStatsRef = builder.objectRef<{ name: string } & Counters>('CampaignVariantStats').implement({
  interfaces: [CountersRef], isTypeOf: () => true,
  fields: (t) => ({ name: t.exposeString('name') }),
});
const CampaignStatsRef = builder.objectRef<CampaignStats>('CampaignStats').implement({
  interfaces: [CountersRef], isTypeOf: () => true,
  fields: (t) => ({ variants: t.field({ type: [VariantStatsRef], resolve: (s) => s.variants }), currency: t.exposeString('currency') }),
});
const OrgStatsRef = builder.objectRef<OrganizationStats>('CampaignOrganizationStats').implement({
  interfaces: [CountersRef], isTypeOf: () => true,
  fields: (t) => ({
    campaigns: t.exposeInt('campaigns'),
    currency: t.exposeString('currency'),
    campaignsByStatus: t.field({ type: 'JSON', resolve: (s) => s.campaigns_by_status }),
  }),
});

const CampaignRef = builder.node(builder.objectRef<Campaign>('Campaign'), {
  id: { resolve: (c) => c.id },
  loadOne: (id, ctx) => run(getCampaignOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    channel: t.field({ type: ChannelEnum, resolve: (c) => c.channel }),
    segmentId: t.string({ nullable: true, resolve: (c) => c.segmentId ?? null }),
    listId: t.string({ nullable: true, resolve: (c) => c.listId ?? null }),
    templateId: t.string({ nullable: true, resolve: (c) => c.templateId ?? null }),
    templateVariables: t.field({ type: 'JSON', resolve: (c) => c.templateVariables }),
    body: t.string({ nullable: true, resolve: (c) => c.body ?? null }),
    subject: t.string({ nullable: true, resolve: (c) => c.subject ?? null }),
    from: t.string({ nullable: true, resolve: (c) => c.from ?? null }),
    scheduledAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.scheduledAt ?? null }),
    abTest: t.field({ type: 'JSON', nullable: true, resolve: (c) => c.abTest ?? null }),
    quietHours: t.field({ type: 'JSON', nullable: true, resolve: (c) => c.quietHours ?? null }),
    frequencyCap: t.field({ type: 'JSON', nullable: true, resolve: (c) => c.frequencyCap ?? null }),
    status: t.field({ type: StatusEnum, resolve: (c) => c.status }),
    pauseReason: t.string({ nullable: true, resolve: (c) => c.pauseReason ?? null }),
    winnerVariant: t.string({ nullable: true, resolve: (c) => c.winnerVariant ?? null }),
    audienceCount: t.int({ nullable: true, resolve: (c) => c.audienceCount ?? null }),
    stats: t.field({ type: CampaignStatsRef, description: 'Live progress', resolve: async (c, _a, ctx) => (await run(getCampaignWithStatsOp, ctx, { id: c.id })).stats }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    startedAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.startedAt ?? null }),
    pausedAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.pausedAt ?? null }),
    completedAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.completedAt ?? null }),
    cancelledAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => c.cancelledAt ?? null }),
  }),
});

const CreateCampaignInput = builder.inputType('CreateCampaignInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    channel: t.field({ type: ChannelEnum, required: true }),
    segmentId: t.string({ required: false }),
    listId: t.string({ required: false }),
    templateId: t.string({ required: false }),
    templateVariables: t.field({ type: 'JSON', required: false, description: 'variable → value; {{contact.<field>}} is filled per recipient' }),
    body: t.string({ required: false }),
    subject: t.string({ required: false, description: 'email campaigns' }),
    from: t.string({ required: false }),
    scheduledAt: t.string({ required: false, description: 'ISO 8601; in the future moves the campaign to scheduled' }),
    abTest: t.field({ type: 'JSON', required: false, description: '{ variants: [{ name, body | template_id, weight }], winner?: { metric, after_minutes, test_percent } }' }),
    quietHours: t.field({ type: 'JSON', required: false, description: '{ start: "HH:MM", end: "HH:MM", timezone? }' }),
    frequencyCap: t.field({ type: 'JSON', required: false, description: '{ max_messages, period_hours }' }),
  }),
});
const UpdateCampaignInput = builder.inputType('UpdateCampaignInput', {
  description: 'An omitted field is left as it is; null clears it (scheduledAt null moves a scheduled campaign back to draft).',
  fields: (t) => ({
    name: t.string({ required: false }),
    segmentId: t.string({ required: false }),
    listId: t.string({ required: false }),
    templateId: t.string({ required: false }),
    templateVariables: t.field({ type: 'JSON', required: false }),
    body: t.string({ required: false }),
    subject: t.string({ required: false }),
    from: t.string({ required: false }),
    scheduledAt: t.string({ required: false }),
    abTest: t.field({ type: 'JSON', required: false }),
    quietHours: t.field({ type: 'JSON', required: false }),
    frequencyCap: t.field({ type: 'JSON', required: false }),
  }),
});

/** JSON-typed inputs are already snake_case objects (as on REST); the rest is converted. */
function wire(input: Record<string, unknown>, patch: boolean): Record<string, unknown> {
  const out = patch ? patchWire(input) : (toWire(input) as Record<string, unknown>);
  for (const k of ['template_variables', 'ab_test', 'quiet_hours', 'frequency_cap']) {
    const camel = k.replace(/_(.)/g, (_m, ch: string) => ch.toUpperCase());
    if (input[camel] !== undefined) out[k] = input[camel];
  }
  return out;
}

builder.queryFields((t) => ({
  campaigns: t.connection({
    type: CampaignRef, ...guard('Query', 'campaigns', listCampaignsOp),
    args: { search: t.arg.string({ required: false }), status: t.arg({ type: StatusEnum, required: false }), channel: t.arg({ type: ChannelEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listCampaignsOp, ctx, { ...pageRequest(args), search: args.search, status: args.status, channel: args.channel })),
  }),
  campaign: t.field({
    type: CampaignRef, ...guard('Query', 'campaign', getCampaignOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getCampaignOp, ctx, { id: String(args.id) }),
  }),
  campaignStats: t.field({
    type: OrgStatsRef, ...guard('Query', 'campaignStats', campaignStatsOp),
    resolve: (_r, _a, ctx) => run(campaignStatsOp, ctx, {}),
  }),
}));

builder.mutationFields((t) => ({
  createCampaign: t.field({
    type: CampaignRef, ...guard('Mutation', 'createCampaign', createCampaignOp),
    args: { input: t.arg({ type: CreateCampaignInput, required: true }) },
    resolve: (_r, args, ctx) => run(createCampaignOp, ctx, wire(args.input as Record<string, unknown>, false)),
  }),
  updateCampaign: t.field({
    type: CampaignRef, ...guard('Mutation', 'updateCampaign', updateCampaignOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateCampaignInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateCampaignOp, ctx, { ...wire(args.input as Record<string, unknown>, true), id: String(args.id) }),
  }),
  deleteCampaign: t.id({
    ...guard('Mutation', 'deleteCampaign', deleteCampaignOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(deleteCampaignOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
  sendCampaign: t.field({
    type: CampaignRef, ...guard('Mutation', 'sendCampaign', sendCampaignOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(sendCampaignOp, ctx, { id: String(args.id) }),
  }),
  pauseCampaign: t.field({
    type: CampaignRef, ...guard('Mutation', 'pauseCampaign', pauseCampaignOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(pauseCampaignOp, ctx, { id: String(args.id) }),
  }),
  resumeCampaign: t.field({
    type: CampaignRef, ...guard('Mutation', 'resumeCampaign', resumeCampaignOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(resumeCampaignOp, ctx, { id: String(args.id) }),
  }),
  cancelCampaign: t.field({
    type: CampaignRef, ...guard('Mutation', 'cancelCampaign', cancelCampaignOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(cancelCampaignOp, ctx, { id: String(args.id) }),
  }),
}));

builder.subscriptionFields((t) => ({
  campaignProgress: t.field({
    type: CampaignRef, ...guard('Subscription', 'campaignProgress', { endpoint: 'GET /v1/campaigns/{id}', roles: READERS }),
    description: 'The campaign (with stats) now, then on each change of its progress until it completes or is cancelled.',
    args: { id: t.arg.id({ required: true }) },
    subscribe: (_r, args, ctx) => {
      const id = String(args.id);
      const notices = resourceNotices(ctx, id);
      return progressStream(notices, () => run(getCampaignWithStatsOp, ctx, { id }),
        (v) => JSON.stringify([v.campaign.status, v.stats]), (v) => v.campaign.status === 'completed' || v.campaign.status === 'cancelled');
    },
    resolve: (v) => v.campaign,
  }),
}));
