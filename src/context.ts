/**
 * What a request (or subscription operation) carries through resolvers and REST handlers. It knows
 * no module: each module's services sit in `modules` under the module's name, and an operation
 * receives its own module's services (see {@link operationsOf}), never another module's.
 */
import DataLoader from 'dataloader';
import type { Scope } from './platform/auth/scope.ts';
import type { RateLimiter, RateLimitResult } from './platform/ratelimit/limiter.ts';
import { declareEndpointLimits } from './platform/ratelimit/plans.ts';
import type { EventBus } from './platform/events/bus.ts';
import type { EventsService } from './platform/events/events.service.ts';
import type { AdmissionTake, DenialRecorder, Operation, OperationContext } from './platform/operations.ts';
import type { IdempotencyClaim } from './platform/idempotency.ts';

/** Per-request DataLoaders, made on first use by the module that needs them (fresh per request). */
export class RequestLoaders {
  readonly #loaders = new Map<string, DataLoader<unknown, unknown, unknown>>();

  get<K, V, C = K>(key: string, make: () => DataLoader<K, V, C>): DataLoader<K, V, C> {
    let loader = this.#loaders.get(key);
    if (!loader) {
      loader = make() as unknown as DataLoader<unknown, unknown, unknown>;
      this.#loaders.set(key, loader);
    }
    return loader as unknown as DataLoader<K, V, C>;
  }
}

export type RequestContext = {
  scope: Scope;
  /** Each module's services by module name; operations are handed their own module's. */
  modules: ReadonlyMap<string, object>;
  /** Platform services every module may use: live notices for subscriptions and the event log. */
  platform: { bus: EventBus; events: EventsService; limiter: RateLimiter };
  loaders: RequestLoaders;
  /** REST: the rate-limit admission still in flight when the operation is invoked (see OperationContext). */
  admission?: Promise<unknown>;
  /** REST: that admission's take and outcome (see OperationContext.admissionTake). */
  admissionTake?: AdmissionTake;
  /** The last rate-limit window this request counted against (for X-RateLimit-* headers). */
  rateLimit?: RateLimitResult;
  /** GraphQL: the measured cost of the operation that runs (yoga.ts's complexity gate), for the answer's `extensions.cost`. */
  graphqlCost?: number;
  /** Audits a denied operation (installed by the composition root). */
  onDenied?: DenialRecorder;
  /** Told after a write operation ran (installed by the composition root: the GraphQL response cache), see OperationContext. */
  onWrite?: OperationContext['onWrite'];
  /**
   * The request's Idempotency-Key claim (POST with the header, GraphQL mutations): operations whose
   * work must happen once record `claim.next()` on their own rows (messaging's sends).
   */
  idempotency?: IdempotencyClaim;
};

/**
 * Declares operations of one module: `run` receives that module's services as its third argument.
 * `const op = operationsOf<VerifyServices>('verify')`, then `op({ name, endpoint, roles, input, run })`.
 */
export function operationsOf<S>(module: string) {
  return <I, O, P = undefined>(op: Omit<Operation<RequestContext, I, O, S, P>, 'module'>): Operation<RequestContext, I, O, S, P> => {
    // The endpoint's rate-limit row is declared here, with its operation (REST and GraphQL share the bucket).
    if (op.limits) declareEndpointLimits(op.endpoint, op.limits);
    return { ...op, module };
  };
}

/**
 * Each installed module's services by module name: derived from the module list (its manifests'
 * `name` and `create`) by augmentation in `src/modules/index.ts`, so this file names no module.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface InstalledModules {}

/** A module's own services, for its resolvers that do not run an operation (subscriptions' loads); typed by the manifest. */
export function servicesOf<K extends keyof InstalledModules & string>(ctx: { modules: ReadonlyMap<string, object> }, module: K): InstalledModules[K] {
  const services = ctx.modules.get(module);
  if (!services) throw new Error(`module ${module} is not installed`);
  return services as InstalledModules[K];
}
