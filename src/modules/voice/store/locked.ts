/**
 * Calls changed under their row locks, the lifecycle's hot path (every gateway event, timer and
 * hangup), as plain rows without the ORM's unit of work. `LockedCalls.lockedMany` runs a change on
 * the tenant's calls, locked in id order with one `SELECT … FOR UPDATE` (`CallRows.lock`), in one
 * transaction; what the change adds (the calls' `call.*` events, usage entries, timer jobs, the
 * timeline rows it adds and those it applied or made moot) is recorded per transaction
 * (`writes(tx)`) and written with the changed columns of the changed calls in one statement of
 * data-modifying CTEs (`CallRows.statement`), sent with the COMMIT right behind it (sql.ts
 * `sendBeforeCommit`). What else the change touched through the ORM (voicemail messages,
 * conference rows and their events) commits with the same transaction. Once committed, this
 * instance's `callUpdated` subscribers get the calls as committed (`CommittedCalls`), live notices
 * go out, and the sandbox timeline is told when the steps the change scheduled fall due.
 * `CallRows.byId` serves the reads by id (GET, the live subscription, hangup): concurrent reads
 * share one statement on the raw pool.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Pool } from 'pg';
import type { Clock } from '../../../platform/clock.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import { tenantEm, type TenantRef } from '../../../platform/db/tenant.ts';
import { sameTransaction, sendBeforeCommit, sqlQuery, TRANSACTION_ID_SQL } from '../../../platform/db/sql.ts';
import { entityColumns, rowEntity, type EntityColumn } from '../../../platform/db/groupInsert.ts';
import { columnTypes, insertRowsStatement, rowsParams, updateRowsStatement, withStatements, type ColumnTypes, type RowSet } from '../../../platform/db/rowsets.ts';
import { EVENT_COLUMNS, eventRow, type EventInput } from '../../../platform/events/events.ts';
import type { LiveNotice } from '../../../platform/events/bus.ts';
import { USAGE_COLUMNS, USAGE_ON_CONFLICT, usageRow, type UsageInput } from '../../../platform/usage/usage.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import { TenantRowReader } from '../../../platform/db/rowReads.ts';
import { Call } from '../voice.entities.ts';

/** Where a committed change's new timeline rows are announced (the sandbox timeline's `expect`: it looks when each falls due). */
export type DueSteps = { expect(due: readonly number[]): void };

/** What a locked change adds besides the calls themselves. */
export type CallWrites<T extends object> = {
  events: { call: Call; input: EventInput; now: Date }[];
  usage: { tenant: TenantRef; input: UsageInput; now: Date }[];
  timers: { data: T; startAfter: Date }[];
  /** Steps of the timeline this change applied (or timers of calls it ended): their rows are deleted with it. */
  consumed: { callId: string; seq: number }[];
  /** Rows this change adds to the timeline (the max_duration timers of calls it answered: sandbox/timeline.ts). */
  timeline: { call_id: string; seq: number; due_at: Date; event: unknown }[];
  /** What runs once the change committed (prompts spoken on live calls). */
  after: (() => void)[];
};

/** A locked change's statement (CallRows.statement): `guarded` when it fails outside the transaction that locked the calls. */
export type WriteStatement = { sql: string; params: unknown[]; notices: LiveNotice[]; guarded: boolean };

/** What snapshot() keeps of a call: its columns' comparable values, and its steps array. */
type Snapshot = { values: unknown[]; steps: readonly unknown[] };

/** The columns a lock identifies calls by (never rewritten). */
const KEYS = ['id', 'organization_id', 'mode'];

export class CallRows {
  readonly #pool: Pool;
  readonly #jobs: Pick<Jobs, 'insertStatement'>;
  readonly #timerJob: string;
  readonly #columns: EntityColumn[];
  /** The index of `steps` in #columns. */
  readonly #stepsIndex: number;
  #types: Promise<[ColumnTypes, ColumnTypes, ColumnTypes]> | undefined;
  readonly #reads: TenantRowReader<Call>;

  constructor(deps: { orm: MikroORM; pool: Pool; jobs: Pick<Jobs, 'insertStatement'>; timerJob: string }) {
    this.#pool = deps.pool;
    this.#jobs = deps.jobs;
    this.#timerJob = deps.timerJob;
    this.#columns = entityColumns(deps.orm.getMetadata().get(Call).properties);
    this.#stepsIndex = this.#columns.findIndex((c) => c.property === 'steps');
    this.#reads = new TenantRowReader(deps.pool, 'calls', this.#columns);
  }

  /** The tenant's calls `ids`, locked in id order (two transactions never wait on each other in a cycle). */
  async lock(trx: Transaction<unknown>, tenant: TenantRef, ids: readonly string[]): Promise<Call[]> {
    return (await this.lockTx(trx, tenant, ids)).calls;
  }

  /** lock(), and the id of the transaction that holds the locks (null when none of the calls exists). */
  async lockTx(trx: Transaction<unknown>, tenant: TenantRef, ids: readonly string[]): Promise<{ calls: Call[]; txid: string | null }> {
    const rows = await sqlQuery<{ row: Record<string, unknown> | string; txid: string }>(trx,
      `select to_jsonb(c) as row, ${TRANSACTION_ID_SQL} as txid from calls c where c.organization_id = $1 and c.mode = $2 and c.id = any($3::text[]) order by c.id for update`,
      [tenant.organizationId, tenant.mode, [...new Set(ids)]]);
    const calls = rows.map((r) => rowEntity<Call>(this.#columns, typeof r.row === 'string' ? JSON.parse(r.row) as Record<string, unknown> : r.row));
    return { calls, txid: rows[0]?.txid ?? null };
  }

  /** The tenant's call `id` (a plain object), or null. */
  byId(tenant: TenantRef, id: string): Promise<Call | null> {
    return this.#reads.byId(tenant, id);
  }

  /** A snapshot to tell later which calls and columns a change touched. */
  snapshot(calls: readonly Call[]): Map<string, Snapshot> {
    return new Map(calls.map((c) => [c.id, { values: this.#values(c), steps: c.steps }]));
  }

  /**
   * Stores the calls changed since `before`, and `writes`, in one statement of the transaction;
   * returns the live notices of its events. Only the columns some call changed are sent, and new
   * `steps` are appended to the stored array (`steps || $new`) rather than the whole array sent
   * again (steps are only ever added: CallControl.step; a call whose array was replaced otherwise
   * is written whole).
   */
  async write<T extends object>(trx: Transaction<unknown>, calls: readonly Call[], before: Map<string, Snapshot>, writes: CallWrites<T>): Promise<LiveNotice[]> {
    const statement = await this.statement(calls, before, writes);
    if (statement) await sqlQuery(trx, statement.sql, statement.params);
    return statement?.notices ?? [];
  }

  /**
   * write()'s statement, not sent (undefined when there is nothing to write), with the live notices
   * of its events. With `txid` (lockTx) and no timer jobs it is `guarded`: it fails unless run in
   * that transaction (sql.ts `sameTransaction`), so it may be sent with the transaction's COMMIT
   * right behind it (`sendBeforeCommit`).
   */
  async statement<T extends object>(calls: readonly Call[], before: Map<string, Snapshot>, writes: CallWrites<T>, txid?: string | null): Promise<WriteStatement | undefined> {
    const changedColumns = new Set<number>();
    const changed: Call[] = [];
    /** The steps each changed call added to its array. */
    const newSteps = new Map<string, unknown[]>();
    let appendSteps = true;
    for (const call of calls) {
      const was = before.get(call.id);
      const now = this.#values(call);
      let differs = false;
      for (let i = 0; i < now.length; i++) {
        if (now[i] !== was?.values[i]) {
          changedColumns.add(i);
          differs = true;
        }
      }
      if (was && call.steps !== was.steps) {
        const old = was.steps;
        const extended = call.steps.length >= old.length && old.every((s, k) => call.steps[k] === s);
        if (!extended) appendSteps = false;
        else if (call.steps.length > old.length) newSteps.set(call.id, call.steps.slice(old.length));
        if (!extended || call.steps.length > old.length) {
          changedColumns.add(this.#stepsIndex);
          differs = true;
        }
      }
      if (differs) changed.push(call);
    }
    if (changed.length === 0 && writes.events.length === 0 && writes.usage.length === 0 && writes.timers.length === 0 && writes.consumed.length === 0 && writes.timeline.length === 0) return undefined;
    const [callTypes, eventTypes, usageTypes] = await (this.#types ??= this.#loadTypes().catch((e: unknown) => {
      this.#types = undefined;
      throw e;
    }));
    const timers = writes.timers.length > 0 ? await this.#jobs.insertStatement(this.#timerJob, writes.timers) : undefined;
    const params: unknown[] = timers ? [timers.value] : [];
    const ctes: { name: string; sql: string }[] = [];
    const add = (name: string, set: RowSet, types: ColumnTypes, rows: Record<string, unknown>[], sql: (first: number) => string) => {
      ctes.push({ name, sql: sql(params.length + 1) });
      params.push(...rowsParams(set, types, rows));
    };
    if (changed.length > 0) {
      const columns = this.#columns.filter((c, i) => KEYS.includes(c.column) || changedColumns.has(i));
      const set: RowSet = { table: 'calls', columns: columns.map((c) => c.column) };
      const rows = changed.map((call) => Object.fromEntries(columns.map((c) => [c.column,
        c.property === 'steps' && appendSteps ? (newSteps.get(call.id) ?? []) : (call as unknown as Record<string, unknown>)[c.property]])));
      const stepsColumn = this.#columns[this.#stepsIndex]!.column;
      add('changed_calls', set, callTypes, rows, (first) => updateRowsStatement(set, callTypes, first, KEYS, appendSteps ? [stepsColumn] : []));
    }
    const notices: LiveNotice[] = [];
    if (writes.events.length > 0) {
      const set: RowSet = { table: 'events', columns: EVENT_COLUMNS };
      const rows = writes.events.map((e) => eventRow(e.call, e.input, e.now));
      for (const r of rows) notices.push({ kind: 'event', id: r.id as string, organizationId: r.organization_id as string, mode: r.mode as string, type: r.type as string, resourceId: r.resource_id as string });
      add('call_events', set, eventTypes, rows, (first) => insertRowsStatement(set, eventTypes, first));
    }
    if (writes.usage.length > 0) {
      const set: RowSet = { table: 'usage_entries', columns: USAGE_COLUMNS, onConflict: USAGE_ON_CONFLICT };
      add('call_usage', set, usageTypes, writes.usage.map((u) => usageRow(u.tenant, u.input, u.now)), (first) => insertRowsStatement(set, usageTypes, first));
    }
    if (writes.consumed.length > 0) {
      const first = params.length + 1;
      ctes.push({ name: 'consumed_steps', sql: `delete from voice_sandbox_events e using unnest($${first}::text[], $${first + 1}::int[]) as k(call_id, seq) where e.call_id = k.call_id and e.seq = k.seq` });
      params.push(writes.consumed.map((c) => c.callId), writes.consumed.map((c) => c.seq));
    }
    // A row consumed by the same change (a call answered and ended at once) is not added: the
    // statement's CTEs do not see each other's rows, so the delete would miss it.
    const consumed = new Set(writes.consumed.map((c) => `${c.callId}:${c.seq}`));
    const added = writes.timeline.filter((r) => !consumed.has(`${r.call_id}:${r.seq}`));
    if (added.length > 0) {
      const first = params.length + 1;
      ctes.push({ name: 'timeline_rows', sql: `insert into voice_sandbox_events (call_id, seq, due_at, event) select * from unnest($${first}::text[], $${first + 1}::int[], $${first + 2}::timestamptz[], $${first + 3}::jsonb[]) on conflict (call_id, seq) do nothing` });
      params.push(added.map((r) => r.call_id), added.map((r) => r.seq), added.map((r) => r.due_at.toISOString()), added.map((r) => JSON.stringify(r.event)));
    }
    // The final statement: the timer jobs' insert (pg-boss's own), else the transaction guard.
    const guarded = !timers && typeof txid === 'string';
    if (guarded) params.push(txid);
    const final = timers ? timers.text : guarded ? sameTransaction(params.length) : 'select 1';
    return { sql: ctes.length > 0 ? withStatements(ctes, final) : final, params, notices, guarded };
  }

  /**
   * Each column's value, comparable with `!==`: a time as its epoch milliseconds, JSON as its text
   * (metadata and IVR state are small, and may change in place); `steps` (compared by reference in
   * write(): the array is replaced on every change) as null.
   */
  #values(call: Call): unknown[] {
    const c = call as unknown as Record<string, unknown>;
    return this.#columns.map((col, i) => {
      if (i === this.#stepsIndex) return null;
      const v = c[col.property] ?? null;
      if (v instanceof Date) return v.getTime();
      return v !== null && typeof v === 'object' ? JSON.stringify(v) : v;
    });
  }

  async #loadTypes(): Promise<[ColumnTypes, ColumnTypes, ColumnTypes]> {
    const query = (text: string, values: unknown[]) => this.#pool.query<{ name: string; type: string }>(text, values);
    const [calls, events, usage] = await Promise.all(['calls', 'events', 'usage_entries'].map((t) => columnTypes(query, t)));
    return [calls!, events!, usage!];
  }
}

/** Locked call changes (`T`: the data of the timer jobs a change inserts). */
export class LockedCalls<T extends object> {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #rows: CallRows;
  readonly #timeline: DueSteps | undefined;
  readonly #live: ((notices: readonly LiveNotice[]) => void) | undefined;
  readonly #watched: (callId: string) => boolean;
  /** Calls as this instance committed them, for its callUpdated subscribers. */
  readonly committed = new CommittedCalls();
  /** What a locked transaction's change adds (events, usage, timers), written with its calls before it commits. */
  readonly #writes = new WeakMap<EntityManager, CallWrites<T>>();

  constructor(deps: {
    orm: MikroORM; clock: Clock; rows: CallRows; timeline: DueSteps | undefined;
    live: ((notices: readonly LiveNotice[]) => void) | undefined; watched: (callId: string) => boolean;
  }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#rows = deps.rows;
    this.#timeline = deps.timeline;
    this.#live = deps.live;
    this.#watched = deps.watched;
  }

  /** The writes of the locked transaction `tx` is in (undefined outside one: write through `tx` itself). */
  writes(tx: EntityManager): CallWrites<T> | undefined {
    return this.#writes.get(tx);
  }

  /** Runs `change` on the locked row in a transaction; returns the row (undefined when it does not exist). */
  async locked(tenant: TenantRef, id: string, change: (tx: EntityManager, call: Call, now: Date) => Promise<void>): Promise<Call | undefined> {
    return this.lockedMany(tenant, [id], async (tx, calls, now) => {
      const call = calls.get(id);
      if (call) await change(tx, call, now);
      return call;
    });
  }

  /**
   * Runs `change` on the tenant's calls `ids` (plain rows, locked in id order: CallRows.lock) in one
   * transaction; the changed calls, their events, usage and timers are written in one statement.
   * That statement is sent with the COMMIT right behind it (`sendBeforeCommit`: one round trip for
   * both) unless it ends with timer jobs; it is guarded to fail outside this transaction, and when it
   * failed (the COMMIT then rolled the transaction back) its error is this call's.
   */
  async lockedMany<R>(tenant: TenantRef, ids: readonly string[], change: (tx: EntityManager, calls: Map<string, Call>, now: Date) => Promise<R>): Promise<R> {
    let notices: LiveNotice[] = [];
    let changed: Call[] = [];
    let due: number[] = [];
    let after: (() => void)[] = [];
    let sent: Promise<unknown> | undefined;
    let out: R;
    try {
      out = await tenantEm(this.#orm, tenant).transactional(async (tx) => {
        const trx = tx.getTransactionContext<Transaction<unknown>>()!;
        const { calls, txid } = await this.#rows.lockTx(trx, tenant, ids);
        const before = this.#rows.snapshot(calls);
        const writes: CallWrites<T> = { events: [], usage: [], timers: [], consumed: [], timeline: [], after: [] };
        this.#writes.set(tx, writes);
        let result: R;
        try {
          result = await change(tx, new Map(calls.map((c) => [c.id, c])), this.#clock.now());
        } finally {
          this.#writes.delete(tx);
        }
        const statement = await this.#rows.statement(calls, before, writes, txid);
        if (statement?.guarded) sent = sendBeforeCommit(trx, statement.sql, statement.params);
        else if (statement) await sqlQuery(trx, statement.sql, statement.params);
        notices = statement?.notices ?? [];
        changed = writes.events.map((e) => e.call);
        due = writes.timeline.map((r) => r.due_at.getTime());
        after = writes.after;
        // Noted before the COMMIT: the commit's NOTIFY of these events can reach this process before
        // the COMMIT's reply does (it is sent at the same moment, on another connection), and its
        // subscribers then find the calls as committed instead of reading them again. An event id
        // is announced only once committed, so what a rolled-back transaction noted is never asked for.
        this.#note(notices, changed);
        return result;
      });
    } catch (e) {
      // The write's own error first (what the ORM then failed on followed from it).
      await sent;
      throw e;
    }
    await sent;
    // Again for the calls a subscriber began to watch while the COMMIT was on its way.
    this.delivered(notices, changed);
    // The timeline looks when each row this change added falls due (a script's next step, a timer).
    if (due.length > 0) this.#timeline?.expect(due);
    for (const run of after) run();
    return out;
  }

  /**
   * Calls this instance has just committed with events (`notices[i]` the event of `calls[i]`): its
   * `callUpdated` subscribers hear of them now (the commit's NOTIFY tells the other instances, and
   * is skipped here), with the calls as committed. Only after the commit.
   */
  delivered(notices: readonly LiveNotice[], calls: readonly Call[]): void {
    if (notices.length === 0) return;
    this.#note(notices, calls);
    this.#live?.(notices);
  }

  /** Notes the calls (`notices[i]` the event of `calls[i]`) a subscriber here watches (CommittedCalls). */
  #note(notices: readonly LiveNotice[], calls: readonly Call[]): void {
    // Kept only for the calls a subscriber here watches (a later one reads the call when it starts).
    const eventIds: string[] = [];
    const watched: Call[] = [];
    notices.forEach((n, i) => {
      const call = calls[i];
      if (call && !this.committed.has(n.id) && this.#watched(call.id)) {
        eventIds.push(n.id);
        watched.push(call);
      }
    });
    if (watched.length > 0) this.committed.note(eventIds, watched);
  }
}

/** How many committed calls are kept for live subscribers (the oldest go first). */
export const COMMITTED_KEPT = 4096;

/**
 * Calls as this instance committed them with an event, by event id (the newest COMMITTED_KEPT): a
 * `callUpdated` subscriber told of the event by deliverLocal shows the call as that change left it
 * without reading it again. Kept only for the calls a subscriber of this instance watches.
 */
export class CommittedCalls {
  readonly #calls = new Map<string, Call>();

  /** Notes the calls a commit left, one per event notice, in order (copies: the entities live on). */
  note(eventIds: readonly string[], calls: readonly Call[]): void {
    eventIds.forEach((id, i) => {
      const call = calls[i];
      if (call) this.#calls.set(id, { ...call });
    });
    for (const key of this.#calls.keys()) {
      if (this.#calls.size <= COMMITTED_KEPT) break;
      this.#calls.delete(key);
    }
  }

  /** Whether the call event `eventId` committed is noted. */
  has(eventId: string): boolean {
    return this.#calls.has(eventId);
  }

  /** The call `id` as event `eventId` committed it in the caller's tenant, else undefined (a copy). */
  get(scope: Scope, id: string, eventId: string): Call | undefined {
    const call = this.#calls.get(eventId);
    if (!call || call.id !== id || call.organizationId !== scope.organizationId || call.mode !== scope.mode) return undefined;
    return { ...call };
  }
}
