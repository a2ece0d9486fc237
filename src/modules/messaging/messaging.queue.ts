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
 * Rows an instance's loops will send themselves skip the claim: when the accepting instance runs
 * the loops (a campaign batch in the workers, an API send in a combined process) and holds fewer
 * than four batches per loop of them, the acceptance statement inserts the rows already claimed
 * (attempts 1, due only after the lease, `deliveriesInsert`) and hands them to its loops in memory
 * once the transaction committed (`handOffLease`, `handOff`); a loop's batch is at most half
 * handed rows, then the table's due rows (not starved by a stream of handed ones), then handed rows
 * again to fill it. Rows never handed over (a rollback, a crash before
 * or after the commit) are due again when the lease lapses, as a crashed loop's claim is. Per
 * message that saves the claim's UPDATE: a new version of the row and two index entries.
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
import type { Transaction } from 'kysely';
import type { Pool } from 'pg';
import type { Scope } from '../../platform/auth/scope.ts';
import { systemScope } from '../../platform/auth/scope.ts';
import { Listener } from '../../platform/db/listen.ts';
import type { RowSet } from '../../platform/db/rowsets.ts';
import type { Mode } from '../../platform/db/tenant.ts';
import { sqlQuery } from '../../platform/db/sql.ts';
import { DueTicker, settleDue, type DueTable } from '../../platform/jobs/dueTicker.ts';
import { asError } from '../../platform/errors.ts';
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

/** The acceptance statement's row set of the delivery queue: DELIVERY_ROWS' columns and `lease` (seconds, see deliveriesInsert). */
export const DELIVERY_INSERT_ROWS: RowSet = { table: DELIVERIES_TABLE, columns: [...DELIVERY_ROWS.columns, 'lease'] };
/** Their types (rowsParams): text, and the lease an integer. */
export const DELIVERY_INSERT_TYPES: ReadonlyMap<string, string> = new Map(DELIVERY_INSERT_ROWS.columns.map((c) => [c, c === 'lease' ? 'integer' : 'text']));

/**
 * The acceptance statement's insert of delivery rows, its arrays parameters `$firstParam` … (one per
 * DELIVERY_INSERT_ROWS column, rowsParams with DELIVERY_INSERT_TYPES). A row with lease 0 is due
 * now (any loop claims it); a row with a lease is inserted already claimed by the accepting
 * instance (attempts 1, due again once the lease lapses), whose loops take it from memory after the
 * commit (`DeliveryQueue.handOff`): no claim UPDATE for it.
 */
export function deliveriesInsert(firstParam: number): string {
  const p = (i: number) => `$${firstParam + i}`;
  return `insert into messaging_deliveries (message_id, organization_id, mode, plan, request_id, trace_parent, attempts, due_at)
    select d.message_id, d.organization_id, d.mode, d.plan, d.request_id, d.trace_parent, case when d.lease > 0 then 1 else 0 end, now() + make_interval(secs => d.lease)
      from unnest(${p(0)}::text[], ${p(1)}::text[], ${p(2)}::text[], ${p(3)}::text[], ${p(4)}::text[], ${p(5)}::text[], ${p(6)}::int[])
        as d(message_id, organization_id, mode, plan, request_id, trace_parent, lease)
    on conflict (message_id) do nothing`;
}

/** A delivery row inserted already claimed by this instance (deliveriesInsert), for `DeliveryQueue.handOff` once it committed. */
export type HandedDelivery = { message_id: string; organization_id: string; mode: Mode; plan: Plan; request_id: string | null; trace_parent: string | null };

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


/** The deliveries table as `settleDue` sees it: the delivered rows deleted, the failed ones due again later. */
export const DELIVERIES_DUE: DueTable<Claimed> = {
  statement: 'messaging_deliveries_settle',
  table: DELIVERIES_TABLE,
  keys: [{ column: 'message_id', type: 'text' }, { column: 'attempts', type: 'int' }],
  key: (r) => [r.message_id, r.attempts],
};

/** Rows handed over in memory that a queue keeps at most, per loop and row of its batch. */
const HANDED_PER_SLOT = 4;

/**
 * A loop's claim: up to $1 due rows, leased for $2 seconds. The locking subquery runs once (an
 * InitPlan), whatever the plan: as a join's inner side it was rescanned per row and leased every
 * due row (voice's TIMELINE_CLAIM_SQL says more; test/claims-plans.test.ts).
 */
export const CLAIM_SQL = `update messaging_deliveries e set due_at = now() + make_interval(secs => $2), attempts = e.attempts + 1
                  where e.message_id = any(array(select message_id from messaging_deliveries where due_at <= now() order by due_at limit $1 for update skip locked))
              returning e.message_id, e.organization_id, e.mode, e.plan, e.request_id, e.trace_parent, e.paced, e.attempts`;

export class DeliveryQueue {
  readonly #o: Required<DeliveryQueueOptions>;
  readonly #loops: DeliveryLoop[];
  readonly #listener: Listener;
  #target: DeliveryTarget | undefined;
  /** Rows this instance inserted already claimed (handOff), oldest first, with when they were claimed. */
  readonly #handed: { row: Claimed; at: number }[] = [];

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
    // Handed rows not sent yet are due again when their lease lapses.
    this.#handed.length = 0;
  }

  /** Something of this instance's falls due at `at` (ms since the epoch). */
  wake(at: number): void {
    for (const loop of this.#loops) loop.wake(at);
  }

  /**
   * The lease (seconds) with which the acceptance statement may insert `n` delivery rows already
   * claimed for this instance's loops (deliveriesInsert), or 0 (due now, for any loop) when the
   * loops do not run here or already hold enough handed rows. Rows inserted with a lease must be
   * given to `handOff` once their transaction committed; rows that never are (a rollback, a crash)
   * are due again when the lease lapses, as a crashed loop's claim is.
   */
  handOffLease(n: number): number {
    if (!this.#target || !this.#loops.some((loop) => loop.running)) return 0;
    const room = this.#o.batch * this.#loops.length * HANDED_PER_SLOT - this.#handed.length;
    return n <= room ? this.#o.leaseSeconds : 0;
  }

  /** Rows inserted with `handOffLease`'s lease, committed: this instance's loops send them without claiming them. */
  handOff(rows: readonly HandedDelivery[]): void {
    if (rows.length === 0) return;
    const at = Date.now();
    for (const row of rows) this.#handed.push({ row: { ...row, paced: false, attempts: 1 }, at });
    this.wake(at);
  }

  /**
   * Up to `n` handed rows whose claim is still fresh. One older than half the lease is left to a
   * claim once its lease lapsed (the loops fell that far behind; a loop that sent it anyway would
   * find it claimed again, attempts moved on, and settle nothing).
   */
  #takeHanded(n: number): Claimed[] {
    const fresh = Date.now() - (this.#o.leaseSeconds * 1000) / 2;
    let stale = 0;
    while (stale < this.#handed.length && this.#handed[stale]!.at < fresh) stale++;
    if (stale > 0) this.#handed.splice(0, stale);
    return this.#handed.splice(0, n).map((h) => h.row);
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
    // Rows this instance accepted come claimed already (handOff). At most half a batch of them goes
    // before the table's due rows (other instances', retries, paced slots: due earlier, so they are
    // not starved by a stream of handed rows); whatever the claim leaves of the batch is filled with
    // more handed rows.
    let rows = this.#takeHanded(Math.ceil(batch / 2));
    try {
      const claimed = await pool.query<Claimed>({ name: 'messaging_deliveries_claim', text: CLAIM_SQL, values: [batch - rows.length, leaseSeconds] });
      rows = [...rows, ...claimed.rows];
    } catch (e) {
      // The handed rows are sent all the same (their settle may fail too: they are then due again after the lease).
      if (rows.length === 0) throw e;
      log.warn({ err: e }, 'messaging delivery queue: claim failed');
    }
    if (rows.length < batch) rows = [...rows, ...this.#takeHanded(batch - rows.length)];
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
    await settleDue(pool, DELIVERIES_DUE, done, retry, (at) => this.wake(at));
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
