/**
 * The composition root: builds the platform (database, auth, limits, jobs) and the modules, and
 * hands them to the HTTP server. `main.ts` and the tests both start the service through here.
 */
import DataLoader from 'dataloader';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Config } from './config.ts';
import type { Loaders, RequestContext, Services } from './context.ts';
import { systemClock, type Clock } from './platform/clock.ts';
import { createLogger, type Logger } from './platform/logger.ts';
import { createOrm, createPool, runMigrations } from './platform/db/orm.ts';
import { Authenticator } from './platform/auth/authenticate.ts';
import type { Scope } from './platform/auth/scope.ts';
import { CursorCodec } from './platform/pagination.ts';
import { PgCounterStore, RateLimiter, type CounterStore } from './platform/ratelimit/limiter.ts';
import { RedisCounterStore } from './platform/ratelimit/redisStore.ts';
import { IdempotencyStore } from './platform/idempotency.ts';
import { JobRegistry, Jobs } from './platform/jobs/jobs.ts';
import { SettingsService } from './modules/settings/settings.service.ts';
import { registerSettingsJobs } from './modules/settings/settings.jobs.ts';
import { settingsRoutes } from './modules/settings/settings.rest.ts';
import { RestRouter } from './rest/router.ts';
import { createGraphQL } from './graphql/yoga.ts';
import { createMessagingProviders } from './providers/messaging/registry.ts';
import { PgSendStore } from './providers/messaging/sendStore.ts';
import { ConsentCheck } from './modules/contacts/consent.check.ts';
import { MessagingService, STATUS_REPORT_JOB } from './modules/messaging/messaging.service.ts';
import { TemplatesService } from './modules/messaging/templates.service.ts';
import { registerMessagingJobs, TEMPLATE_DECISION_JOB } from './modules/messaging/messaging.jobs.ts';
import { messagingRoutes } from './modules/messaging/messaging.rest.ts';
import { handleProviderCallback } from './modules/messaging/messaging.callbacks.ts';
import { WebhooksService } from './modules/webhooks/webhooks.service.ts';
import { WebhookWorker } from './modules/webhooks/webhooks.worker.ts';
import { webhookRoutes } from './modules/webhooks/webhooks.rest.ts';
import { NumbersService } from './modules/numbers/numbers.service.ts';
import { registerNumbersJobs } from './modules/numbers/numbers.jobs.ts';
import { numberRoutes } from './modules/numbers/numbers.rest.ts';
import { createNumbersProviders } from './providers/numbers/types.ts';
import { SandboxNumbersProvider } from './providers/numbers/sandbox.ts';
import { VerifyService } from './modules/verify/verify.service.ts';
import { registerVerifyJobs } from './modules/verify/verify.jobs.ts';
import { verifyRoutes } from './modules/verify/verify.rest.ts';
import { ContactsService } from './modules/contacts/contacts.service.ts';
import { registerContactsJobs } from './modules/contacts/contacts.jobs.ts';
import { contactRoutes } from './modules/contacts/contacts.rest.ts';
import { EventBus } from './platform/events/bus.ts';
import { EventRelay } from './platform/events/relay.ts';
import { EventsService } from './platform/events/events.service.ts';
import { createHttpServer, type HttpServer } from './server.ts';

export type AppOptions = {
  config: Config;
  databaseUrl: string;
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
  webhookWorker: WebhookWorker;
  /** Builds the per-request context for a scope (fresh DataLoaders each time). */
  contextFor(scope: Scope): RequestContext;
  /** Applies migrations, starts pg-boss (and workers when `workers`). */
  start(opts?: { workers?: boolean }): Promise<void>;
  /** Drains HTTP and jobs, then closes database connections. */
  stop(): Promise<void>;
};

export async function createApp(opts: AppOptions): Promise<App> {
  const { config } = opts;
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(config.logLevel);
  const pool = createPool(opts.databaseUrl, config.dbPoolSize);
  const orm = await createOrm(opts.databaseUrl, { poolMax: config.dbPoolSize });
  const cursors = new CursorCodec(config.appSecret, config.cursorTtlSeconds, clock);
  // Counters are shared state: PostgreSQL by default, Redis when REDIS_URL is set.
  const counterStore: CounterStore = config.redisUrl ? new RedisCounterStore(config.redisUrl, `rl:${config.redisPrefix}`) : new PgCounterStore(pool);
  const limiter = new RateLimiter(counterStore, clock);
  const idempotency = new IdempotencyStore(pool, clock, config.appSecret);
  const authenticator = new Authenticator({ pool, orm, config, clock, log });

  const registry = new JobRegistry();
  const jobs = new Jobs({ url: opts.databaseUrl, registry, orm, clock, log, poolMax: Math.max(2, Math.ceil(config.dbPoolSize / 2)) });
  // Providers report back later through durable jobs, applied by the same code as real callbacks.
  const later = (delayMs: number) => new Date(Date.now() + delayMs);
  const providers = createMessagingProviders({
    smtpUrl: config.messaging.smtpUrl,
    store: new PgSendStore(pool),
    // Reports and decisions are high-volume: batched job inserts share one NOTIFY (see Jobs.enqueueBatched).
    reports: { schedule: async (report, delayMs) => { await jobs.enqueueBatched(STATUS_REPORT_JOB, report, { startAfter: later(delayMs) }); } },
    delays: config.messaging.sandbox,
    decisions: { schedule: async (decision, delayMs) => { await jobs.enqueueBatched(TEMPLATE_DECISION_JOB, decision, { startAfter: later(delayMs) }); } },
    reviewAfterMs: config.messaging.sandbox.templateReviewMs,
  });

  // Inbound messages to an owned number are called back at its sms_webhook_url (numbers answers the lookup).
  // Contacts enforces consent on every send and answers inbound SMS keywords (STOP/START/HELP).
  const consentCheck = new ConsentCheck(pool);
  const messaging = new MessagingService({
    orm, pool, clock, config, cursors, jobs, providers,
    inboundWebhook: (tenant, channel, to) => services.numbers.inboundWebhookUrl(tenant, channel, to),
    consent: { assertCanMessage: (tenant, channel, recipient) => services.contacts.consent.assertCanContact(tenant, channel, recipient) },
    inboundHook: (tx, tenant, message) => services.contacts.handleInbound(tx, tenant, message),
  });
  const numberProviders = createNumbersProviders({ sandbox: new SandboxNumbersProvider() });
  const services: Services = {
    settings: new SettingsService({ orm, clock, config, cursors, onAuthChanged: () => authenticator.invalidate() }),
    messaging,
    templates: new TemplatesService({ orm, clock, cursors, reviewer: providers.reviewer, jobs }),
    webhooks: new WebhooksService({ orm, clock, config, cursors }),
    numbers: new NumbersService({ orm, clock, config, cursors, jobs, providers: numberProviders, senders: messaging }),
    verify: new VerifyService({ orm, clock, config, cursors, messaging, sandboxSends: new PgSendStore(pool) }),
    contacts: new ContactsService({ orm, pool, clock, cursors, jobs, messaging, consentCheck }),
    bus: new EventBus(opts.databaseUrl, log),
    events: new EventsService({ orm }),
  };
  // The outbox relay hands committed events to webhook fan-out (and, through the bus, to subscribers).
  const relay = new EventRelay({ orm, url: opts.databaseUrl, clock, log });
  relay.addConsumer((tx, event) => services.webhooks.fanOut(tx, event));
  const webhookWorker = new WebhookWorker({ service: services.webhooks, log, intervalMs: config.webhooks.pollIntervalMs, concurrency: config.webhooks.concurrency });
  relay.onDispatched = () => void webhookWorker.poll();
  let workersRunning = false;

  registerSettingsJobs(registry, { services, limiter, idempotency });
  registerMessagingJobs(registry, { config, messaging: services.messaging, templates: services.templates });
  registerNumbersJobs(registry, { numbers: services.numbers });
  registerVerifyJobs(registry, { verify: services.verify });
  registerContactsJobs(registry, { contacts: services.contacts });
  opts.registerJobs?.(registry);

  const rest = new RestRouter([...settingsRoutes, ...messagingRoutes, ...webhookRoutes, ...numberRoutes, ...verifyRoutes, ...contactRoutes]);
  const onDenied = (scope: Scope, action: string, details: Record<string, unknown>) => authenticator.auditDenied(scope, action, details);

  const contextFor = (scope: Scope): RequestContext => {
    const loaders: Loaders = {
      organization: new DataLoader(async (ids) => {
        const orgs = await services.settings.organizationsByIds(ids);
        const byId = new Map(orgs.map((o) => [o.id, o]));
        return ids.map((id) => byId.get(id) ?? new Error(`organization ${id} not found`));
      }),
      contactLists: new DataLoader(async (ids) => {
        const lists = await services.contacts.listsOf(scope, ids);
        return ids.map((id) => lists.get(id) ?? []);
      }),
      contactLastActivity: new DataLoader(async (contacts) => {
        const latest = await services.contacts.lastActivityOf(scope, contacts);
        return contacts.map((c) => latest.get(c.id) ?? null);
      }, { cacheKeyFn: (c) => c.id }),
    };
    return { scope, services, loaders, onDenied };
  };

  const yoga = createGraphQL(limiter);
  const providerCallback = (provider: string, raw: string, signature: string | undefined) =>
    handleProviderCallback({ messaging: services.messaging, clock, providerSecret: config.providerSecret }, provider, raw, signature);
  const http = createHttpServer({ config, clock, log, pool, orm, authenticator, limiter, idempotency, rest, yoga, jobs, contextFor, providerCallback });

  return {
    config, clock, log, orm, pool, services, jobs, authenticator, limiter, idempotency, cursors, rest, http, contextFor, relay, webhookWorker,
    async start(startOpts = {}) {
      await runMigrations(orm);
      await authenticator.start();
      await services.bus.start();
      const workers = startOpts.workers ?? config.workers;
      await jobs.start({ workers });
      if (workers) {
        await relay.start();
        webhookWorker.start();
        workersRunning = true;
      }
    },
    async stop() {
      await http.drain(10_000);
      await authenticator.stop();
      if (workersRunning) {
        await relay.stop();
        await webhookWorker.stop();
      }
      await services.bus.stop();
      await jobs.stop();
      await providers.close();
      await counterStore.close?.();
      await orm.close();
      await pool.end();
    },
  };
}
