/** Platform-level GraphQL fields: a heartbeat subscription that proves a live connection and its scope. */
import { builder } from './builder.ts';
import { guard, registerField } from './operationField.ts';
import { EVERY_ROLE } from '../platform/auth/roles.ts';

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
