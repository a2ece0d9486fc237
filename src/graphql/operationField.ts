/**
 * Glue between Pothos fields and operations: a field that runs an operation declares the
 * operation's roles as its scope-auth scopes and registers its rate-limit endpoint.
 */
import type { RequestContext } from '../context.ts';
import { invoke, type Operation } from '../platform/operations.ts';

/** `Type.field` of root fields → REST endpoint whose bucket it shares (read by the GraphQL rate limiter). */
export const FIELD_ENDPOINTS = new Map<string, string>();
/** The same by bare field name (the rate limiter identifies fields by name; root field names are unique). */
export const ENDPOINT_BY_FIELD_NAME = new Map<string, string>();
/** `Type.field` → roles of the operation it runs (the generated role-matrix tests read this). */
export const FIELD_ROLES = new Map<string, readonly string[]>();

/**
 * For a root field that runs `op`: registers the field's rate-limit endpoint and roles and returns
 * the Pothos scope-auth option, so a field cannot check one operation's roles and count another's bucket.
 * Use as `...guard('Query', 'apiKeys', listApiKeysOp)` in the field options.
 */
export function guard(type: 'Query' | 'Mutation' | 'Subscription', field: string, op: { endpoint: string; roles: Operation<RequestContext, unknown, unknown>['roles'] }) {
  registerField(type, field, op);
  return { authScopes: { role: op.roles } };
}

export function registerField(type: 'Query' | 'Mutation' | 'Subscription', field: string, op: { endpoint: string; roles?: readonly string[] }): void {
  if (ENDPOINT_BY_FIELD_NAME.has(field)) throw new Error(`root field name ${field} is used twice`);
  FIELD_ENDPOINTS.set(`${type}.${field}`, op.endpoint);
  ENDPOINT_BY_FIELD_NAME.set(field, op.endpoint);
  if (op.roles) FIELD_ROLES.set(`${type}.${field}`, op.roles);
}

export function run<I, O, S, P>(op: Operation<RequestContext, I, O, S, P>, ctx: RequestContext, raw: unknown): Promise<O> {
  return invoke(op, ctx, raw, ctx.onDenied);
}
