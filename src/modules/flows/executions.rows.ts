/**
 * The engine's rows without the ORM's unit of work (its change sets and identity map were the
 * largest share of a step's CPU): executions locked as plain objects with one `SELECT … FOR UPDATE`
 * (in id order), and what a batch of steps wrote — new step rows, waiting steps resumed, the
 * changed executions, their events and the jobs of what is left — in one statement of
 * data-modifying CTEs (platform/db/rowsets.ts), as voice's locked calls are written.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Kysely, Transaction } from 'kysely';
import { sqlQuery } from '../../platform/db/sql.ts';
import { entityColumns, rowEntity, type EntityColumn } from '../../platform/db/groupInsert.ts';
import { columnTypes, insertRowsStatement, rowsParams, updateRowsStatement, withStatements, type ColumnTypes, type RowSet } from '../../platform/db/rowsets.ts';
import { EVENT_COLUMNS, eventRow, type EventInput } from '../../platform/events/events.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { FlowExecution, FlowStep } from './flows.entities.ts';

/** What one transaction of the engine writes (ExecutionRows.write). */
export type StepWrites = {
  /** Step rows by id: made in this transaction, or read from the table (`loaded`: a waiting step resumed). */
  steps: Map<string, FlowStep>;
  loaded: Set<string>;
  executions: Set<FlowExecution>;
  events: Record<string, unknown>[];
};

export function stepWrites(): StepWrites {
  return { steps: new Map(), loaded: new Set(), executions: new Set(), events: [] };
}

/** An event of an execution, written with the batch. */
export function addEvent(writes: StepWrites, ex: FlowExecution, input: EventInput, now: Date): void {
  writes.events.push(eventRow(ex, input, now));
}

/** The execution columns a step changes (the keys first). */
const EXECUTION_KEYS = ['id', 'organization_id', 'mode'];
const EXECUTION_CHANGED = ['status', 'context', 'phi', 'cursor', 'current_node_id', 'waiting', 'error', 'steps_count', 'sequence', 'updated_at', 'finished_at'];

type Db = Kysely<unknown> | Transaction<unknown>;
type JobEntry = { data: object; scope: Scope; id: string; startAfter?: Date };

export class ExecutionRows {
  readonly #jobs: Pick<Jobs, 'insertStatement'>;
  readonly #executionColumns: EntityColumn[];
  readonly #stepColumns: EntityColumn[];
  readonly #executionSet: RowSet;
  readonly #stepSet: RowSet;
  readonly #eventSet: RowSet = { table: 'events', columns: EVENT_COLUMNS };
  #types: Promise<[ColumnTypes, ColumnTypes, ColumnTypes]> | undefined;

  constructor(deps: { orm: MikroORM; jobs: Pick<Jobs, 'insertStatement'> }) {
    this.#jobs = deps.jobs;
    const meta = deps.orm.getMetadata();
    this.#executionColumns = entityColumns(meta.get(FlowExecution).properties);
    this.#stepColumns = entityColumns(meta.get(FlowStep).properties);
    const changed = [...EXECUTION_KEYS, ...EXECUTION_CHANGED].map((c) => this.#executionColumns.find((col) => col.column === c)!);
    if (changed.some((c) => !c)) throw new Error('flow_executions: a changed column is not a property');
    this.#executionSet = { table: 'flow_executions', columns: changed.map((c) => c.column), properties: changed.map((c) => c.property) };
    this.#stepSet = { table: 'flow_execution_steps', columns: this.#stepColumns.map((c) => c.column), properties: this.#stepColumns.map((c) => c.property) };
  }

  /** The tenant's executions `ids` (plain objects), locked in id order; `lock: false` reads without locking. */
  async executions(db: Db, tenant: TenantRef, ids: readonly string[], lock = true): Promise<FlowExecution[]> {
    const rows = await sqlQuery<{ row: Record<string, unknown> | string }>(db,
      `select to_jsonb(e) as row from flow_executions e where e.organization_id = $1 and e.mode = $2 and e.id = any($3::text[]) order by e.id${lock ? ' for update' : ''}`,
      [tenant.organizationId, tenant.mode, [...new Set(ids)]]);
    return rows.map((r) => rowEntity<FlowExecution>(this.#executionColumns, typeof r.row === 'string' ? JSON.parse(r.row) as Record<string, unknown> : r.row));
  }

  /** Step `seq` of an execution (a waiting step being resumed), or null. */
  async step(db: Db, ex: FlowExecution, seq: number): Promise<FlowStep | null> {
    const rows = await sqlQuery<{ row: Record<string, unknown> | string }>(db,
      'select to_jsonb(s) as row from flow_execution_steps s where s.organization_id = $1 and s.mode = $2 and s.execution_id = $3 and s.seq = $4',
      [ex.organizationId, ex.mode, ex.id, seq]);
    const r = rows[0];
    return r ? rowEntity<FlowStep>(this.#stepColumns, typeof r.row === 'string' ? JSON.parse(r.row) as Record<string, unknown> : r.row) : null;
  }

  /** Writes `writes` and inserts the jobs `queue`, in one statement of the transaction `trx`. */
  async write(trx: Transaction<unknown>, writes: StepWrites, queue: readonly JobEntry[], jobName: string): Promise<void> {
    const added = [...writes.steps.values()].filter((s) => !writes.loaded.has(s.id));
    const resumed = [...writes.steps.values()].filter((s) => writes.loaded.has(s.id));
    if (added.length + resumed.length + writes.executions.size + writes.events.length + queue.length === 0) return;
    const [executionTypes, stepTypes, eventTypes] = await (this.#types ??= this.#loadTypes(trx).catch((e: unknown) => {
      this.#types = undefined;
      throw e;
    }));
    const jobs = queue.length > 0 ? await this.#jobs.insertStatement(jobName, queue) : undefined;
    const params: unknown[] = jobs ? [jobs.value] : [];
    const ctes: { name: string; sql: string }[] = [];
    const add = (name: string, set: RowSet, types: ColumnTypes, rows: readonly object[], sql: (first: number) => string) => {
      if (rows.length === 0) return;
      ctes.push({ name, sql: sql(params.length + 1) });
      params.push(...rowsParams(set, types, rows));
    };
    add('new_steps', this.#stepSet, stepTypes, added, (first) => insertRowsStatement(this.#stepSet, stepTypes, first));
    add('resumed_steps', this.#stepSet, stepTypes, resumed, (first) => updateRowsStatement(this.#stepSet, stepTypes, first, ['id']));
    add('moved_executions', this.#executionSet, executionTypes, [...writes.executions], (first) => updateRowsStatement(this.#executionSet, executionTypes, first, EXECUTION_KEYS));
    add('step_events', this.#eventSet, eventTypes, writes.events, (first) => insertRowsStatement(this.#eventSet, eventTypes, first));
    const final = jobs ? jobs.text : 'select 1';
    await sqlQuery(trx, ctes.length > 0 ? withStatements(ctes, final) : final, params);
  }

  async #loadTypes(db: Db): Promise<[ColumnTypes, ColumnTypes, ColumnTypes]> {
    const query = async (text: string, values: unknown[]) => ({ rows: await sqlQuery<{ name: string; type: string }>(db, text, values) });
    return [await columnTypes(query, 'flow_executions'), await columnTypes(query, 'flow_execution_steps'), await columnTypes(query, 'events')];
  }
}
