/**
 * The outbox relay: hands each committed event to the consumers (webhook fan-out, flow triggers)
 * and takes it off the outbox, all in one transaction, so an event is dispatched exactly once even
 * with several instances (FOR UPDATE SKIP LOCKED). The relay tells live subscribers nothing: the
 * statement trigger that queues the events NOTIFYs their live notices when they commit (migration
 * `20261130010000_events_live_notify`; until then the relay announced each batch once it had read it).
 * The outbox is the narrow table `events_outbox` (one id per undispatched event): a statement
 * trigger on `events` fills it with the ids each statement inserted and NOTIFYs `events_outbox`
 * at commit (a 1 s poll is the backstop); the relay deletes a batch's ids when it dispatches it.
 * Events are insert-only (marking each one dispatched rewrote the whole row through every index).
 *
 * The hot path is plain parameterized SQL on the ORM's connection pool (no unit of work): a batch
 * of up to BATCH events costs a fixed handful of statements whatever its size — read and lock the
 * batch, whatever the consumers write (webhook fan-out: one endpoint read and one multi-row insert
 * for the whole batch, through `beforeCommit`), then one statement that deletes the batch's outbox
 * rows, sent with the COMMIT right behind it (sql.ts `sendBeforeCommit`: one round trip for both; it is guarded to fail
 * outside the relay's transaction, and when it fails the COMMIT rolls the batch back).
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.ts';
import type { Mode } from '../db/tenant.ts';
import { prepared, sameTransaction, sendBeforeCommit, sqlClient, sqlQuery, TRANSACTION_ID_SQL } from '../db/sql.ts';
import { Listener } from '../db/listen.ts';
import { NO_INSTRUMENTS, type Instruments } from '../instruments.ts';

/** An undispatched outbox row, as the relay hands it to consumers. */
export type OutboxEvent = {
  id: string;
  organizationId: string;
  mode: Mode;
  type: string;
  resourceType: string;
  resourceId: string;
  sequence: number;
  data: Record<string, unknown>;
  createdAt: Date;
  /** W3C `traceparent` of the emitter (tracing on), for what consumers make of the event. */
  traceParent: string | null;
};

/** The relay's transaction as consumers see it. */
export type RelayTx = {
  /** The whole batch being dispatched (consumers may prefetch for all of it on the first call). */
  readonly events: readonly OutboxEvent[];
  /**
   * A lookup's version (`relay_lookup_versions`, 0 when never bumped) as the batch's first statement
   * read it: consumers cache what they look up per batch while it stays the same (relayLookups.ts).
   */
  lookupVersion(name: string): number;
  /** One parameterized statement (`$1`, `$2`, …; arrays bind as PostgreSQL arrays) in the transaction. */
  query<R = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** Runs `fn` once, after every event of the batch went through the consumers and before commit. */
  beforeCommit(key: object, fn: () => Promise<void>): void;
  /** Runs `fn` once the transaction committed (synchronously, right after the commit returned). */
  afterCommit(key: object, fn: () => void): void;
  /** Runs `fn` if the transaction did not commit (or its commit could not be confirmed). */
  afterRollback(key: object, fn: () => void): void;
};

export type EventConsumer = (tx: RelayTx, event: OutboxEvent) => Promise<void>;

/** Events per relay transaction. */
const BATCH = 500;
/**
 * When events came in while a drain ran (the relay is busy), the next drain waits this long (ms) so
 * that they gather: a drain costs a fixed handful of statements whatever its size, and back-to-back
 * drains under a steady stream of commits carried ~17 events each (1,000 sandbox calls a second:
 * 43 % of the service's statements). An idle relay drains at once when told.
 */
export const RELAY_GATHER_MS = 10;

/**
 * Reads and locks a batch ($1 rows) of the outbox with their events. The batch's outbox rows first,
 * then each one's event by primary key (`offset 0` keeps the lateral a per-row lookup): written as
 * a plain join, the planner hashed a sequential scan of all of `events` for every batch whenever
 * that table's statistics lagged its growth (the service's vacuum analyzes tables with dead rows,
 * and `events` has none). Timestamps come back from this pool as strings (MikroORM's type parsers):
 * milliseconds are read instead. The transaction's id (the row locks assigned it) guards the final
 * delete; the consumers' lookup versions (`relay_lookup_versions`, as text: `name version …`) come
 * in the same snapshot as the events. A named prepared statement (sql.ts `prepared`: parsed and
 * planned once per connection, then its generic plan). Exported for test/messaging-plans.test.ts,
 * which checks that generic plan.
 */
export const OUTBOX_READ_SQL = prepared(`select o.id, e.organization_id, e.mode, e.type, e.resource_type, e.resource_id, e.sequence, e.data, e.trace_parent,
         floor(extract(epoch from e.created_at) * 1000)::float8 as created_ms, ${TRANSACTION_ID_SQL} as txid,
         (select string_agg(name || ' ' || version, ' ') from relay_lookup_versions) as versions
    from (select id from events_outbox order by id limit $1 for update skip locked) o
    left join lateral (select * from events e where e.id = o.id offset 0) e on true
   order by o.id`);

/** An outbox row and its event (null fields: the event is gone, e.g. purged before it was dispatched). */
type EventRow = {
  id: string; organization_id: string | null; mode: Mode; type: string | null; resource_type: string; resource_id: string;
  sequence: number; data: Record<string, unknown>; created_ms: number; trace_parent: string | null; txid: string; versions: string | null;
};

/** The `versions` column of OUTBOX_READ_SQL as a map (lookup names have no spaces). */
function parseVersions(text: string | null): Map<string, number> {
  const out = new Map<string, number>();
  const parts = text ? text.split(' ') : [];
  for (let i = 0; i + 1 < parts.length; i += 2) out.set(parts[i]!, Number(parts[i + 1]));
  return out;
}

/**
 * The batch's final statement: deletes its outbox rows ($1); fails unless run in the transaction $2
 * (the guard yields one row).
 */
const DISPATCHED_SQL = prepared(`with dispatched as (delete from events_outbox where id = any($1::text[])),
     guard as (${sameTransaction(2)})
   select (select same_transaction from guard) as same_transaction`);

export class EventRelay {
  readonly #orm: MikroORM;
  readonly #listener: Listener;
  readonly #log: Logger;
  readonly #consumers: EventConsumer[] = [];
  readonly #instruments: Instruments;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  readonly #gatherMs: number;

  /** `connectTimeoutMs` bounds connecting its LISTEN connection (platform/db/listen.ts: it comes back by itself when lost). */
  /** `gatherMs`: RELAY_GATHER_MS unless given (tests make it long enough to see). */
  constructor(deps: { orm: MikroORM; url: string; log: Logger; instruments?: Instruments; connectTimeoutMs?: number; gatherMs?: number }) {
    this.#gatherMs = deps.gatherMs ?? RELAY_GATHER_MS;
    this.#orm = deps.orm;
    this.#instruments = deps.instruments ?? NO_INSTRUMENTS;
    // A notice wakes a drain; so does a reconnection (notices sent while the connection was lost were missed).
    this.#listener = new Listener({
      url: deps.url, channel: 'events_outbox', connectTimeoutMs: deps.connectTimeoutMs ?? 5000, log: deps.log,
      onNotification: () => this.kick(), onReconnect: () => this.kick(),
    });
    this.#log = deps.log;
  }

  addConsumer(consumer: EventConsumer): void {
    this.#consumers.push(consumer);
  }

  /** Called after a drain dispatched events (the webhook worker looks for the new deliveries at once). */
  onDispatched: (() => void) | undefined;

  async start(): Promise<void> {
    this.#stopped = false;
    await this.#listener.start();
    this.#timer = setInterval(() => this.kick(), 1000);
    this.#timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#running;
    await this.#listener.stop();
  }

  /** Schedules a drain (coalescing concurrent requests). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = (async () => {
      try {
        do {
          this.#again = false;
          for (;;) {
            const n = await this.drainOnce();
            if (n > 0) this.onDispatched?.();
            if (n < BATCH || this.#stopped) break;
          }
          if (this.#again && !this.#stopped) await new Promise((resolve) => setTimeout(resolve, this.#gatherMs));
        } while (this.#again && !this.#stopped);
      } catch (e) {
        this.#log.error({ err: e }, 'event relay failed');
      } finally {
        this.#running = undefined;
      }
    })();
  }

  /** Dispatches up to one batch of undispatched events; returns how many. */
  async drainOnce(): Promise<number> {
    const committed = new Map<object, () => void>();
    const rolledBack = new Map<object, () => void>();
    let n: number;
    let dispatched: readonly OutboxEvent[] = [];
    /** The final delete, sent with the COMMIT behind it: its outcome is the batch's. */
    let sent: Promise<unknown> | undefined;
    try {
      n = await sqlClient(this.#orm).transaction().execute(async (trx) => {
        const rows = await sqlQuery<EventRow>(trx, OUTBOX_READ_SQL, [BATCH]);
        if (rows.length === 0) return 0;
        const ids = rows.map((r) => r.id);
        const events: OutboxEvent[] = rows.filter((r) => r.type !== null).map((r) => ({
          id: r.id, organizationId: r.organization_id!, mode: r.mode, type: r.type!, resourceType: r.resource_type,
          resourceId: r.resource_id, sequence: r.sequence, data: r.data, createdAt: new Date(r.created_ms), traceParent: r.trace_parent,
        }));
        const hooks = new Map<object, () => Promise<void>>();
        const versions = parseVersions(rows[0]!.versions);
        const tx: RelayTx = {
          events,
          lookupVersion: (name) => versions.get(name) ?? 0,
          query: (sql, params) => sqlQuery(trx, sql, params),
          beforeCommit: (key, fn) => { if (!hooks.has(key)) hooks.set(key, fn); },
          afterCommit: (key, fn) => { if (!committed.has(key)) committed.set(key, fn); },
          afterRollback: (key, fn) => { if (!rolledBack.has(key)) rolledBack.set(key, fn); },
        };
        for (const event of events) {
          for (const consume of this.#consumers) await consume(tx, event);
        }
        for (const fn of hooks.values()) await fn();
        // One statement, the last: the batch is dispatched. Nothing else of the transaction is in flight.
        sent = sendBeforeCommit(trx, DISPATCHED_SQL, [ids, rows[0]!.txid]);
        dispatched = events;
        return rows.length;
      });
      // A failed delete aborted the transaction, and its COMMIT answered as a rollback.
      await sent;
    } catch (e) {
      for (const fn of rolledBack.values()) this.#safely(fn);
      // The delete's own error first (what failed after it followed from it).
      if (sent) await sent;
      throw e;
    }
    for (const fn of committed.values()) this.#safely(fn);
    for (const e of dispatched) this.#instruments.eventDispatched(e.type, e.data);
    return n;
  }

  #safely(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.#log.error({ err: e }, 'event relay hook failed');
    }
  }
}
