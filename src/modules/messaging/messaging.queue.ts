/**
 * Messaging's delivery queue: one row of `messaging_deliveries` per message waiting to be sent,
 * instead of a pg-boss `messaging.deliver` job (a job is inserted, fetched, completed and archived,
 * each with statements of its own; session 8 measured the fetch and the `complete` of delivery jobs
 * at ~0.4 ms of database time per message). The row is written in the acceptance statement
 * (messaging.batching.ts, `DELIVERY_ROWS`), or with the send in the caller's transaction
 * (`enqueueWithin`); a statement that inserts rows NOTIFYs `messaging_deliveries`, which wakes the
 * idle loops of every instance running the workers.
 *
 * Each instance has `loops` loops (DueTicker): one statement claims up to a batch of due rows (`for
 * update skip locked`, so loops and instances share them) by moving `due_at` a lease ahead and
 * counting the attempt; the sends run together through MessageDelivery.deliver, then one statement
 * deletes the rows that are done and makes the failed ones due again with backoff
 * (`retryDelaySeconds` × 2^(attempt − 1), as the job's retries were). While a batch runs longer
 * than a third of the lease, its rows' lease is extended (a slow provider is not sent to twice).
 * The attempt count is the claim's token: a loop deletes, retries or extends only rows still
 * holding the count it claimed, so a row another loop claimed again after a lapsed lease, or one
 * moved to a paced slot, is left alone.
 *
 * Exactly once at the provider: a crash after the claim leaves the row, due again when the lease
 * lapses; the send is then repeated, which `deliver` skips when the message already left `queued`
 * and the sandbox provider answers with its first send (idempotent by message id). A send paced to
 * a later slot of its sender (messaging.pacing.ts) moves its row to that slot (`paced`, attempts
 * reset) in the transaction that reserves the slot. A row whose sends all failed is dropped after
 * `sendAttempts` claims; `deliver` already marked the message failed on its last attempt unless it
 * threw something else (the message then stays queued and billing's stale-reservation sweep
 * abandons it, as it did a failed job). With tracing on, a row keeps the `traceparent` of the send
 * that queued it and its delivery runs in a span continuing that trace.
 */
import { genericArrays } from '../../platform/db/plans.ts';
import type { Transaction } from 'kysely';
import type { Pool } from 'pg';
import type { Scope } from '../../platform/auth/scope.ts';
import { systemScope } from '../../platform/auth/scope.ts';
import { Listener } from '../../platform/db/listen.ts';
import type { RowSet } from '../../platform/db/rowsets.ts';
import type { Mode } from '../../platform/db/tenant.ts';
import { sqlQuery } from '../../platform/db/sql.ts';
import { DueTicker } from '../../platform/jobs/dueTicker.ts';
import type { Logger } from '../../platform/logger.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import { contextOf, currentTraceparent, SpanKind, tracingEnabled, withSpan } from '../../platform/tracing.ts';

export const DELIVERIES_TABLE = 'messaging_deliveries';
export const DELIVERIES_CHANNEL = 'messaging_deliveries';

/** The rows the acceptance statement inserts (one per accepted message; a second insert is a no-op). */
export const DELIVERY_ROWS: RowSet = {
  table: DELIVERIES_TABLE,
  columns: ['message_id', 'organization_id', 'mode', 'plan', 'request_id', 'trace_parent'],
  onConflict: 'on conflict (message_id) do nothing',
};

/** A message's delivery row (DELIVERY_ROWS' columns), due now. */
export function deliveryRow(scope: Scope, messageId: string): Record<string, unknown> {
  const traceparent = tracingEnabled() ? scope.traceparent ?? currentTraceparent() : undefined;
  return { message_id: messageId, organization_id: scope.organizationId, mode: scope.mode, plan: scope.plan, request_id: scope.requestId ?? null, trace_parent: traceparent ?? null };
}

export type DeliveryTarget = {
  /** Sends the message once (safe to repeat); resolves true when it moved the delivery to a later paced slot. Throws to be retried. */
  deliver(scope: Scope, messageId: string, attempt: number, paced: boolean): Promise<boolean>;
};

type Claimed = { message_id: string; organization_id: string; mode: Mode; plan: Plan; request_id: string | null; trace_parent: string | null; paced: boolean; attempts: number };

export type DeliveryQueueOptions = {
  pool: Pool;
  url: string;
  log: Logger;
  connectTimeoutMs: number;
  /** Rows a loop claims at once (MESSAGING_DELIVERY_CONCURRENCY). */
  batch: number;
  /** Loops per instance (each runs its batch's sends together). */
  loops: number;
  /** Claims of a row before it is dropped (MESSAGING_SEND_ATTEMPTS). */
  sendAttempts: number;
  /** The first retry's delay; each further one doubles it. */
  retryDelaySeconds: number;
  /** How long a claimed row stays invisible to other loops (extended while its batch runs). */
  leaseSeconds?: number;
  /** How often an idle loop looks (rows due later: retries, paced slots, leases of crashed instances). */
  tickMs?: number;
};

const LEASE_SECONDS = 20;
const TICK_MS = 500;

class DeliveryLoop extends DueTicker {
  readonly #tick: () => Promise<number>;
  constructor(tick: () => Promise<number>, options: ConstructorParameters<typeof DueTicker>[0]) {
    super(options);
    this.#tick = tick;
  }

  tick(): Promise<number> {
    return this.#tick();
  }
}


/**
 * A claimed batch's end: the delivered rows deleted, the failed ones due again later. Its arrays
 * are read through sub-selects so the named statement keeps one generic plan (platform/db/plans.ts;
 * the retry arrays are mostly empty, and with their real lengths every custom plan looked cheaper:
 * 8.5 s of planning per 10 minutes in the soak at 566/s). Exported for test/prepared-plans.test.ts.
 */
export const SETTLE_SQL = `with done as (
               delete from messaging_deliveries e using unnest(${genericArrays(['$1::text[]', '$2::int[]'])}) as k(message_id, attempts) where e.message_id = k.message_id and e.attempts = k.attempts)
             update messaging_deliveries e set due_at = now() + make_interval(secs => k.ms / 1000.0)
               from unnest(${genericArrays(['$3::text[]', '$4::int[]', '$5::int[]'])}) as k(message_id, attempts, ms) where e.message_id = k.message_id and e.attempts = k.attempts`;

export class DeliveryQueue {
  readonly #o: Required<DeliveryQueueOptions>;
  readonly #loops: DeliveryLoop[];
  readonly #listener: Listener;
  #target: DeliveryTarget | undefined;

  constructor(options: DeliveryQueueOptions) {
    this.#o = { leaseSeconds: LEASE_SECONDS, tickMs: TICK_MS, ...options };
    this.#loops = Array.from({ length: Math.max(1, options.loops) }, (_, i) => new DeliveryLoop(() => this.#claimAndDeliver(), {
      batch: options.batch, tickMs: this.#o.tickMs, log: options.log, name: `messaging delivery queue ${i + 1}`,
    }));
    this.#listener = new Listener({
      url: options.url, channel: DELIVERIES_CHANNEL, connectTimeoutMs: options.connectTimeoutMs, log: options.log,
      onNotification: () => this.wake(Date.now()), onReconnect: () => this.wake(Date.now()),
    });
  }

  /** What sends the messages (set once it exists). */
  bind(target: DeliveryTarget): void {
    this.#target = target;
  }

  async start(): Promise<void> {
    for (const loop of this.#loops) loop.start();
    await this.#listener.start();
  }

  async stop(): Promise<void> {
    await this.#listener.stop();
    await Promise.all(this.#loops.map((loop) => loop.stop()));
  }

  /** Something of this instance's falls due at `at` (ms since the epoch). */
  wake(at: number): void {
    for (const loop of this.#loops) loop.wake(at);
  }

  /** Queues the message's delivery in the caller's transaction (sends that commit with it). */
  async enqueueWithin(trx: Transaction<unknown>, scope: Scope, messageId: string): Promise<void> {
    const row = deliveryRow(scope, messageId);
    await sqlQuery(trx,
      `insert into messaging_deliveries (message_id, organization_id, mode, plan, request_id, trace_parent) values ($1, $2, $3, $4, $5, $6)
       on conflict (message_id) do nothing`,
      DELIVERY_ROWS.columns.map((c) => row[c]));
  }

  /**
   * Moves the message's delivery to a paced slot at `at`, in the caller's transaction (the one
   * reserving the slot): the row becomes due then with its attempts reset, or is made (a delivery
   * job enqueued before the queue existed).
   */
  async deferWithin(trx: Transaction<unknown>, scope: Scope, messageId: string, at: Date): Promise<void> {
    const row = deliveryRow(scope, messageId);
    await sqlQuery(trx,
      `insert into messaging_deliveries (message_id, organization_id, mode, plan, request_id, trace_parent, paced, attempts, due_at)
       values ($1, $2, $3, $4, $5, $6, true, 0, $7)
       on conflict (message_id) do update set paced = true, attempts = 0, due_at = excluded.due_at`,
      [...DELIVERY_ROWS.columns.map((c) => row[c]), at]);
    this.wake(at.getTime());
  }

  /** Which of the messages still have a delivery row (due, leased or waiting for a retry or a slot). */
  async pending(messageIds: readonly string[]): Promise<Set<string>> {
    if (messageIds.length === 0) return new Set();
    const { rows } = await this.#o.pool.query<{ message_id: string }>('select message_id from messaging_deliveries where message_id = any($1::text[])', [[...messageIds]]);
    return new Set(rows.map((r) => r.message_id));
  }

  /** One loop's tick: claims the due rows and sends them; returns how many it claimed. */
  async #claimAndDeliver(): Promise<number> {
    const target = this.#target;
    if (!target) return 0;
    const { pool, batch, leaseSeconds, log } = this.#o;
    const { rows } = await pool.query<Claimed>({
      name: 'messaging_deliveries_claim',
      text: `update messaging_deliveries e set due_at = now() + make_interval(secs => $2), attempts = e.attempts + 1
               from (select message_id from messaging_deliveries where due_at <= now() order by due_at limit $1 for update skip locked) d
              where e.message_id = d.message_id
          returning e.message_id, e.organization_id, e.mode, e.plan, e.request_id, e.trace_parent, e.paced, e.attempts`,
      values: [batch, leaseSeconds],
    });
    if (rows.length === 0) return 0;
    let running = rows;
    const extend = setInterval(() => {
      pool.query({
        name: 'messaging_deliveries_extend',
        text: `update messaging_deliveries e set due_at = now() + make_interval(secs => $3)
                 from unnest($1::text[], $2::int[]) as k(message_id, attempts) where e.message_id = k.message_id and e.attempts = k.attempts`,
        values: [running.map((r) => r.message_id), running.map((r) => r.attempts), leaseSeconds],
      }).catch((e: unknown) => log.warn({ err: e }, 'messaging delivery queue: lease extension failed'));
    }, (leaseSeconds * 1000) / 3);
    extend.unref();
    let results: (Error | boolean)[];
    try {
      results = await Promise.all(rows.map((row) => this.#deliver(target, row).then((deferred) => deferred, (e: unknown) => asError(e))));
    } finally {
      running = [];
      clearInterval(extend);
    }
    const done: Claimed[] = [];
    const retry: { row: Claimed; ms: number }[] = [];
    rows.forEach((row, i) => {
      const result = results[i];
      if (result === true) return; // moved to its paced slot by the pacing transaction
      if (result === false) {
        done.push(row);
      } else if (row.attempts >= this.#o.sendAttempts) {
        log.error({ err: result, message_id: row.message_id, attempts: row.attempts }, 'messaging delivery queue: delivery dropped after its attempts');
        done.push(row);
      } else {
        if (!(result as { expected?: boolean }).expected) log.warn({ err: result, message_id: row.message_id, attempt: row.attempts }, 'messaging delivery queue: delivery failed, due again');
        retry.push({ row, ms: this.#o.retryDelaySeconds * 1000 * 2 ** (row.attempts - 1) });
      }
    });
    await pool.query({
      name: 'messaging_deliveries_settle',
      text: SETTLE_SQL,
      values: [done.map((r) => r.message_id), done.map((r) => r.attempts), retry.map((r) => r.row.message_id), retry.map((r) => r.row.attempts), retry.map((r) => Math.round(r.ms))],
    });
    const soonest = retry.reduce((m, r) => Math.min(m, r.ms), Number.POSITIVE_INFINITY);
    if (soonest < Number.POSITIVE_INFINITY) this.wake(Date.now() + soonest);
    return rows.length;
  }

  #deliver(target: DeliveryTarget, row: Claimed): Promise<boolean> {
    const scope = systemScope(row.organization_id, row.mode, row.plan, row.request_id ?? row.message_id);
    const attempt = row.attempts - 1;
    if (!row.trace_parent || !tracingEnabled()) return target.deliver(scope, row.message_id, attempt, row.paced);
    return withSpan('messaging.deliver', {
      kind: SpanKind.CONSUMER, parent: contextOf(row.trace_parent),
      attributes: { 'messaging.system': 'postgresql', 'messaging.destination.name': DELIVERIES_TABLE, 'messaging.message.id': row.message_id, 'app.job.attempt': attempt, 'app.organization_id': row.organization_id, 'app.mode': row.mode },
    }, () => {
      const traceparent = currentTraceparent();
      return target.deliver(traceparent ? { ...scope, traceparent } : scope, row.message_id, attempt, row.paced);
    });
  }
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
