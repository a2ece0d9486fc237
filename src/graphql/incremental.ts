/**
 * Incremental delivery on /graphql (`@defer`, `@stream`): what the gateway does to the parts Yoga's
 * executor answers, and the one-part answer for a client that accepts only JSON.
 */
import { getOperationAST, type ExecutionResult, type GraphQLError } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import type { RequestContext } from '../context.ts';
import type { GraphqlRateLimits } from './rateLimits.ts';
import { maskError } from './errors.ts';

/** Request contexts whose operation answers in parts (incremental delivery), see incrementalParts. */
const incrementalContexts = new WeakSet<object>();

/** Whether the operation run with this request context answered in parts (@defer, @stream; not a subscription). */
export function answersIncrementally(ctx: RequestContext): boolean {
  return incrementalContexts.has(ctx);
}

type Part = ExecutionResult & { incremental?: ({ errors?: readonly GraphQLError[] } & Record<string, unknown>)[]; hasNext?: boolean };

/**
 * Incremental delivery (`@defer`, `@stream`): Yoga's executor runs them (the directives are graphql
 * 17's, declared by graphql/schema.ts) and answers in parts, as multipart/mixed or SSE, in the
 * 2022-08-24 format Apollo Client and meros read (`{ data, hasNext: true }`, then
 * `{ incremental: [{ data | items, path, label?, errors? }], hasNext }`).
 * - The first part carries what the HTTP layer adds to a one-part answer: `extensions.cost` (the
 *   whole document is costed once, deferred parts included) and `extensions.rateLimit` (the
 *   request was admitted once); later parts carry only what the executor gives them.
 * - An error inside a deferred fragment or a streamed item arrives in its incremental entry's
 *   `errors`, masked like any other (Yoga's masking sees only a part's top-level `errors`).
 * Subscriptions' events are left as they are.
 */
export function incrementalParts(rateLimits: GraphqlRateLimits): Plugin<RequestContext> {
  return {
    onExecute({ args }) {
      if (getOperationAST(args.document, args.operationName)?.operation === 'subscription') return;
      const ctx = args.contextValue as RequestContext & { requestContext?: RequestContext };
      const live = ctx.requestContext ?? ctx;
      let first = true;
      return {
        // A one-part answer gets its extensions from the HTTP layer (http/graphql.ts).
        onExecuteDone: ({ result }) => {
          if (!isAsyncIterable(result)) return;
          incrementalContexts.add(live);
          return {
            onNext({ result: next, setResult }) {
              let part = next as Part;
              if (part.incremental?.some((entry) => entry.errors?.length)) {
                part = { ...part, incremental: part.incremental.map((entry) => (entry.errors ? { ...entry, errors: entry.errors.map((e) => maskError(e) as GraphQLError) } : entry)) };
              }
              if (first) {
                first = false;
                const extensions = rateLimits.answerExtensions(live);
                if (Object.keys(extensions).length) part = { ...part, extensions: { ...part.extensions, ...extensions } };
              }
              if (part !== next) setResult(part);
            },
          };
        },
      };
    },
  };
}

/**
 * The parts of an incremental answer drained into one answer, for a client that accepts only JSON
 * (the incremental-delivery RFC lets a server deliver everything at once): deferred `data` merged at
 * its path, streamed `items` appended to their list, every error (top-level and incremental) in
 * `errors` in the order they came, the first part's `extensions`.
 */
export async function wholeAnswer(parts: AsyncIterable<Part>): Promise<ExecutionResult> {
  let data: Record<string, unknown> | null | undefined;
  const errors: GraphQLError[] = [];
  let extensions: Record<string, unknown> | undefined;
  for await (const part of parts) {
    if (data === undefined && 'data' in part) {
      data = part.data as Record<string, unknown> | null;
      extensions = part.extensions as Record<string, unknown> | undefined;
    }
    errors.push(...(part.errors ?? []));
    for (const entry of part.incremental ?? []) {
      errors.push(...(entry.errors ?? []));
      const path = entry.path as (string | number)[];
      let at: unknown = data;
      for (const key of path) at = at == null ? undefined : (at as Record<string | number, unknown>)[key];
      if (Array.isArray(entry.items)) {
        // A streamed item's path ends with its index: the list is one step up.
        let list: unknown = data;
        for (const key of path.slice(0, -1)) list = list == null ? undefined : (list as Record<string | number, unknown>)[key];
        if (Array.isArray(list)) list.push(...(entry.items as unknown[]));
      } else if (entry.data && at && typeof at === 'object') {
        deepMerge(at as Record<string, unknown>, entry.data as Record<string, unknown>);
      }
    }
  }
  return { ...(errors.length ? { errors } : {}), data: data ?? null, ...(extensions ? { extensions } : {}) };
}

function deepMerge(into: Record<string, unknown>, from: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(from)) {
    const have = into[k];
    if (v && typeof v === 'object' && !Array.isArray(v) && have && typeof have === 'object' && !Array.isArray(have)) deepMerge(have as Record<string, unknown>, v as Record<string, unknown>);
    else if (Array.isArray(v) && Array.isArray(have)) v.forEach((item, i) => (item && typeof item === 'object' && have[i] && typeof have[i] === 'object' ? deepMerge(have[i] as Record<string, unknown>, item as Record<string, unknown>) : (have[i] = item)));
    else into[k] = v;
  }
}
