/**
 * The Pothos builder: scope-auth (roles), Relay (global ids are our prefixed ids), complexity
 * (depth, breadth and cost limits). Modules add their types in `<context>.graphql.ts`.
 */
import SchemaBuilder from '@pothos/core';
import ComplexityPlugin from '@pothos/plugin-complexity';
import RelayPlugin from '@pothos/plugin-relay';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import type { RequestContext } from '../context.ts';
import { hasRole, type Role } from '../platform/auth/roles.ts';
import { ServiceError } from '../platform/errors.ts';
import { typeNameOfId } from '../platform/ids.ts';

/** Depth and breadth of every operation, on every plan; the cost limit depends on the plan (graphql/complexity.ts COST_LIMITS). */
export const COMPLEXITY_LIMITS = { depth: 12, breadth: 200 };

export const builder = new SchemaBuilder<{
  Context: RequestContext;
  AuthScopes: { role: readonly Role[] };
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
  };
  DefaultFieldNullability: false;
}>({
  plugins: [ScopeAuthPlugin, RelayPlugin, ComplexityPlugin],
  defaultFieldNullability: false,
  scopeAuth: {
    authScopes: async (ctx) => ({ role: (allowed: readonly Role[]) => hasRole(ctx.scope.role, allowed) }),
    unauthorizedError: (_parent, ctx, info) => {
      // Audited like REST's `authorize` denial (scope-auth rejects before the operation's `invoke` runs).
      ctx.onDenied?.(ctx.scope, 'auth.permission_denied', { field: `${info.parentType.name}.${info.fieldName}`, role: ctx.scope.role });
      return new ServiceError('INSUFFICIENT_PERMISSIONS', `Role ${ctx.scope.role} may not access ${info.parentType.name}.${info.fieldName}`, { role: ctx.scope.role });
    },
  },
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
    // One id on both surfaces: the Relay global id is the resource's own prefixed id.
    encodeGlobalID: (_typename, id) => String(id),
    // An id whose prefix names no Node type (an unknown prefix, or a resource only reachable through
    // its parent: a voicemail message, a conversation) is NOT_FOUND, like an id nobody holds.
    decodeGlobalID: (globalID) => {
      const typename = typeNameOfId(globalID);
      if (!typename || !isNodeType(typename)) throw new ServiceError('NOT_FOUND', `No resource has the id ${globalID}`, { id: globalID });
      return { typename, id: globalID };
    },
  },
  complexity: {
    defaultComplexity: 1,
    defaultListMultiplier: 10,
    // No `limit` here: yoga.ts's complexityGate checks COMPLEXITY_LIMITS once per request, before the
    // rate limiter counts anything; a builder limit would compute the same complexity a second time.
    // A query over a limit is the client's error (VALIDATION_ERROR 400), not an INTERNAL_ERROR.
    complexityError: (kind, r) => {
      const what = kind.toLowerCase() as 'complexity' | 'depth' | 'breadth';
      const max = { complexity: r.maxComplexity, depth: r.maxDepth, breadth: r.maxBreadth }[what];
      return new ServiceError('VALIDATION_ERROR', `Query exceeds maximum ${what} (${what}: ${r[what]}, max: ${max})`, { limit: what, value: r[what], max }, { status: 400 });
    },
  },
});

/** Whether `typename` is an object type the Relay plugin can load by id (`builder.node` with a loader). */
function isNodeType(typename: string): boolean {
  if (!builder.configStore.hasImplementation(typename)) return false;
  const config = builder.configStore.getTypeConfig(typename);
  if (config.kind !== 'Object') return false;
  const o = config.pothosOptions as { loadOne?: unknown; loadMany?: unknown; loadWithoutCache?: unknown; loadManyWithoutCache?: unknown };
  return Boolean(o.loadOne ?? o.loadMany ?? o.loadWithoutCache ?? o.loadManyWithoutCache);
}

builder.scalarType('DateTime', {
  description: 'ISO 8601 timestamp in UTC',
  serialize: (d) => (d instanceof Date ? d : new Date(d as string)).toISOString(),
  parseValue: (v) => {
    const d = new Date(String(v));
    if (Number.isNaN(d.getTime())) throw new ServiceError('VALIDATION_ERROR', 'Invalid DateTime');
    return d;
  },
});

builder.scalarType('JSON', {
  description: 'Arbitrary JSON value',
  serialize: (v) => v,
  parseValue: (v) => v,
});

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});
