/** GraphQL twins of the webhook routes, and the live subscriptions: events, webhookDeliveries. */
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { toWire } from '../../graphql/wire.ts';
import { BUILDERS } from '../../platform/auth/roles.ts';
import type { Event } from '../../platform/events/events.entities.ts';
import { liveStream, sameTenant } from '../../graphql/live.ts';
import { servicesOf } from '../../context.ts';
import { eventMatches, publicEventData } from '../../platform/events/events.ts';
import { DELIVERY_STATUSES, type WebhookAttempt, type WebhookDelivery, type WebhookEndpoint } from './webhooks.entities.ts';
import type { TestResult } from './webhooks.service.ts';
import {
  callbackSecretOp, createWebhookOp, deleteWebhookOp, getDeliveryOp, getEventOp, getWebhookOp, listDeadLettersOp, listDeliveriesOp,
  listEventsOp, listWebhooksOp, replayDeliveryOp, testWebhookOp, updateWebhookOp,
} from './webhooks.operations.ts';

const DeliveryStatusEnum = builder.enumType('WebhookDeliveryStatus', { values: DELIVERY_STATUSES });

const WebhookEndpointRef = builder.node(builder.objectRef<WebhookEndpoint>('WebhookEndpoint'), {
  id: { resolve: (e) => e.id },
  loadOne: (id, ctx) => run(getWebhookOp, ctx, { id }),
  fields: (t) => ({
    url: t.exposeString('url'),
    events: t.exposeStringList('events'),
    description: t.string({ nullable: true, resolve: (e) => e.description ?? null }),
    active: t.exposeBoolean('active'),
    disabledReason: t.string({ nullable: true, resolve: (e) => e.disabledReason ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const WebhookAttemptRef = builder.objectRef<WebhookAttempt>('WebhookAttempt').implement({
  fields: (t) => ({
    attempt: t.exposeInt('attempt'),
    status: t.exposeString('status'),
    httpStatus: t.int({ nullable: true, resolve: (a) => a.httpStatus ?? null }),
    responseTimeMs: t.int({ nullable: true, resolve: (a) => a.responseTimeMs ?? null }),
    error: t.string({ nullable: true, resolve: (a) => a.error ?? null }),
    nextRetryAt: t.field({ type: 'DateTime', nullable: true, resolve: (a) => a.nextRetryAt ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const WebhookDeliveryRef = builder.node(builder.objectRef<WebhookDelivery>('WebhookDelivery'), {
  id: { resolve: (d) => d.id },
  loadOne: async (id, ctx) => (await run(getDeliveryOp, ctx, { id })).delivery,
  fields: (t) => ({
    endpointId: t.string({ nullable: true, resolve: (d) => d.endpointId ?? null }),
    url: t.exposeString('url'),
    eventId: t.exposeString('eventId'),
    eventType: t.exposeString('eventType'),
    status: t.field({ type: DeliveryStatusEnum, resolve: (d) => d.status }),
    httpStatus: t.int({ nullable: true, resolve: (d) => d.httpStatus ?? null }),
    responseTimeMs: t.int({ nullable: true, resolve: (d) => d.responseTimeMs ?? null }),
    attempt: t.exposeInt('attempt'),
    nextRetryAt: t.field({ type: 'DateTime', nullable: true, resolve: (d) => d.nextAttemptAt ?? null }),
    deliveredAt: t.field({ type: 'DateTime', nullable: true, resolve: (d) => d.deliveredAt ?? null }),
    lastError: t.string({ nullable: true, resolve: (d) => d.lastError ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    attempts: t.field({ type: [WebhookAttemptRef], resolve: async (d, _a, ctx) => (await run(getDeliveryOp, ctx, { id: d.id })).attempts }),
  }),
});

const CreateWebhookPayload = builder.objectRef<{ endpoint: WebhookEndpoint; signingSecret: string }>('CreateWebhookPayload').implement({
  fields: (t) => ({
    webhook: t.field({ type: WebhookEndpointRef, resolve: (p) => p.endpoint }),
    signingSecret: t.exposeString('signingSecret', { description: 'Shown only in this response.' }),
  }),
});

const WebhookTestResult = builder.objectRef<TestResult>('WebhookTestResult').implement({
  fields: (t) => ({
    success: t.exposeBoolean('success'),
    responseStatus: t.int({ nullable: true, resolve: (r) => r.response_status }),
    responseTimeMs: t.int({ nullable: true, resolve: (r) => r.response_time_ms }),
    deliveredAt: t.field({ type: 'DateTime', nullable: true, resolve: (r) => r.delivered_at }),
    error: t.string({ nullable: true, resolve: (r) => r.error }),
    deliveryId: t.string({ resolve: (r) => r.delivery_id }),
  }),
});

const EventRef = builder.node(builder.objectRef<Event>('Event'), {
  description: 'An event as delivered to webhooks: id, type, created_at, data, plus the resource sequence number. A Node: `node(id:)` loads it from the event history while it is kept',
  id: { resolve: (e) => e.id },
  loadOne: (id, ctx) => run(getEventOp, ctx, { id }),
  fields: (t) => ({
    type: t.exposeString('type'),
    resourceId: t.exposeString('resourceId'),
    sequence: t.exposeInt('sequence'),
    resourceType: t.exposeString('resourceType'),
    data: t.field({ type: 'JSON', resolve: (e) => publicEventData(e.data) }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const CreateWebhookInput = builder.inputType('CreateWebhookInput', {
  fields: (t) => ({
    url: t.string({ required: true }),
    events: t.stringList({ required: true }),
    description: t.string({ required: false }),
  }),
});
const UpdateWebhookInput = builder.inputType('UpdateWebhookInput', {
  fields: (t) => ({
    url: t.string({ required: false }),
    events: t.stringList({ required: false, description: 'Replaces the list' }),
    description: t.string({ required: false }),
    active: t.boolean({ required: false }),
  }),
});

builder.queryFields((t) => ({
  eventHistory: t.connection({
    type: EventRef, ...guard('Query', 'eventHistory', listEventsOp),
    description: 'The event history of this organization and mode, newest first (kept EVENTS_RETENTION_DAYS): what webhooks delivered, to catch up after missed deliveries. `types` takes names, `prefix.*` or `*`.',
    args: { types: t.arg.stringList({ required: false }), createdAfter: t.arg({ type: 'DateTime', required: false }), createdBefore: t.arg({ type: 'DateTime', required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listEventsOp, ctx, {
      ...pageRequest(args), types: args.types, created_after: args.createdAfter?.toISOString(), created_before: args.createdBefore?.toISOString(),
    })),
  }),
  event: t.field({
    type: EventRef, ...guard('Query', 'event', getEventOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getEventOp, ctx, { id: String(args.id) }),
  }),
  webhooks: t.connection({
    type: WebhookEndpointRef, ...guard('Query', 'webhooks', listWebhooksOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listWebhooksOp, ctx, pageRequest(args))),
  }),
  webhook: t.field({
    type: WebhookEndpointRef, ...guard('Query', 'webhook', getWebhookOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getWebhookOp, ctx, { id: String(args.id) }),
  }),
  webhookDeliveryLog: t.connection({
    type: WebhookDeliveryRef, ...guard('Query', 'webhookDeliveryLog', listDeliveriesOp),
    args: { endpointId: t.arg.id({ required: true }), status: t.arg({ type: DeliveryStatusEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listDeliveriesOp, ctx, { ...pageRequest(args), id: String(args.endpointId), status: args.status })),
  }),
  webhookDeadLetters: t.connection({
    type: WebhookDeliveryRef, ...guard('Query', 'webhookDeadLetters', listDeadLettersOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listDeadLettersOp, ctx, pageRequest(args))),
  }),
  webhookCallbackSecret: t.string({
    ...guard('Query', 'webhookCallbackSecret', callbackSecretOp),
    description: 'Signs per-resource webhook_url callbacks (messages, later calls and numbers) of this organization and mode.',
    resolve: (_r, _a, ctx) => run(callbackSecretOp, ctx, {}),
  }),
}));

builder.mutationFields((t) => ({
  createWebhook: t.field({
    type: CreateWebhookPayload, ...guard('Mutation', 'createWebhook', createWebhookOp),
    args: { input: t.arg({ type: CreateWebhookInput, required: true }) },
    resolve: (_r, args, ctx) => run(createWebhookOp, ctx, toWire(args.input)),
  }),
  updateWebhook: t.field({
    type: WebhookEndpointRef, ...guard('Mutation', 'updateWebhook', updateWebhookOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateWebhookInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateWebhookOp, ctx, { ...(toWire(args.input) as object), id: String(args.id) }),
  }),
  deleteWebhook: t.id({
    ...guard('Mutation', 'deleteWebhook', deleteWebhookOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(deleteWebhookOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
  testWebhook: t.field({
    type: WebhookTestResult, ...guard('Mutation', 'testWebhook', testWebhookOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(testWebhookOp, ctx, { id: String(args.id) }),
  }),
  replayWebhookDelivery: t.field({
    type: WebhookDeliveryRef, ...guard('Mutation', 'replayWebhookDelivery', replayDeliveryOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(replayDeliveryOp, ctx, { id: String(args.id) }),
  }),
}));



builder.subscriptionFields((t) => ({
  events: t.field({
    type: EventRef, ...guard('Subscription', 'events', listEventsOp),
    description: 'Committed events of the connection\'s organization and mode; `types` takes names, `prefix.*` or `*` (default all).',
    args: { types: t.arg.stringList({ required: false }) },
    subscribe: (_r, args, ctx) => {
      const types = args.types?.length ? args.types : ['*'];
      const notices = ctx.platform.bus.subscribe((n) => n.kind === 'event' && sameTenant(ctx, n) && eventMatches(types, n.type));
      // Loaded in batches (a burst of another instance's sends arrives as one relay batch); an event
      // gone meanwhile (its organization deleted) is skipped.
      return liveStream(notices, (n) => ctx.platform.events.get(ctx.scope, n.id), undefined, (ns) => ctx.platform.events.getMany(ctx.scope, ns.map((n) => n.id)));
    },
    resolve: (e) => e,
  }),
  webhookDeliveries: t.field({
    type: WebhookDeliveryRef, ...guard('Subscription', 'webhookDeliveries', { endpoint: 'GET /v1/webhooks/{id}/deliveries', roles: BUILDERS }),
    description: 'Each delivery attempt outcome for one endpoint.',
    args: { endpointId: t.arg.id({ required: true }) },
    subscribe: async (_r, args, ctx) => {
      const endpointId = String(args.endpointId);
      await run(getWebhookOp, ctx, { id: endpointId });
      const notices = ctx.platform.bus.subscribe((n) => n.kind === 'delivery' && sameTenant(ctx, n) && n.endpointId === endpointId);
      return liveStream(notices, (n) => servicesOf(ctx, 'webhooks').webhooks.getDelivery(ctx.scope, n.id));
    },
    resolve: (d) => d,
  }),
}));

