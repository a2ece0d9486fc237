/**
 * Operations: each use case the API exposes, declared once with the roles it needs, the endpoint
 * whose rate-limit bucket it counts against, and its input schema. A GraphQL field and its REST
 * route both call `invoke`, so they share authorization, validation, errors and side effects.
 */
import type { PlanLimits } from './ratelimit/plans.ts';
import type { z } from 'zod';
import type { Role } from './auth/roles.ts';
import { hasRole } from './auth/roles.ts';
import type { Scope } from './auth/scope.ts';
import { ServiceError } from './errors.ts';
import { MAX_LISTED_PROBLEMS, NO_SCHEMA_MESSAGE, problemsOf, unknownFields, unknownProblem, validationError, type InputProblem, type UnknownField } from './validation.ts';

/** What `invoke` needs of a request context: the scope and each module's services by name. */
export type OperationContext = {
  scope: Scope;
  modules: ReadonlyMap<string, object>;
  /**
   * The request's rate-limit admission while it is still in flight (REST sets it: see rest.ts).
   * `invoke` lets nothing with an effect happen before it settles, and its refusal (429) answers
   * first, whatever else failed; an operation's `prepare` runs alongside it.
   */
  admission?: Promise<unknown>;
  /**
   * That admission's take while it is in flight (REST sets it with `admission`): the rate-limit
   * store's queued take (`take`, to be found among the takes a statement carries: the voice POST's
   * gated insert) and its outcome once known. An operation may write in `prepare` only when the
   * same statement's take admits the request, or when the outcome is `admitted`.
   */
  admissionTake?: AdmissionTake;
  /**
   * Told after a write operation (its endpoint's method is not GET) ran, whether it succeeded or
   * not (a failure may have written part): the GraphQL response cache forgets the tenant's reads.
   */
  onWrite?: (scope: Scope, operation: string, resourceId: string | undefined) => void;
};

/** See OperationContext.admissionTake. */
export type AdmissionTake = { take: object | undefined; outcome(): 'admitted' | 'refused' | undefined };

export type Operation<Ctx extends OperationContext, I, O, S = unknown, P = undefined> = {
  name: string;
  /** The module whose services `run` receives. */
  module: string;
  /** `METHOD /v1/path/{param}` of the REST twin: the rate-limit bucket both surfaces share. */
  endpoint: string;
  /**
   * Requests per minute on `endpoint` by plan, when the specification's table gives the endpoint a
   * row of its own (else the read or write row, `platform/ratelimit/plans.ts`).
   */
  limits?: PlanLimits;
  roles: readonly Role[];
  input: z.ZodType<I>;
  /**
   * Reads `run` starts from (must change nothing, write no audit, call no provider): run while the
   * request's rate-limit admission is still in flight, so a request waits for the longer of the two
   * round trips instead of their sum. Its error is raised only once the request was admitted. The
   * one exception is a write that commits in the same statement as the take that admits it
   * (`ctx.admissionTake`): it cannot happen for a refused request.
   */
  prepare?: (ctx: Ctx, input: I, services: S) => Promise<P>;
  run: (ctx: Ctx, input: I, services: S, prepared: P | undefined) => Promise<O>;
};

/** Hooks the composition root installs: audit of denials. */
export type DenialRecorder = (scope: Scope, action: string, details: Record<string, unknown>) => void;

export function authorize(scope: Scope, op: { name: string; roles: readonly Role[] }, onDenied?: DenialRecorder): void {
  if (hasRole(scope.role, op.roles)) return;
  onDenied?.(scope, 'auth.permission_denied', { operation: op.name, role: scope.role });
  throw new ServiceError('INSUFFICIENT_PERMISSIONS', `Role ${scope.role} may not perform ${op.name}`, { required_roles: op.roles, role: scope.role });
}

/**
 * The path of the first string (value or key) holding a NUL character, which PostgreSQL cannot
 * store in text or jsonb; undefined when there is none. Walks with its own stack, in document
 * order, so a deeply nested value cannot overflow the call stack.
 */
export function nulPath(value: unknown, path: string[] = []): string[] | undefined {
  // A frame is a value and the key it was reached by (its parent's frame holds the rest of the path).
  type Frame = { value: unknown; key: string | undefined; parent: Frame | undefined };
  const pathOf = (f: Frame): string[] => {
    const keys: string[] = [];
    for (let at: Frame | undefined = f; at?.key !== undefined; at = at.parent) keys.push(at.key);
    return [...path, ...keys.reverse()];
  };
  const stack: Frame[] = [{ value, key: undefined, parent: undefined }];
  while (stack.length > 0) {
    const top = stack.pop()!;
    if (top.key?.includes('\u0000')) return pathOf(top);
    if (typeof top.value === 'string') {
      if (top.value.includes('\u0000')) return pathOf(top);
      continue;
    }
    if (top.value === null || typeof top.value !== 'object') continue;
    const entries = Object.entries(top.value);
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i]![1], key: entries[i]![0], parent: top });
  }
  return undefined;
}

/**
 * Validates input with the operation's schema (platform/validation.ts): text with a NUL character
 * is refused first, whatever the schema says; then every problem at once — fields the schema does
 * not declare at any depth (and `unknown`, fields the REST route never read from the body), missing
 * fields, invalid values — as one error in the spec's envelope (the first problem's code,
 * `details.field`, `details.errors`).
 */
export function parseInput<I>(schema: z.ZodType<I>, raw: unknown, unknown: readonly UnknownField[] = []): I {
  const nul = nulPath(raw);
  if (nul) {
    const field = nul.join('.');
    throw new ServiceError('VALIDATION_ERROR', `${field || 'input'}: text may not contain the NUL character (\\u0000)`, { field: field || undefined });
  }
  const result = schema.safeParse(raw, { reportInput: true, error: () => NO_SCHEMA_MESSAGE });
  const problems: InputProblem[] = result.success ? [] : problemsOf(result.error.issues, schema);
  const reported = new Set(problems.map((p) => p.field));
  for (const u of [...unknown, ...unknownFields(schema, raw)]) {
    const problem = unknownProblem(u.path, u.known, problems.length < MAX_LISTED_PROBLEMS);
    if (!reported.has(problem.field)) problems.push(problem);
    reported.add(problem.field);
  }
  if (problems.length === 0 && result.success) return result.data;
  throw validationError(problems.length ? problems : [{ field: '', code: 'VALIDATION_ERROR', message: 'The input is not valid' }]);
}

/**
 * Runs an operation: roles, input, then `run` (after `prepare` when it has one). With an admission
 * in flight (`ctx.admission`), the order a client sees is unchanged — a refused admission answers
 * first, a denial is audited only for an admitted request — but the input is checked and `prepare`
 * reads while the admission's round trip is under way.
 */
export async function invoke<Ctx extends OperationContext, I, O, S, P>(
  op: Operation<Ctx, I, O, S, P>, ctx: Ctx, raw: unknown, onDenied?: DenialRecorder, opts: { unknownFields?: readonly UnknownField[] } = {},
): Promise<O> {
  const admission = ctx.admission;
  if (admission && !hasRole(ctx.scope.role, op.roles)) await admission;
  authorize(ctx.scope, op, onDenied);
  const services = ctx.modules.get(op.module) as S | undefined;
  if (!services) throw new Error(`operation ${op.name}: module ${op.module} is not installed`);
  let input: I;
  try {
    input = parseInput(op.input, raw, opts.unknownFields);
  } catch (e) {
    if (admission) await admission;
    throw e;
  }
  if (!op.prepare) {
    if (admission) await admission;
    return written(op, ctx, input, op.run(ctx, input, services, undefined));
  }
  const prepared = op.prepare(ctx, input, services).then((value) => ({ value }), (error: unknown) => ({ error }));
  if (admission) await admission;
  const p = await prepared;
  if ('error' in p) throw p.error;
  return written(op, ctx, input, op.run(ctx, input, services, p.value));
}

/** A write operation's run, telling `ctx.onWrite` once it settled (the input's `id`, when it names one). */
function written<O>(op: { name: string; endpoint: string }, ctx: OperationContext, input: unknown, run: Promise<O>): Promise<O> {
  if (!ctx.onWrite || op.endpoint.startsWith('GET ')) return run;
  const id = input && typeof input === 'object' && typeof (input as { id?: unknown }).id === 'string' ? (input as { id: string }).id : undefined;
  const tell = () => ctx.onWrite!(ctx.scope, op.name, id);
  return run.then((out) => { tell(); return out; }, (e: unknown) => { tell(); throw e; });
}
