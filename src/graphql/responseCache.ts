/**
 * Tenant-safe response cache for GraphQL reads (`@graphql-yoga/plugin-response-cache` over
 * @envelop/response-cache's in-memory LRU).
 *
 * - Keyed by the document, variables and operation name together with the caller's session:
 *   organization, mode, role, the credential (API key or user) and the PHI reason code, plus the
 *   organization's write generation (below). Two organizations, two modes, two credentials never
 *   share an answer, whatever they send.
 * - Only query answers without errors are kept (mutations invalidate, subscriptions are never
 *   cached); a type marked NEVER_CACHED (live state: `RateLimitStatus`, `ConnectorStatus`) is never kept; an organization in HIPAA mode has
 *   nothing cached at all (a PHI read must be decided and written to the PHI access log each time).
 * - Invalidation: a GraphQL mutation invalidates every cached answer holding an entity its result
 *   names (typename + id, the plugin's own); every write operation (REST or GraphQL, through
 *   `invoke`, platform/operations.ts `onWrite`) and every domain event of the organization (the live
 *   bus: every instance, workers' changes included) bumps the organization and mode's generation,
 *   so no answer cached before it is served again, and invalidates the event's resource by typename
 *   + id. A write on another instance without an event is seen within the TTL.
 * - TTL RESPONSE_CACHE_TTL_MS; at most RESPONSE_CACHE_MAX answers per process (least recently used
 *   dropped first). A hit says `extensions.responseCache: { hit: true }`.
 */
import type { GraphQLSchema } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { createInMemoryCache, useResponseCache } from '@graphql-yoga/plugin-response-cache';
import type { RequestContext } from '../context.ts';
import type { Scope } from '../platform/auth/scope.ts';
import { typeNameOfId } from '../platform/ids.ts';
import type { EventBus } from '../platform/events/bus.ts';
import type { Clock } from '../platform/clock.ts';

/** How long a cached answer is served (ms). */
export const RESPONSE_CACHE_TTL_MS = 30_000;
/** Answers kept per process. */
export const RESPONSE_CACHE_MAX = 2_000;
/**
 * The `extensions` of a type whose answers are never cached: live state that changes with no write
 * or event to invalidate it (a rate-limit window, a carrier connector's binds coming up or down).
 * The type that holds such state says so where it is defined (Pothos `extensions`).
 */
export const NEVER_CACHED = { responseCache: 'never' } as const;

/** The schema's types marked NEVER_CACHED. */
export function neverCachedTypes(schema: GraphQLSchema): string[] {
  return Object.values(schema.getTypeMap()).filter((t) => t.extensions?.responseCache === NEVER_CACHED.responseCache).map((t) => t.name);
}

type Cacheable = { hipaa: boolean };
const CACHEABLE = Symbol('graphql.responseCache');

export class GraphqlResponseCache {
  readonly #cache = createInMemoryCache({ max: RESPONSE_CACHE_MAX });
  readonly #generations = new Map<string, number>();
  /** Bumped when the bus ended our subscription (we fell behind): every tenant's reads at once. */
  #epoch = 0;
  readonly #hipaaMode: (organizationId: string) => Promise<boolean>;
  readonly #clock: Clock;

  /**
   * `hipaaMode`: whether the organization is in HIPAA mode now (the phi port's cached lookup);
   * `clock`: the service's time, whose TTL-long periods are part of the key, so an answer is never
   * served into a later period of the service's clock (what a cursor's or a code's expiry reads).
   */
  constructor(clock: Clock, hipaaMode: (organizationId: string) => Promise<boolean>) {
    this.#clock = clock;
    this.#hipaaMode = hipaaMode;
  }

  /** A write of the organization in this mode: nothing cached before it is served again; `resourceId`'s entity is dropped. */
  written(organizationId: string, mode: string, resourceId?: string): void {
    const tenant = `${organizationId}\u0000${mode}`;
    this.#generations.set(tenant, (this.#generations.get(tenant) ?? 0) + 1);
    const typename = resourceId ? typeNameOfId(resourceId) : undefined;
    if (typename && resourceId) void this.#cache.invalidate([{ typename, id: resourceId }]);
  }

  /**
   * Follows the live bus (every instance's committed events): each event invalidates its
   * organization's reads (written). A consumer that fell behind is ended by the bus: everything is
   * dropped and it subscribes again. Returns the function that stops following.
   */
  follow(bus: Pick<EventBus, 'subscribe'>): () => void {
    let stream: ReturnType<EventBus['subscribe']> | undefined;
    let stopped = false;
    const run = async () => {
      while (!stopped) {
        stream = bus.subscribe((n) => n.kind === 'event');
        try {
          for await (const n of stream) if (n.kind === 'event') this.written(n.organizationId, n.mode, n.resourceId);
        } catch {
          // Fell behind: no notice may be missed silently, so nothing cached is trusted.
          this.#epoch++;
        }
      }
    };
    void run();
    return () => {
      stopped = true;
      void stream?.return?.(undefined);
    };
  }

  /** The session part of the cache key: who asks, with which rights, after which write. */
  sessionOf(scope: Scope): string {
    const generation = this.#generations.get(`${scope.organizationId}\u0000${scope.mode}`) ?? 0;
    const period = Math.floor(this.#clock.now().getTime() / RESPONSE_CACHE_TTL_MS);
    return [scope.organizationId, scope.mode, scope.role, scope.actor.type, scope.actor.id, scope.phiReason ?? '', this.#epoch, generation, period].join('\u0000');
  }

  /** The plugins, to be placed after the persisted operations, the complexity gate and the rate limits. */
  plugins(schema: GraphQLSchema): Plugin<RequestContext>[] {
    return [this.#cachePlugin(neverCachedTypes(schema)), onlyHits()];
  }

  #cachePlugin(ignoredTypes: string[]): Plugin<RequestContext> {
    const requestContextOf = (context: unknown): RequestContext | undefined => {
      const c = context as { requestContext?: RequestContext; scope?: Scope };
      return c.requestContext ?? (c.scope ? (context as RequestContext) : undefined);
    };
    const marked = (ctx: RequestContext | undefined) => (ctx as { [CACHEABLE]?: Cacheable } | undefined)?.[CACHEABLE];
    return useResponseCache({
      // Asked first (onParams), and may wait: whether the organization is in HIPAA mode is noted on
      // the request context for `enabled`, which must answer at once.
      session: (_request, context) => {
        const ctx = requestContextOf(context);
        if (!ctx) return null;
        return this.#hipaaMode(ctx.scope.organizationId).then((hipaa) => {
          (ctx as { [CACHEABLE]?: Cacheable })[CACHEABLE] = { hipaa };
          return this.sessionOf(ctx.scope);
        });
      },
      // Looked up only once the complexity gate has measured the operation (its onExecute comes
      // first), never by Yoga's onParams shortcut: a hit is then refused by the same limits, counted
      // by the same rate limits and answers the same `extensions.cost` as a miss.
      enabled: (_request, context) => {
        const ctx = requestContextOf(context);
        const m = marked(ctx);
        return !!m && !m.hipaa && ctx!.graphqlCost !== undefined;
      },
      cache: this.#cache,
      ttl: RESPONSE_CACHE_TTL_MS,
      ignoredTypes,
      includeExtensionMetadata: true,
      // No ETag / Last-Modified (the plugin's default adds them): a conditional request would ask
      // the cache by key before any session is known.
      shouldCacheResult: ({ result }) => !result.errors?.length,
    }) as Plugin<RequestContext>;
  }
}

/**
 * `extensions.responseCache` only on a hit (`{ hit: true }`): a miss, what was stored and what a
 * mutation invalidated are left out of answers.
 */
function onlyHits(): Plugin<RequestContext> {
  return {
    onExecute: () => ({
      onExecuteDone({ result, setResult }) {
        if (!result || typeof result !== 'object' || Symbol.asyncIterator in result) return;
        const r = result as { extensions?: Record<string, unknown> & { responseCache?: { hit?: boolean } } };
        const meta = r.extensions?.responseCache;
        if (!meta) return;
        const { responseCache: _, ...rest } = r.extensions!;
        setResult({ ...result, extensions: meta.hit ? { ...rest, responseCache: { hit: true } } : Object.keys(rest).length ? rest : undefined } as never);
      },
    }),
  };
}
