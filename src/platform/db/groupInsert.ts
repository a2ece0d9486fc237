/**
 * Group commit of new rows with their pg-boss job (platform/db/batcher.ts + rowsets.ts). Concurrent
 * callers each submit one item; a batch goes to PostgreSQL as one named prepared statement: a
 * multi-row insert per table as data-modifying CTEs ahead of pg-boss's own job insert (`$1`). One
 * statement is one implicit transaction and one round trip however many callers it carries, and
 * PostgreSQL takes its notifying-commit lock (the outbox trigger, pg-boss's insert) once per batch.
 * A caller is answered once its batch committed; a batch that fails is retried item by item, so
 * one bad row fails alone.
 *
 * Used for the creation of voice calls (call row, `call.initiated` event, placement job) and for
 * agent chat turns that start a conversation (conversation, messages, events, usage; no job). The
 * messaging group commit (messaging.batching.ts) is the same shape with more sets and the credit
 * reservation CTE.
 */
import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import type { Scope } from '../auth/scope.ts';
import type { Jobs } from '../jobs/jobs.ts';
import { Batcher } from './batcher.ts';
import { columnTypes, insertRowsStatement, rowsParams, withStatements, type ColumnTypes, type RowSet } from './rowsets.ts';

/**
 * One table of the group: every item gives one row (`row`, column name → value, or with the set's
 * `properties` an object holding the columns' values under those keys, e.g. the entity itself) or
 * any number of rows, none included (`rows`).
 */
export type GroupInsertSet<I> = RowSet & ({ row: (item: I) => object } | { rows: (item: I) => readonly object[] });

function setRows<I>(set: GroupInsertSet<I>, items: readonly I[]): object[] {
  const rows: object[] = [];
  if ('row' in set) for (const item of items) rows.push(set.row(item));
  else for (const item of items) for (const row of set.rows(item)) rows.push(row);
  return rows;
}

/** A column of an entity's table, the property that holds it, and whether that is a Date. */
export type EntityColumn = { property: string; column: string; date: boolean };

/**
 * The columns of an entity's table and the properties they hold, from the ORM's metadata (so SQL
 * follows the schema): `entityColumns(orm.getMetadata().get(Entity).properties)`.
 */
export function entityColumns(properties: Record<string, { name: string; persist?: boolean; fieldNames?: string[]; runtimeType?: string }>): EntityColumn[] {
  return Object.values(properties)
    .filter((p) => p.persist !== false && p.fieldNames?.length === 1)
    .map((p) => ({ property: p.name, column: p.fieldNames![0]!, date: p.runtimeType === 'Date' }));
}

/** A row read as JSON (`to_jsonb(t)`: timestamps as ISO strings) as a plain entity-shaped object. */
export function rowEntity<T>(columns: readonly EntityColumn[], row: Record<string, unknown>): T {
  const value: Record<string, unknown> = {};
  for (const c of columns) {
    const v = row[c.column] ?? null;
    value[c.property] = c.date && v !== null ? new Date(v as string) : v;
  }
  return value as T;
}

/**
 * A gate ahead of a group's inserts: reads and checks in the same statement decide which items are
 * written. Its CTEs come first (parameters from `$first`) and one of them, named `gate`, selects the
 * numbers (`i`, from 1 in the batch's order) of the items to write; the others may read (and a
 * rider's part may write: platform/db/pairedReads.ts). The final SELECT returns `written` (the
 * gate's item numbers) and `select`'s columns, from which `answers` gives each item its outcome.
 */
export type InsertGate<I, O> = {
  params: number;
  ctes: (first: number) => { name: string; sql: string }[];
  /** The final SELECT's columns besides `written` (e.g. the gate's reads as JSON arrays). */
  select: string;
  /**
   * Called once with whether a batch of the group is coming: about to go, or queued behind the
   * batch in flight. A rider the gate carries waits for it then (pairedReads.ts): its items are
   * the takes of the requests queued in the group, whose calls are written only when their take is
   * in the same statement or already answered.
   */
  follow?: (groupComing: () => boolean) => void;
  /** A batch's parameters and its answers; called first thing for the batch, before anything is awaited. */
  batch: (items: readonly I[]) => GateBatch<O>;
};

/** One batch of a gate: its parameters, and each item's outcome once the statement ran (`written`: item numbers). */
export type GateBatch<O> = {
  values: unknown[];
  answers: (row: Record<string, unknown>, written: ReadonlySet<number>) => (O | Error)[];
  /** The statement failed: nothing of it is stored (e.g. give a rider's items back). */
  failed: () => void;
};

export class GroupInsert<I, O = true> {
  readonly #pool: Pool;
  readonly #jobs: Pick<Jobs, 'insertStatement'> | undefined;
  readonly #name: string;
  readonly #sets: readonly GroupInsertSet<I>[];
  readonly #job: { name: string; entry: (item: I) => { data: object; scope?: Scope; id?: string } | null } | undefined;
  readonly #gate: InsertGate<I, O> | undefined;
  readonly #batcher: Batcher<I, O>;
  #types: Promise<ColumnTypes[]> | undefined;
  /** The statement as last built: the same for every batch once the column types are read (and per job statement text). */
  #statement: { types: ColumnTypes[]; jobText: string | undefined; text: string; name: string } | undefined;

  /**
   * `name` prefixes the prepared statement's name; `sets` are inserted in order, then `job` (one
   * job per item whose `entry` is not null; none without `job`). With `gate`, only the items it
   * lets through are written and each caller gets the gate's answer (no job then: pg-boss's insert
   * cannot be gated). One batch at a time by default: while it commits, the next one grows.
   */
  constructor(deps: {
    pool: Pool; jobs?: Pick<Jobs, 'insertStatement'>; name: string; sets: readonly GroupInsertSet<I>[];
    job?: { name: string; entry: (item: I) => { data: object; scope?: Scope; id?: string } | null };
    gate?: InsertGate<I, O>;
    maxBatch?: number; maxInFlight?: number;
  }) {
    this.#pool = deps.pool;
    this.#jobs = deps.jobs;
    this.#name = deps.name;
    this.#sets = deps.sets;
    this.#job = deps.job;
    this.#gate = deps.gate;
    if (deps.job && !deps.jobs) throw new Error(`${deps.name}: a job needs the jobs service`);
    if (deps.job && deps.gate) throw new Error(`${deps.name}: a gated group has no job`);
    this.#batcher = new Batcher((items) => this.#write(items), { maxInFlight: deps.maxInFlight ?? 1, isolate: true, maxBatch: deps.maxBatch ?? 200 });
    deps.gate?.follow?.(() => this.#batcher.flushing || this.#batcher.queued > 0);
  }

  /** Resolves once the item's rows and job are committed (with a gate: its answer); rejects with the item's own error. */
  submit(item: I): Promise<O> {
    return this.#batcher.submit(item);
  }

  async #write(items: I[]): Promise<(O | Error)[]> {
    const gated = this.#gate?.batch(items);
    try {
      return await this.#insert(items, gated);
    } catch (e) {
      gated?.failed();
      throw e;
    }
  }

  async #insert(items: I[], gated: GateBatch<O> | undefined): Promise<(O | Error)[]> {
    const gate = this.#gate;
    const spec = this.#job;
    const entries = spec ? items.map((item) => spec.entry(item)).filter((e) => e !== null) : [];
    const job = spec && entries.length > 0 ? await this.#jobs!.insertStatement(spec.name, entries) : undefined;
    const types = await (this.#types ??= Promise.all(this.#sets.map((set) => columnTypes((text, values) => this.#pool.query<{ name: string; type: string }>(text, values), set.table)))
      .catch((e: unknown) => {
        this.#types = undefined; // read again by the next batch
        throw e;
      }));
    let statement = this.#statement;
    if (!statement || statement.types !== types || statement.jobText !== job?.text) {
      // $1 is the job insert's parameter (none without jobs: the statement ends with `select 1`);
      // then the gate's, the sets' columns, and with a gate each set's item numbers.
      let param = job ? 2 : 1;
      const ctes = gate ? gate.ctes(param) : [];
      param += gate?.params ?? 0;
      for (let i = 0; i < this.#sets.length; i++) {
        const set = this.#sets[i]!;
        const first = param;
        param += set.columns.length;
        const only = gate ? { itemParam: param++, items: 'select i from gate' } : undefined;
        ctes.push({ name: `group_${set.table}`, sql: insertRowsStatement(set, types[i]!, first, only) });
      }
      const final = gate ? `select array(select i from gate) as written, ${gate.select}` : job ? job.text : 'select 1';
      const text = withStatements(ctes, final);
      this.#statement = statement = { types, jobText: job?.text, text, name: `${this.#name}_${createHash('sha1').update(text).digest('hex').slice(0, 16)}` };
    }
    const values: unknown[] = job ? [job.value] : [];
    if (gated) values.push(...gated.values);
    for (let i = 0; i < this.#sets.length; i++) {
      const set = this.#sets[i]!;
      if (!gated) {
        values.push(...rowsParams(set, types[i]!, setRows(set, items)));
        continue;
      }
      const rows: object[] = [];
      const numbers: number[] = [];
      items.forEach((item, n) => {
        const own = 'row' in set ? [set.row(item)] : set.rows(item);
        for (const row of own) {
          rows.push(row);
          numbers.push(n + 1);
        }
      });
      values.push(...rowsParams(set, types[i]!, rows), `{${numbers.join(',')}}`);
    }
    const { rows } = await this.#pool.query<Record<string, unknown>>({ name: statement.name, text: statement.text, values });
    if (!gated) return items.map(() => true as unknown as O);
    const row = rows[0] ?? {};
    return gated.answers(row, new Set(((row.written as (number | string)[] | undefined) ?? []).map(Number)));
  }
}
