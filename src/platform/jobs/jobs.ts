/**
 * Background jobs on pg-boss (its own `pgboss` schema). Modules register jobs in one registry; a
 * job carries its tenant and its handler runs with an EntityManager bound to that tenant. Jobs
 * enqueued with an EntityManager inside a transaction commit (or roll back) with it.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import { PgBoss, type Db as IDatabase } from 'pg-boss';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import { tenantEm, type TenantRef } from '../db/tenant.ts';
import { PGBOSS_SCHEMA } from '../db/orm.ts';
import { Batcher } from '../db/batcher.ts';
import { sqlQuery } from '../db/sql.ts';
import { systemScope, type Scope } from '../auth/scope.ts';
import { DueJobs } from './dueJobs.ts';
import type { Plan } from '../tenancy/tenancy.entities.ts';
import { contextOf, currentTraceparent, SpanKind, tracingEnabled, withSpan } from '../tracing.ts';

export type TenantEnvelope = TenantRef & { plan: Plan };

export type JobContext = {
  /** Bound to the job's tenant (tenant jobs) or unscoped (platform jobs: use ALL_TENANTS per query). */
  em: EntityManager;
  scope: Scope | undefined;
  jobId: string;
  attempt: number;
  clock: Clock;
  log: Logger;
};

export type JobDefinition<D extends object = Record<string, unknown>> = {
  name: string;
  /** Tenant jobs must be enqueued with a scope; platform jobs (pruning) run for all tenants. */
  tenant: boolean;
  handler: (ctx: JobContext, data: D) => Promise<void>;
  /** Cron expression (UTC) for scheduled platform jobs. */
  schedule?: string;
  retryLimit?: number;
  retryDelaySeconds?: number;
  retryBackoff?: boolean;
  expireInSeconds?: number;
  /** A running job's lease is renewed every half of this; a job whose worker died is retried once it lapses. */
  heartbeatSeconds?: number;
  concurrency?: number;
  /**
   * At most how late a job due later (`startAfter`, a retry after its delay) is fetched once due
   * (default 2 s). New jobs are fetched at once (NOTIFY); due ones are found by the instance's one
   * look for every queue (dueJobs.ts), which runs at the smallest of these intervals.
   */
  pollingIntervalSeconds?: number;
  /** Jobs fetched per poll (each still runs through the handler one by one, `concurrency` at a time). */
  batchSize?: number;
};

/**
 * Without heartbeats a job whose worker was killed stays `active` until expireInSeconds (300 s)
 * passes: the fault harness (`npm run faults`) saw deliveries stall for 5–6 minutes after a
 * kill -9. With them, the supervisor retries such a job once its heartbeat is this old (pg-boss's
 * minimum is 10 s). pg-boss checks heartbeats and leases in its monitor pass, which runs at most
 * every max(monitor, supervise) interval per queue (60 s by default): 10 s here, so a dead worker's
 * job is back within ~20 s (+ the queue's retry delay). The pass also refreshes queue counts.
 */
export const JOB_HEARTBEAT_SECONDS = 10;
const SUPERVISE_INTERVAL_SECONDS = 5;
const MONITOR_INTERVAL_SECONDS = 10;
/** A job definition's `pollingIntervalSeconds` when it sets none. */
const DEFAULT_DUE_SECONDS = 2;
/**
 * Each pg-boss worker's own poll: only a backstop. Due jobs are found by the instance's one look
 * for every queue (dueJobs.ts), new ones by NOTIFY (and by that look when a NOTIFY was missed).
 */
export const WORKER_BACKSTOP_POLL_SECONDS = 30;

/** `traceparent`: the context that enqueued the job (tracing on), so its span continues that trace. */
type Envelope = { tenant: TenantEnvelope | null; data: object; requestId?: string; traceparent?: string };

export class JobRegistry {
  readonly #defs = new Map<string, JobDefinition<never>>();

  register<D extends object>(def: JobDefinition<D>): void {
    if (this.#defs.has(def.name)) throw new Error(`job ${def.name} registered twice`);
    this.#defs.set(def.name, def as unknown as JobDefinition<never>);
  }

  get(name: string): JobDefinition<never> | undefined {
    return this.#defs.get(name);
  }

  all(): JobDefinition<never>[] {
    return [...this.#defs.values()];
  }
}

/** A pg-boss database adapter that runs inside the EntityManager's current transaction. */
function transactionDb(em: EntityManager): IDatabase | undefined {
  const tx = em.getTransactionContext<Transaction<unknown>>();
  if (!tx) return undefined;
  return {
    executeSql: async (text: string, values?: unknown[]) => ({ rows: await sqlQuery<unknown>(tx, text, values ?? []) }),
  };
}

export class Jobs {
  readonly boss: PgBoss;
  readonly #registry: JobRegistry;
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #log: Logger;
  #started = false;
  #due: DueJobs | undefined;

  /** `connectTimeoutMs` bounds acquiring a connection of pg-boss's own pool (DB_CONNECT_TIMEOUT_MS; pg-boss's default is 10 s). */
  constructor(deps: { url: string; registry: JobRegistry; orm: MikroORM; clock: Clock; log: Logger; poolMax?: number; connectTimeoutMs?: number }) {
    this.#registry = deps.registry;
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.boss = new PgBoss({ connectionString: deps.url, schema: PGBOSS_SCHEMA, useListenNotify: true, max: deps.poolMax ?? 5, connectionTimeoutMillis: deps.connectTimeoutMs ?? 10_000,
      superviseIntervalSeconds: SUPERVISE_INTERVAL_SECONDS, monitorIntervalSeconds: MONITOR_INTERVAL_SECONDS });
    this.boss.on('error', (e: unknown) => this.#log.error({ err: e }, 'pg-boss error'));
  }

  /** Creates the schema and queues; with `workers`, also starts the handlers and schedules. */
  async start(opts: { workers: boolean }): Promise<void> {
    await this.boss.start();
    this.#started = true;
    // One read of every queue, then a write only for a queue that is missing or whose options
    // changed: a restart over an unchanged registry costs one query, not two per queue.
    const existing = new Map((await this.boss.getQueues(this.#registry.all().map((d) => d.name))).map((q) => [q.name, q]));
    for (const def of this.#registry.all()) {
      const options = {
        retryLimit: def.retryLimit ?? 5,
        retryDelay: def.retryDelaySeconds ?? 5,
        retryBackoff: def.retryBackoff ?? true,
        expireInSeconds: def.expireInSeconds ?? 300,
        heartbeatSeconds: def.heartbeatSeconds ?? JOB_HEARTBEAT_SECONDS,
        notify: true,
      };
      const queue = existing.get(def.name);
      if (!queue) await this.boss.createQueue(def.name, options);
      else if ((Object.keys(options) as (keyof typeof options)[]).some((k) => queue[k] !== options[k])) await this.boss.updateQueue(def.name, options);
    }
    if (!opts.workers) return;
    for (const def of this.#registry.all()) {
      // Every worker's own poll is a backstop: NOTIFY wakes workers for new jobs, the look below for due ones.
      const poll = WORKER_BACKSTOP_POLL_SECONDS;
      const batch = def.batchSize ?? 1;
      if (batch > 1) {
        // Batches run their jobs in parallel and settle each on its own (a failure retries only
        // that job); a full batch fetches again at once instead of waiting for the next look.
        await this.boss.work<Envelope>(def.name, {
          batchSize: batch, localConcurrency: def.concurrency ?? 1, pollingIntervalSeconds: poll, notifyPollingIntervalSeconds: poll,
          perJobResults: true, burstWhenBatchFull: true,
        }, async (jobs) => {
          const settled = await Promise.allSettled(jobs.map((job) => this.#run(def, job.id, job.retryCount ?? 0, job.data)));
          return jobs.map((job, i) => {
            const r = settled[i]!;
            return r.status === 'fulfilled'
              ? { id: job.id, status: 'completed' as const }
              : { id: job.id, status: 'failed' as const, output: { message: String((r.reason as Error)?.message ?? r.reason) } };
          });
        });
      } else {
        await this.boss.work<Envelope>(def.name, { batchSize: 1, localConcurrency: def.concurrency ?? 2, pollingIntervalSeconds: poll, notifyPollingIntervalSeconds: poll }, async (jobs) => {
          for (const job of jobs) await this.#run(def, job.id, job.retryCount ?? 0, job.data);
        });
      }
      if (def.schedule) await this.boss.schedule(def.name, def.schedule, { tenant: null, data: {} } satisfies Envelope, { tz: 'UTC' });
    }
    const defs = this.#registry.all();
    if (defs.length === 0) return;
    const seconds = defs.reduce((min, d) => Math.min(min, d.pollingIntervalSeconds ?? DEFAULT_DUE_SECONDS), DEFAULT_DUE_SECONDS);
    this.#due = new DueJobs({ boss: this.boss, schema: PGBOSS_SCHEMA, queues: defs.map((d) => d.name), tickMs: seconds * 1000, log: this.#log });
    this.#due.start();
  }

  /** How often this instance looks for due jobs (ms; undefined without workers). */
  get dueTickMs(): number | undefined {
    return this.#due?.tickMs;
  }

  #run(def: JobDefinition<never>, jobId: string, attempt: number, envelope: Envelope): Promise<void> {
    if (!tracingEnabled()) return this.#handle(def, jobId, attempt, envelope);
    const t = envelope.tenant;
    return withSpan(`job ${def.name}`, {
      kind: SpanKind.CONSUMER, parent: contextOf(envelope.traceparent),
      attributes: { 'messaging.system': 'pg-boss', 'messaging.destination.name': def.name, 'messaging.message.id': jobId, 'app.job.attempt': attempt, ...(t ? { 'app.organization_id': t.organizationId, 'app.mode': t.mode } : {}) },
    }, () => this.#handle(def, jobId, attempt, envelope));
  }

  async #handle(def: JobDefinition<never>, jobId: string, attempt: number, envelope: Envelope): Promise<void> {
    const t = envelope.tenant;
    const traceparent = currentTraceparent();
    const scope = t ? { ...systemScope(t.organizationId, t.mode, t.plan, envelope.requestId ?? jobId), ...(traceparent ? { traceparent } : {}) } : undefined;
    // The EntityManager and the logger are made when a handler first uses them: batched handlers
    // (voice events, deliveries) use neither on the happy path.
    const orm = this.#orm;
    const parentLog = this.#log;
    let em: EntityManager | undefined;
    let logger: Logger | undefined;
    const ctx: JobContext = {
      get em() { return (em ??= t ? tenantEm(orm, t) : orm.em.fork({ clear: true })); },
      get log() { return (logger ??= parentLog.child({ job: def.name, job_id: jobId, request_id: envelope.requestId, organization_id: t?.organizationId })); },
      scope, jobId, attempt, clock: this.#clock,
    };
    try {
      await def.handler(ctx, envelope.data as never);
    } catch (e) {
      // Errors that mark an expected retry (e.g. a provider report arriving early) are not warnings.
      if ((e as { expected?: boolean }).expected) ctx.log.debug({ err: e }, 'job will be retried');
      else ctx.log.warn({ err: e }, 'job failed');
      throw e;
    }
  }

  /**
   * Enqueues a job. Pass `em` while inside `em.transactional(...)` to commit the job with the
   * transaction; pass `scope` for tenant jobs.
   */
  async enqueue(name: string, data: object, opts: { scope?: Scope; em?: EntityManager; startAfter?: Date; singletonKey?: string; id?: string } = {}): Promise<string | null> {
    const def = this.#registry.get(name);
    if (!def) throw new Error(`unknown job ${name}`);
    if (def.tenant && !opts.scope) throw new Error(`job ${name} needs a tenant scope`);
    const envelope = this.#envelope(data, opts.scope);
    const db = opts.em ? transactionDb(opts.em) : undefined;
    return this.boss.send(name, envelope, {
      ...(db ? { db } : {}),
      ...(opts.startAfter ? { startAfter: opts.startAfter } : {}),
      ...(opts.singletonKey ? { singletonKey: opts.singletonKey } : {}),
      ...(opts.id ? { id: opts.id } : {}),
    });
  }

  /**
   * The statement that inserts `entries` as jobs of `name`: pg-boss's own multi-row `insert`
   * statement (its `$1` is the jobs' JSON), captured through its `db` option instead of being run,
   * for a group commit that joins it to other inserts in one statement. The text is the same for
   * every call on a queue; `value` carries the jobs. Envelopes are built as `enqueue` builds them;
   * pass `id` to make a second insert of the same job a no-op, `startAfter` for a job due later.
   */
  async insertStatement(name: string, entries: readonly { data: object; scope?: Scope; id?: string; startAfter?: Date }[]): Promise<{ text: string; value: string }> {
    const def = this.#registry.get(name);
    if (!def) throw new Error(`unknown job ${name}`);
    const jobs = entries.map((entry) => {
      if (def.tenant && !entry.scope) throw new Error(`job ${name} needs a tenant scope`);
      return { ...(entry.id ? { id: entry.id } : {}), ...(entry.startAfter ? { startAfter: entry.startAfter.toISOString() } : {}), data: this.#envelope(entry.data, entry.scope) };
    });
    let captured: { text: string; values: unknown[] } | undefined;
    const recorder: IDatabase = {
      executeSql: async (text: string, values?: unknown[]) => {
        captured = { text, values: values ?? [] };
        return { rows: [] };
      },
    };
    await this.boss.insert(name, jobs, { db: recorder });
    const text = captured?.text;
    const value = captured?.values[0];
    if (!text || captured!.values.length !== 1 || typeof value !== 'string' || !text.includes('$1') || /\$[2-9]/.test(text)) {
      throw new Error(`pg-boss insert for ${name} did not produce one statement with one parameter`);
    }
    return { text, value };
  }

  #envelope(data: object, scope: Scope | undefined): Envelope {
    // The scope's context first: a group commit builds every caller's envelope in one caller's context.
    const traceparent = tracingEnabled() ? scope?.traceparent ?? currentTraceparent() : undefined;
    return {
      tenant: scope ? { organizationId: scope.organizationId, mode: scope.mode, plan: scope.plan } : null,
      data,
      requestId: scope?.requestId,
      ...(traceparent ? { traceparent } : {}),
    };
  }

  /**
   * Enqueues a job outside any transaction, sharing one multi-row insert (and one NOTIFY) per queue
   * with concurrent calls (platform/db/batcher.ts). PostgreSQL serializes notifying commits, so
   * high-volume producers (provider status reports) use this instead of `enqueue`. Resolves once
   * the job is stored; pass `id` to make a second insert of the same job a no-op.
   */
  enqueueBatched(name: string, data: object, opts: { scope?: Scope; startAfter?: Date; id?: string } = {}): Promise<true> {
    const def = this.#registry.get(name);
    if (!def) return Promise.reject(new Error(`unknown job ${name}`));
    if (def.tenant && !opts.scope) return Promise.reject(new Error(`job ${name} needs a tenant scope`));
    return this.#batched.submit({
      name,
      job: {
        ...(opts.id ? { id: opts.id } : {}),
        ...(opts.startAfter ? { startAfter: opts.startAfter.toISOString() } : {}),
        data: this.#envelope(data, opts.scope),
      },
    });
  }

  readonly #batched = new Batcher<{ name: string; job: { id?: string; startAfter?: string; data: Envelope } }, true>(async (items) => {
    const byName = new Map<string, { id?: string; startAfter?: string; data: Envelope }[]>();
    for (const item of items) byName.set(item.name, [...(byName.get(item.name) ?? []), item.job]);
    await Promise.all([...byName].map(([name, jobs]) => this.boss.insert(name, jobs)));
    return items.map(() => true as const);
  }, { maxInFlight: 2, isolate: true });

  /**
   * The pg-boss state of jobs of `name` by id (`created`, `retry`, `active`, `completed`,
   * `cancelled`, `failed`); an id with no job (never enqueued, or deleted after its retention) is
   * absent from the map.
   */
  async states(name: string, ids: readonly string[]): Promise<Map<string, string>> {
    const found = await Promise.all(ids.map((id) => this.boss.findJobs(name, { id })));
    return new Map(found.flat().map((job) => [job.id, job.state as string]));
  }

  async ready(): Promise<boolean> {
    if (!this.#started) return false;
    try {
      await this.boss.getQueues();
      return true;
    } catch {
      return false;
    }
  }

  /** Stops fetching, lets running handlers finish (up to `timeoutMs`), then closes. */
  async stop(timeoutMs = 20_000): Promise<void> {
    if (!this.#started) return;
    this.#started = false;
    await this.#due?.stop();
    this.#due = undefined;
    await this.boss.stop({ graceful: true, close: true, timeout: timeoutMs });
  }
}
