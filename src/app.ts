/**
 * The composition root: builds the platform (database, auth, limits, jobs) and the modules, and
 * hands them to the HTTP server. `main.ts` and the tests both start the service through here.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Config } from './config.ts';
import { RequestLoaders, type RequestContext } from './context.ts';
import { systemClock, type Clock } from './platform/clock.ts';
import { createLogger, type Logger } from './platform/logger.ts';
import { createOrm, createPool, runMigrations } from './platform/db/orm.ts';
import { excessPrivileges, migrateAsOwner, roleOf } from './platform/db/roles.ts';
import { Authenticator } from './platform/auth/authenticate.ts';
import type { Scope } from './platform/auth/scope.ts';
import { CursorCodec } from './platform/pagination.ts';
import { PgCounterStore, RateLimiter, type CounterStore } from './platform/ratelimit/limiter.ts';
import { RedisCounterStore } from './platform/ratelimit/redisStore.ts';
import { IdempotencyStore } from './platform/idempotency.ts';
import { JobRegistry, Jobs } from './platform/jobs/jobs.ts';
import { EventBus } from './platform/events/bus.ts';
import { EventRelay } from './platform/events/relay.ts';
import { EventsService } from './platform/events/events.service.ts';
import { RestRouter } from './rest/router.ts';
import { createGraphQL } from './graphql/yoga.ts';
import { GraphqlRateLimits } from './graphql/rateLimits.ts';
import { GraphqlResponseCache } from './graphql/responseCache.ts';
import { PortRegistry, type ModuleManifest, type ModuleWorkers, type Platform, type ProviderCallbackHandler, type ProviderCallbackRequest, type ProviderPageHandler } from './modules/manifest.ts';
import { ENTITIES, EVENT_TYPES, MODULES, type ModuleServices } from './modules/index.ts';
import { createHttpServer, type HttpServer } from './server.ts';
import { ServiceError } from './platform/errors.ts';
import { startTracing, type Tracing } from './platform/tracing.ts';
import { createMetrics } from './http/metrics.ts';
import { installTwilioCallbacks } from './twilio/callbacks.ts';
import { MessagingTwiml } from './twilio/twiml/messaging.ts';
import { installTwiml } from './twilio/twiml/install.ts';
import { TwilioTokens } from './twilio/tokens.ts';
import { twilioRenderers } from './twilio/routes.ts';

/** Every module's services flattened by name, plus the platform's live bus and event log. */
export type Services = ModuleServices & { bus: EventBus; events: EventsService };

export type AppOptions = {
  config: Config;
  databaseUrl: string;
  /**
   * The owner role's connection (DATABASE_MIGRATION_URL; the embedded cluster's superuser): start()
   * runs migrations and pg-boss's schema through it and grants the role of `databaseUrl` what the
   * service needs (platform/db/roles.ts). Without it, migrations run through `databaseUrl`.
   */
  migrationUrl?: string;
  clock?: Clock;
  log?: Logger;
  /** Extra jobs (tests register probes here). */
  registerJobs?: (registry: JobRegistry) => void;
};

export type App = {
  config: Config;
  clock: Clock;
  log: Logger;
  orm: MikroORM;
  pool: Pool;
  services: Services;
  jobs: Jobs;
  authenticator: Authenticator;
  limiter: RateLimiter;
  idempotency: IdempotencyStore;
  cursors: CursorCodec;
  rest: RestRouter;
  http: HttpServer;
  relay: EventRelay;
  /** The OpenTelemetry SDK when tracing is configured (OTEL_EXPORTER_OTLP_ENDPOINT); stopped with the app. */
  tracing: Tracing | undefined;
  /** Builds the per-request context for a scope (fresh DataLoaders each time). */
  contextFor(scope: Scope): RequestContext;
  /** Applies migrations, starts pg-boss (and workers when `workers`). */
  start(opts?: { workers?: boolean }): Promise<void>;
  /** Drains HTTP and jobs, then closes database connections. */
  stop(): Promise<void>;
};

async function excessPrivilegesOf(pool: Pool): Promise<string[]> {
  const client = await pool.connect();
  try {
    return await excessPrivileges(client);
  } finally {
    client.release();
  }
}

export async function createApp(opts: AppOptions): Promise<App> {
  const { config } = opts;
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(config.logLevel);
  // Process-wide (the OpenTelemetry API is global): before any pool exists, so every query is seen.
  const tracing = await startTracing(config.tracing);
  const timeouts = { connectTimeoutMs: config.dbConnectTimeoutMs, statementTimeoutMs: config.dbStatementTimeoutMs };
  const pool = createPool(opts.databaseUrl, config.dbPoolSize, timeouts);
  const orm = await createOrm(opts.databaseUrl, { entities: ENTITIES, poolMax: config.dbPoolSize, timeouts });
  const cursors = new CursorCodec(config.appSecret, config.cursorTtlSeconds, clock);
  // Counters are shared state: PostgreSQL by default, Redis when REDIS_URL is set.
  const counterStore: CounterStore = config.redisUrl ? new RedisCounterStore(config.redisUrl, `rl:${config.redisPrefix}`, config.redisTimeoutMs) : new PgCounterStore(pool);
  const limiter = new RateLimiter(counterStore, clock);
  const idempotency = new IdempotencyStore(pool, clock, config.appSecret);
  const authenticator = new Authenticator({ pool, orm, config, clock, log });

  const registry = new JobRegistry();
  const jobs = new Jobs({ url: opts.databaseUrl, registry, orm, clock, log, poolMax: Math.max(2, Math.ceil(config.dbPoolSize / 2)), connectTimeoutMs: config.dbConnectTimeoutMs });
  const bus = new EventBus(opts.databaseUrl, log, config.dbConnectTimeoutMs);
  const events = new EventsService({ orm, cursors });
  // Off (no-ops, /metrics 404) without METRICS_TOKEN; the route table is read when the first request is counted.
  let routes: () => RestRouter['routes'] = () => [];
  const metrics = createMetrics({ token: config.metricsToken, pool, routes: () => routes() });
  const instruments = metrics.instruments;
  const relay = new EventRelay({ orm, url: opts.databaseUrl, log, instruments, connectTimeoutMs: config.dbConnectTimeoutMs });
  const platform: Platform = {
    config, clock, log, orm, pool, databaseUrl: opts.databaseUrl, cursors, jobs, bus, events, relay, limiter, idempotency,
    eventTypes: EVENT_TYPES, authChanged: () => authenticator.invalidate(), instruments,
  };

  // Each module is built from the platform and the ports it declared; ports forward to their
  // providers, which are all registered before anything runs (verify() fails at start otherwise).
  const ports = new PortRegistry();
  const modules = new Map<string, object>();
  const installed: { manifest: ModuleManifest; services: object }[] = [];
  for (const manifest of MODULES as readonly ModuleManifest[]) {
    const services = manifest.create(platform, ports.resolverFor(manifest.name, manifest.requires ?? [], manifest.optional ?? []));
    modules.set(manifest.name, services);
    installed.push({ manifest, services });
  }
  for (const { manifest, services } of installed) if (manifest.provides) ports.provide(manifest.name, manifest.provides(services, platform));
  ports.verify(MODULES);

  const callbacks = new Map<string, ProviderCallbackHandler>();
  const pages = new Map<string, ProviderPageHandler>();
  const moduleWorkers: ModuleWorkers[] = [];
  for (const { manifest, services } of installed) {
    manifest.jobs?.(registry, services, platform);
    for (const [provider, handler] of Object.entries(manifest.callbacks?.(services, platform) ?? {})) {
      if (callbacks.has(provider)) throw new Error(`provider callback ${provider} is declared twice (second time by ${manifest.name})`);
      callbacks.set(provider, handler);
    }
    for (const [provider, handler] of Object.entries(manifest.pages?.(services, platform) ?? {})) {
      if (pages.has(provider)) throw new Error(`provider page ${provider} is declared twice (second time by ${manifest.name})`);
      pages.set(provider, handler);
    }
    const w = manifest.workers?.(services, platform);
    if (w) moduleWorkers.push(w);
  }
  opts.registerJobs?.(registry);
  let workersRunning = false;

  const services = Object.assign({}, ...installed.map((m) => m.services), { bus, events }) as Services;
  // The Twilio-compatible surface's callbacks (form-encoded, X-Twilio-Signature) go through the webhooks context.
  const twilioTokens = new TwilioTokens({ orm, appSecret: config.appSecret });
  const messagingTwiml = new MessagingTwiml({ orm, messaging: services.messaging, tokens: twilioTokens, allowLoopback: config.allowLoopback, log });
  installTwilioCallbacks(services.callbackFormats, twilioTokens, twilioRenderers, messagingTwiml);
  // Voice TwiML given to Calls.json runs as the calls' script (twilio/twiml).
  installTwiml({ calls: services.calls, dialing: services.callDialing, registry, jobs, tokens: twilioTokens, pool, allowLoopback: config.allowLoopback });
  const rest = new RestRouter(MODULES.flatMap((m) => [...(m.routes ?? [])]));
  routes = () => rest.routes;
  const onDenied = (scope: Scope, action: string, details: Record<string, unknown>) => authenticator.auditDenied(scope, action, details);
  const livePlatform = { bus, events, limiter };
  // The GraphQL response cache (graphql/responseCache.ts): nothing cached for an organization in
  // HIPAA mode (the `phi` port's cached lookup, when the HIPAA module is installed), forgotten on every write and every event.
  const phi = ports.resolverFor('graphql', [], ['phi']).optional('phi');
  const responseCache = new GraphqlResponseCache(clock, async (organizationId) => {
    const port = phi();
    return port ? (await port.writer(organizationId)) !== null : false;
  });
  const onWrite = (scope: Scope, _operation: string, resourceId: string | undefined) => responseCache.written(scope.organizationId, scope.mode, resourceId);
  const contextFor = (scope: Scope): RequestContext => ({ scope, modules, platform: livePlatform, loaders: new RequestLoaders(), onDenied, onWrite });

  const graphqlRateLimits = new GraphqlRateLimits(limiter, clock);
  const yoga = createGraphQL(graphqlRateLimits, services.graphqlDocuments, responseCache);
  let unfollow = () => {};
  // A provider's callbacks go to the module that owns that provider, else to the catch-all ('*').
  const providerCallback = async (provider: string, raw: string, signature: string | undefined, request: ProviderCallbackRequest) => {
    const handler = callbacks.get(provider) ?? callbacks.get('*');
    if (!handler) throw new ServiceError('NOT_FOUND', `No provider ${provider} calls back here`, { provider });
    return (await handler(provider, raw, signature, request)) ?? {};
  };
  const providerPage = (provider: string) => {
    const handler = pages.get(provider);
    return handler ? (query: URLSearchParams) => handler(provider, query) : undefined;
  };
  const http = createHttpServer({ config, clock, log, pool, orm, authenticator, limiter, idempotency, rest, yoga, graphqlRateLimits, persistedDocument: async (organizationId: string, id: string) => (await services.graphqlDocuments.find(organizationId, id))?.document, jobs, contextFor, providerCallback, providerPage, metrics });

  return {
    config, clock, log, orm, pool, services, jobs, authenticator, limiter, idempotency, cursors, rest, http, contextFor, relay, tracing,
    async start(startOpts = {}) {
      if (opts.migrationUrl) await migrateAsOwner(opts.migrationUrl, roleOf(opts.databaseUrl), ENTITIES);
      else await runMigrations(orm);
      const excess = await excessPrivilegesOf(pool);
      if (excess.length > 0) {
        log.warn({ privileges: excess }, 'the service\'s database role can remove PHI access log entries: run it under a role that owns nothing (DATABASE_URL) and migrate as the owner (DATABASE_MIGRATION_URL); docs/operations.md, "Database roles"');
      }
      await authenticator.start();
      await bus.start();
      unfollow = responseCache.follow(bus);
      const workers = startOpts.workers ?? config.workers;
      await jobs.start({ workers });
      if (workers) {
        await relay.start();
        for (const w of moduleWorkers) await w.start();
        workersRunning = true;
      }
    },
    async stop() {
      await http.drain(10_000);
      unfollow();
      await authenticator.stop();
      if (workersRunning) {
        await relay.stop();
        for (const w of moduleWorkers) await w.stop();
      }
      await bus.stop();
      await jobs.stop();
      for (const { manifest, services: s } of installed) await manifest.close?.(s);
      await counterStore.close?.();
      await orm.close();
      await pool.end();
      await tracing?.shutdown();
    },
  };
}
