/** The webhooks use cases as operations: roles, rate-limit endpoint and input schema, declared once. */
import { LIMITS } from '../../platform/ratelimit/plans.ts';
import { z } from 'zod';
import { operationsOf } from '../../context.ts';
import type { WebhooksServices } from './webhooks.service.ts';
import { ADMINS, BUILDERS } from '../../platform/auth/roles.ts';
import { idInput, pageInput } from '../../platform/inputs.ts';
import { DELIVERY_STATUSES } from './webhooks.entities.ts';
import { createWebhookInput, updateWebhookInput } from './webhooks.schemas.ts';

const op = operationsOf<WebhooksServices>('webhooks');

export const createWebhookOp = op({
  name: 'webhooks.create', endpoint: 'POST /v1/webhooks', limits: LIMITS.fewWrites, roles: ADMINS, input: createWebhookInput,
  run: (ctx, input, s) => s.webhooks.create(ctx.scope, input),
});
export const listWebhooksOp = op({
  name: 'webhooks.list', endpoint: 'GET /v1/webhooks', limits: LIMITS.read, roles: BUILDERS, input: pageInput,
  run: (ctx, input, s) => s.webhooks.list(ctx.scope, input),
});
export const getWebhookOp = op({
  name: 'webhooks.get', endpoint: 'GET /v1/webhooks/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.webhooks.get(ctx.scope, input.id),
});
export const updateWebhookOp = op({
  name: 'webhooks.update', endpoint: 'PUT /v1/webhooks/{id}', roles: ADMINS,
  input: z.intersection(idInput, updateWebhookInput),
  run: (ctx, { id, ...patch }, s) => s.webhooks.update(ctx.scope, id, patch),
});
export const deleteWebhookOp = op({
  name: 'webhooks.delete', endpoint: 'DELETE /v1/webhooks/{id}', roles: ADMINS, input: idInput,
  run: (ctx, input, s) => s.webhooks.remove(ctx.scope, input.id),
});
export const testWebhookOp = op({
  name: 'webhooks.test', endpoint: 'POST /v1/webhooks/{id}/test', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.webhooks.test(ctx.scope, input.id),
});
export const listDeliveriesOp = op({
  name: 'webhooks.listDeliveries', endpoint: 'GET /v1/webhooks/{id}/deliveries', roles: BUILDERS,
  input: pageInput.extend({ id: z.string().min(1), status: z.enum(DELIVERY_STATUSES).nullish() }),
  run: (ctx, input, s) => s.webhooks.listDeliveries(ctx.scope, input.id, input),
});
export const listDeadLettersOp = op({
  name: 'webhooks.listDeadLetters', endpoint: 'GET /v1/webhooks/dead-letters', roles: BUILDERS, input: pageInput,
  run: (ctx, input, s) => s.webhooks.listDeadLetters(ctx.scope, input),
});
export const getDeliveryOp = op({
  name: 'webhooks.getDelivery', endpoint: 'GET /v1/webhooks/deliveries/{id}', roles: BUILDERS, input: idInput,
  run: async (ctx, input, s) => {
    const delivery = await s.webhooks.getDelivery(ctx.scope, input.id);
    return { delivery, attempts: await s.webhooks.listAttempts(ctx.scope, input.id) };
  },
});
export const replayDeliveryOp = op({
  name: 'webhooks.replayDelivery', endpoint: 'POST /v1/webhooks/deliveries/{id}/replay', roles: ADMINS, input: idInput,
  run: (ctx, input, s) => s.webhooks.replay(ctx.scope, input.id),
});
/** Type names or `prefix.*` patterns, at most 20 (REST: comma-separated `type`). */
const eventTypesInput = z.array(z.string().min(1).max(100).regex(/^(\*|[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?)$/, 'an event type name, `prefix.*` or `*`')).max(20);
export const listEventsOp = op({
  name: 'webhooks.listEvents', endpoint: 'GET /v1/events', roles: BUILDERS,
  input: pageInput.extend({
    types: eventTypesInput.nullish(),
    created_after: z.iso.datetime({ offset: true }).nullish(),
    created_before: z.iso.datetime({ offset: true }).nullish(),
  }),
  run: (ctx, input) => ctx.platform.events.list(ctx.scope, {
    types: input.types, createdAfter: input.created_after ? new Date(input.created_after) : null, createdBefore: input.created_before ? new Date(input.created_before) : null,
  }, input),
});
export const getEventOp = op({
  name: 'webhooks.getEvent', endpoint: 'GET /v1/events/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input) => ctx.platform.events.get(ctx.scope, input.id),
});
export const callbackSecretOp = op({
  name: 'webhooks.callbackSecret', endpoint: 'GET /v1/webhooks/callback-secret', roles: ADMINS, input: z.object({}),
  run: async (ctx, _input, s) => s.webhooks.callbackSecret(ctx.scope),
});
