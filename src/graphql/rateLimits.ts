/**
 * GraphQL rate limiting, in one place. A GraphQL request counts like its REST twin: at admission
 * the front door takes the burst slot together with the window of the operation's first
 * rate-limited root field (one counter round trip); further limited fields are counted during
 * execution by @envelop/rate-limiter, whose store is the shared limiter keyed by the field's REST
 * endpoint, so a REST endpoint and its GraphQL field count against one bucket.
 *
 * The plugin identifies a request by a string only; the live request contexts it needs are kept
 * by this object (one per app), not in a process-wide map.
 */
import { useRateLimiter } from '@envelop/rate-limiter';
import { getOperationAST, Kind, parse, TypeInfo, visit, visitWithTypeInfo, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { RequestContext } from '../context.ts';
import { rateLimitIdentity } from '../platform/auth/scope.ts';
import type { Clock } from '../platform/clock.ts';
import { isServiceError, ServiceError } from '../platform/errors.ts';
import { headersOf, type RateLimiter } from '../platform/ratelimit/limiter.ts';
import { BURST_PER_SECOND } from '../platform/ratelimit/plans.ts';
import { serviceErrorToGraphQL } from './errors.ts';
import { COST_LIMITS } from './complexity.ts';
import { ENDPOINT_BY_FIELD_NAME, FIELD_ENDPOINTS } from './operationField.ts';

type Identity = { contextIdentity: string; fieldIdentity: string };

/**
 * A request context while its operation runs. `preCounted`: the endpoint whose window the front
 * door already counted with the burst slot (see `firstLimitedEndpoint`); the store then skips its
 * first count for that endpoint. `rateLimitError`: the window that refused a field.
 */
export type LiveContext = RequestContext & { rateLimitError?: ServiceError; preCounted?: string };

/** The identity the plugin knows a request by: unique per tracked context (request ids may come from clients). */
const LIVE_KEY = Symbol('graphql.liveKey');
let liveSeq = 0;
const liveKeyOf = (ctx: unknown): string => (ctx as { [LIVE_KEY]?: string })[LIVE_KEY] ?? (ctx as RequestContext).scope.requestId;

const operationEndpoints = new Map<string, string | null>();

/**
 * The rate-limit endpoint of the first root field with a window in the operation `query` runs
 * (null when none, or when the query does not parse: Yoga reports that itself). Cached per query text.
 */
export function firstLimitedEndpoint(query: string, operationName: string | undefined): string | null {
  const key = `${operationName ?? ''}\u0000${query}`;
  const known = operationEndpoints.get(key);
  if (known !== undefined) return known;
  let found: string | null = null;
  try {
    const operation = getOperationAST(parse(query), operationName);
    const rootType = operation ? { query: 'Query', mutation: 'Mutation', subscription: 'Subscription' }[operation.operation] : undefined;
    for (const selection of operation?.selectionSet.selections ?? []) {
      if (selection.kind !== Kind.FIELD) continue;
      const endpoint = FIELD_ENDPOINTS.get(`${rootType}.${selection.name.value}`);
      if (endpoint) {
        found = endpoint;
        break;
      }
    }
  } catch {
    found = null;
  }
  if (operationEndpoints.size >= 1000) operationEndpoints.delete(operationEndpoints.keys().next().value!);
  operationEndpoints.set(key, found);
  return found;
}

const limitedFieldsByDocument = new WeakMap<DocumentNode, readonly string[]>();

/**
 * The rate-limit endpoints of every rate-limited field in `document`, one entry per field node in
 * document order (every operation and fragment, as @envelop/rate-limiter walks it: the plugin asks
 * its store once per such node). Remembered per document object: the parse cache (documentCaches)
 * hands the same object to every request with the same query text.
 */
export function limitedFieldEndpoints(document: DocumentNode, schema: GraphQLSchema): readonly string[] {
  const known = limitedFieldsByDocument.get(document);
  if (known) return known;
  const typeInfo = new TypeInfo(schema);
  const found: string[] = [];
  visit(document, visitWithTypeInfo(typeInfo, {
    Field() {
      const type = typeInfo.getParentType();
      const field = typeInfo.getFieldDef();
      const endpoint = type && field ? FIELD_ENDPOINTS.get(`${type.name}.${field.name}`) : undefined;
      if (endpoint) found.push(endpoint);
    },
  }));
  limitedFieldsByDocument.set(document, found);
  return found;
}

export class GraphqlRateLimits {
  readonly #limiter: RateLimiter;
  readonly #clock: Clock;
  /** Live request contexts by their tracking key (the plugin's identity string). */
  readonly #live = new Map<string, LiveContext>();

  constructor(limiter: RateLimiter, clock: Clock) {
    this.#limiter = limiter;
    this.#clock = clock;
  }

  /** Makes a context visible to the plugin while its operation runs; returns the function that forgets it. */
  track(ctx: LiveContext): () => void {
    const id = `${++liveSeq}`;
    (ctx as { [LIVE_KEY]?: string })[LIVE_KEY] = id;
    this.#live.set(id, ctx);
    return () => {
      if (this.#live.get(id) === ctx) this.#live.delete(id);
    };
  }

  /**
   * Admission: the burst slot, together with the window of the operation's first rate-limited root
   * field when there is one; the field's refusal is left on the context for the plugin to report on
   * that field.
   */
  async admit(ctx: LiveContext, query: string | undefined, operationName: string | undefined): Promise<void> {
    const identity = rateLimitIdentity(ctx.scope);
    const endpoint = query !== undefined ? firstLimitedEndpoint(query, operationName) : null;
    if (!endpoint) {
      await this.#limiter.acquireBurst(identity, ctx.scope.plan);
      return;
    }
    try {
      ctx.rateLimit = await this.#limiter.admit(identity, ctx.scope.plan, endpoint);
    } catch (e) {
      if (!isServiceError(e) || e.code !== 'RATE_LIMIT_EXCEEDED') throw e;
      ctx.rateLimitError = e;
    }
    ctx.preCounted = endpoint;
  }

  /**
   * After the operation: a window counted at admission but never asked for by its field (the
   * document was refused before execution) is given back, so a refused document costs no quota.
   * Returns the rate-limit headers of the answer: the refusing window (remaining 0), else the last
   * window counted, else the burst limit.
   */
  async settle(ctx: LiveContext): Promise<Record<string, string>> {
    const headers = this.answerHeaders(ctx);
    if (ctx.preCounted && ctx.rateLimit && !ctx.rateLimitError) {
      await this.#limiter.release(rateLimitIdentity(ctx.scope), ctx.scope.plan, ctx.preCounted, ctx.rateLimit);
      ctx.preCounted = undefined;
      ctx.rateLimit = undefined;
    }
    return headers;
  }

  /**
   * What an answer carries in `extensions`: `cost: { requested, limit }` (the measure of
   * graphql/complexity.ts and the plan's COST_LIMITS; absent when nothing was measured, e.g. a
   * document refused before it ran) and `rateLimit: { limit, remaining, resetAt }` (the window the
   * request counted against, as the X-RateLimit-* headers say). Empty when there is neither.
   */
  answerExtensions(ctx: LiveContext, rateHeaders: Record<string, string> = this.answerHeaders(ctx)): Record<string, unknown> {
    const extensions: Record<string, unknown> = {};
    if (ctx.graphqlCost !== undefined) extensions.cost = { requested: ctx.graphqlCost, limit: COST_LIMITS[ctx.scope.plan] };
    const limit = Number(rateHeaders['X-RateLimit-Limit']);
    if (Number.isFinite(limit)) {
      extensions.rateLimit = { limit, remaining: Number(rateHeaders['X-RateLimit-Remaining']), resetAt: new Date(Number(rateHeaders['X-RateLimit-Reset']) * 1000).toISOString() };
    }
    return extensions;
  }

  /** The rate-limit headers `settle` will answer with (it changes nothing): known once the operation ran. */
  answerHeaders(ctx: LiveContext): Record<string, string> {
    if (ctx.rateLimitError) return ctx.rateLimitError.headers;
    if (ctx.rateLimit && !ctx.preCounted) return headersOf(ctx.rateLimit);
    const limit = BURST_PER_SECOND[ctx.scope.plan];
    return { 'X-RateLimit-Limit': String(limit), 'X-RateLimit-Remaining': String(limit - 1), 'X-RateLimit-Reset': String(Math.floor(this.#clock.now().getTime() / 1000) + 1) };
  }

  /** The envelop plugin that counts every further limited field against its REST twin's bucket. */
  plugin(): Plugin<RequestContext> {
    const identify = liveKeyOf;
    // One config per root type whose field pattern lists its limited fields: the plugin looks up every
    // field of every query in these configs and does not remember a miss, so a config per field made
    // each nested field (id, status, …) test all of them. max 1 + the store's answer (see #store);
    // the message is replaced by transformError.
    const fieldsByType = new Map<string, string[]>();
    for (const key of FIELD_ENDPOINTS.keys()) {
      const [type, field] = key.split('.') as [string, string];
      fieldsByType.set(type, [...(fieldsByType.get(type) ?? []), field]);
    }
    const configByField = [...fieldsByType].map(([type, fields]) => ({
      type, field: fields.length === 1 ? fields[0]! : `{${fields.join(',')}}`, max: 1, window: '60s', message: 'rate limited', identifyFn: identify,
    }));
    return this.#settledAtAdmission(useRateLimiter({
      identifyFn: identify,
      configByField,
      store: this.#store() as never,
      // Interpolation runs before the store is asked, so the message carries only the request id;
      // transformError then reads the limiter's own error (limit, window, retry_after) from the context.
      interpolateMessage: (_message, identifier) => identifier,
      transformError: (key: string) => {
        const ctx = this.#live.get(key);
        return serviceErrorToGraphQL(ctx?.rateLimitError ?? new ServiceError('RATE_LIMIT_EXCEEDED'), undefined, ctx?.scope.requestId ?? key);
      },
    }) as Plugin<RequestContext>);
  }

  /**
   * The @envelop/rate-limiter Store contract is "give me this identity's timestamps". It is answered
   * with the outcome of an atomic conditional increment in the shared store: no timestamps when the
   * call is within its window, one (with max 1) when it is over, which makes the plugin reject it.
   */
  #store() {
    return {
      getForIdentity: async (identity: Identity): Promise<readonly number[]> => {
        const ctx = this.#live.get(identity.contextIdentity);
        // fieldIdentity is "<fieldName>:<identifier>".
        const endpoint = ENDPOINT_BY_FIELD_NAME.get(identity.fieldIdentity.split(':')[0]!);
        if (!ctx || !endpoint) return [];
        if (ctx.preCounted === endpoint) {
          // Counted at admission with the burst slot (its result, or its refusal, is on the context).
          ctx.preCounted = undefined;
          return ctx.rateLimitError ? [Date.now()] : [];
        }
        try {
          ctx.rateLimit = await this.#limiter.consume(rateLimitIdentity(ctx.scope), ctx.scope.plan, endpoint);
          return [];
        } catch (e) {
          if (isServiceError(e) && e.code === 'RATE_LIMIT_EXCEEDED') {
            ctx.rateLimitError = e;
            return [Date.now()];
          }
          throw e;
        }
      },
      // Counting already happened atomically in getForIdentity.
      setForIdentity: (): void => {},
    };
  }

  /**
   * Runs @envelop/rate-limiter's per-execution walk only when it can change the outcome. When the
   * document's only rate-limited field is the one whose window the front door already took at
   * admission, and that window had room, the plugin would ask its store once, get "within the window"
   * back and reject nothing; its TypeInfo walk of the document is then skipped and the admission
   * count is marked used, as the store would. Any other document (a refused window, a second limited
   * field, subscriptions and graphql-ws operations, which are not counted at admission) goes through
   * the plugin unchanged.
   */
  #settledAtAdmission(plugin: Plugin<RequestContext>): Plugin<RequestContext> {
    const onExecute = plugin.onExecute!;
    return {
      ...plugin,
      onExecute: (payload) => {
        // The live context, not the execution's copy of it: the front door reads preCounted afterwards.
        const ctx = this.#live.get(liveKeyOf(payload.args.contextValue));
        if (ctx?.preCounted && !ctx.rateLimitError) {
          const endpoints = limitedFieldEndpoints(payload.args.document, payload.args.schema);
          if (endpoints.length === 1 && endpoints[0] === ctx.preCounted) {
            ctx.preCounted = undefined;
            return;
          }
        }
        return onExecute(payload);
      },
    };
  }
}
