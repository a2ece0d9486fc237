/**
 * Calls locked and changed as plain rows, without the ORM's unit of work (the lifecycle's hot
 * path: every gateway event, timer and hangup). Inside the caller's transaction, `lock` reads the
 * calls with one `SELECT … FOR UPDATE` in id order, and `write` stores what the change made in one
 * statement: the changed columns of the changed calls, their `call.*` events, usage entries,
 * timer jobs (pg-boss's own insert), the timeline rows it adds (max_duration timers) and the
 * deletion of the timeline rows it applied or made moot, as
 * data-modifying CTEs. What else the change touched through
 * the ORM (IVR voicemail messages, conference rows and their events) commits with the same
 * transaction. `byId` serves the reads by id (GET, the live subscription, hangup): concurrent
 * reads share one statement on the raw pool.
 */
import type { Transaction } from 'kysely';
import type { Pool } from 'pg';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import { sameTransaction, sqlQuery, TRANSACTION_ID_SQL } from '../../../platform/db/sql.ts';
import { entityColumns, rowEntity, type EntityColumn } from '../../../platform/db/groupInsert.ts';
import { columnTypes, insertRowsStatement, rowsParams, updateRowsStatement, withStatements, type ColumnTypes, type RowSet } from '../../../platform/db/rowsets.ts';
import { EVENT_COLUMNS, eventRow, type EventInput } from '../../../platform/events/events.ts';
import type { LiveNotice } from '../../../platform/events/bus.ts';
import { USAGE_COLUMNS, USAGE_ON_CONFLICT, usageRow, type UsageInput } from '../../../platform/usage/usage.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import type { MikroORM } from '@mikro-orm/postgresql';
import { TenantRowReader } from '../../../platform/db/rowReads.ts';
import { Call } from '../voice.entities.ts';
import { eventFor } from '../voice.states.ts';

/** What a locked change adds besides the calls themselves. */
export type CallWrites<T extends object> = {
  events: { call: Call; input: EventInput; now: Date }[];
  usage: { tenant: TenantRef; input: UsageInput; now: Date }[];
  timers: { data: T; startAfter: Date }[];
  /** Steps of the timeline this change applied (or timers of calls it ended): their rows are deleted with it. */
  consumed: { callId: string; seq: number }[];
  /** Rows this change adds to the timeline (the max_duration timers of calls it answered: calls.timeline.ts). */
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

/** The `call.*` event of the call's current status. */
export function callEvent(call: Call): EventInput {
  return {
    type: eventFor(call.status), resourceType: 'call', resourceId: call.id, sequence: call.sequence,
    data: {
      id: call.id, call_id: call.id, direction: call.direction, from: call.from, to: call.to, status: call.status,
      agent_id: call.agentId, ivr_id: call.ivrId, conference_id: call.conferenceId, record: call.record,
      duration_seconds: call.durationSeconds, answered_at: call.answeredAt?.toISOString() ?? null, ended_at: call.endedAt?.toISOString() ?? null,
      end_reason: call.endReason, error_code: call.errorCode, sip_code: call.sipCode, has_recording: call.recordingSeconds != null,
      metadata: call.metadata, ...(call.webhookUrl ? { webhook_url: call.webhookUrl } : {}),
    },
  };
}
