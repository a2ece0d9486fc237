/**
 * Platform-level GraphQL fields: a heartbeat subscription that proves a live connection and its
 * scope, and `rateLimit`, what the caller may still spend.
 */
import { builder, COMPLEXITY_LIMITS } from './builder.ts';
import { NEVER_CACHED } from './responseCache.ts';
import { COST_LIMITS } from './complexity.ts';
import { FIELD_ENDPOINTS, guard, registerField } from './operationField.ts';
import { EVERY_ROLE } from '../platform/auth/roles.ts';
import { rateLimitIdentity } from '../platform/auth/scope.ts';
import { ServiceError } from '../platform/errors.ts';
import { BURST_PER_SECOND } from '../platform/ratelimit/plans.ts';

type Window = { field: string; limit: number; remaining: number; resetAt: Date };
type Budget = { plan: string; costLimit: number; depthLimit: number; breadthLimit: number; burstPerSecond: number; windows: Window[] };

const RateLimitWindow = builder.objectRef<Window>('RateLimitWindow').implement({
  description: 'A root field\'s per-minute window (shared with its REST twin), as it stands: nothing counted by asking',
  fields: (t) => ({
    field: t.exposeString('field', { description: '`Type.field`, e.g. `Mutation.sendSms`' }),
    limit: t.exposeInt('limit'),
    remaining: t.exposeInt('remaining'),
    resetAt: t.expose('resetAt', { type: 'DateTime' }),
  }),
});

const RateLimitStatus = builder.objectRef<Budget>('RateLimitStatus').implement({
  extensions: NEVER_CACHED,
  description: 'What the caller may spend: the cost limit of its plan (every answer\'s `extensions.cost` says what a query cost) and its windows',
  fields: (t) => ({
    plan: t.exposeString('plan'),
    costLimit: t.exposeInt('costLimit', { description: 'The most one operation may cost on this plan' }),
    depthLimit: t.exposeInt('depthLimit'),
    breadthLimit: t.exposeInt('breadthLimit'),
    burstPerSecond: t.exposeInt('burstPerSecond', { description: 'Requests per second before requests queue (up to 5 s)' }),
    windows: t.field({ type: [RateLimitWindow], resolve: (b) => b.windows }),
  }),
});

builder.queryFields((t) => ({
  rateLimit: t.field({
    type: RateLimitStatus,
    description: 'The caller\'s budget without spending it: its plan\'s cost limit, and where the windows of `fields` (`Type.field` names, e.g. `["Mutation.sendSms", "Query.messages"]`) stand. This field counts only against its own window.',
    ...guard('Query', 'rateLimit', { endpoint: 'GET /v1/rate-limit', roles: EVERY_ROLE }),
    args: { fields: t.arg.stringList({ required: false }) },
    resolve: async (_r, args, ctx) => {
      const fields = [...new Set(args.fields ?? [])];
      if (fields.length > 20) throw new ServiceError('VALIDATION_ERROR', 'fields: at most 20', { field: 'fields', max: 20 });
      const unknown = fields.filter((f) => !FIELD_ENDPOINTS.has(f));
      if (unknown.length) throw new ServiceError('VALIDATION_ERROR', `fields: unknown root field ${unknown.join(', ')} (write Type.field, e.g. Mutation.sendSms)`, { field: 'fields', value: unknown });
      const { scope } = ctx;
      const windows = await Promise.all(fields.map(async (field) => {
        const r = await ctx.platform.limiter.peek(rateLimitIdentity(scope), scope.plan, FIELD_ENDPOINTS.get(field)!);
        return { field, limit: r.limit, remaining: r.remaining, resetAt: new Date(r.reset * 1000) };
      }));
      return {
        plan: scope.plan, costLimit: COST_LIMITS[scope.plan], depthLimit: COMPLEXITY_LIMITS.depth, breadthLimit: COMPLEXITY_LIMITS.breadth,
        burstPerSecond: BURST_PER_SECOND[scope.plan], windows,
      };
    },
  }),
}));

const Heartbeat = builder.objectRef<{ at: Date; organizationId: string; mode: string }>('Heartbeat').implement({
  fields: (t) => ({
    at: t.expose('at', { type: 'DateTime' }),
    organizationId: t.exposeString('organizationId'),
    mode: t.exposeString('mode'),
  }),
});

builder.subscriptionFields((t) => ({
  heartbeat: t.field({
    type: Heartbeat,
    description: 'Emits now and then every intervalSeconds (1-60) for the connection\'s organization and mode.',
    ...guard('Subscription', 'heartbeat', { endpoint: 'GET /v1/heartbeat', roles: EVERY_ROLE }),
    args: { intervalSeconds: t.arg.int({ required: false, defaultValue: 15 }) },
    subscribe: async function* (_root, args, ctx) {
      const interval = Math.min(60, Math.max(1, args.intervalSeconds ?? 15)) * 1000;
      for (;;) {
        yield { at: new Date(), organizationId: ctx.scope.organizationId, mode: ctx.scope.mode };
        await new Promise((r) => setTimeout(r, interval));
      }
    },
    resolve: (beat) => beat,
  }),
}));

// Relay's node/nodes share the generic single-resource read bucket.
// (each node type's loader runs the resource's own get operation, which checks its roles).
registerField('Query', 'node', { endpoint: 'GET /v1/{resource}/{id}' });
registerField('Query', 'nodes', { endpoint: 'GET /v1/{resource}/{id}' });
