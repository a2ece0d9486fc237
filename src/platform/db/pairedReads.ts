/**
 * Two owners' batched reads in one statement per batch. A hot request that needs reads of two
 * modules' tables (placing a call: the consent of `to`, owned by contacts, and the organization's
 * voice numbers, owned by numbers) would otherwise make two batched statements, each a round trip
 * and a wake-up of a backend. Each owner still writes its own SQL and reads its own rows: it hands
 * over a {@link ReadPart} through its port, and this runs the two parts of the concurrent callers
 * (platform/db/batcher.ts) as sub-selects of one named statement, each part's rows coming back as
 * one JSON array. The caller never sees the other module's table.
 */
import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { Batcher } from './batcher.ts';

/** A row of a part, as JSON (`json_agg` of the part's SELECT: numbers, strings, arrays, objects). */
export type PartRow = Record<string, unknown>;

/**
 * One owner's read of a batch of items: a SELECT over its parameters `$first` … (one row per
 * answer, in any order), the parameters for a batch, and each item's answer (an Error: that
 * item's refusal, e.g. RECIPIENT_OPTED_OUT) from the rows. The SQL must not depend on the batch
 * (a named statement); read arrays through `genericArrays` (plans.ts).
 */
export type ReadPart<I, O> = {
  /** How many parameters sql() uses. */
  params: number;
  sql: (first: number) => string;
  values: (items: readonly I[]) => unknown[];
  answers: (rows: readonly PartRow[], items: readonly I[]) => (O | Error)[];
};

/** An item's two answers: each its value or its own error. */
export type PairedAnswers<A, B> = { a: PromiseSettledResult<A>; b: PromiseSettledResult<B> };

/** The statement of two parts: each part's rows as one JSON array (`a`, `b`). Exported for tests. */
export function pairedReadsSql(a: Pick<ReadPart<never, never>, 'params' | 'sql'>, b: Pick<ReadPart<never, never>, 'sql'>): string {
  return `select (select coalesce(json_agg(p), '[]'::json) from (${a.sql(1)}) p) as a,
       (select coalesce(json_agg(p), '[]'::json) from (${b.sql(1 + a.params)}) p) as b`;
}

export class PairedReads<IA, A, IB, B> {
  readonly #pool: Pool;
  readonly #a: ReadPart<IA, A>;
  readonly #b: ReadPart<IB, B>;
  readonly #text: string;
  readonly #name: string;
  readonly #batcher: Batcher<{ a: IA; b: IB }, { a: A | Error; b: B | Error }>;

  /** `name` prefixes the named statement's name. One batch in flight: the next one grows meanwhile. */
  constructor(deps: { pool: Pool; name: string; a: ReadPart<IA, A>; b: ReadPart<IB, B> }) {
    this.#pool = deps.pool;
    this.#a = deps.a;
    this.#b = deps.b;
    this.#text = pairedReadsSql(deps.a, deps.b);
    this.#name = `${deps.name}_${createHash('sha1').update(this.#text).digest('hex').slice(0, 16)}`;
    this.#batcher = new Batcher((items) => this.#read(items), { maxInFlight: 1 });
  }

  /** Both reads for one caller; a failed statement fails both answers. */
  async read(a: IA, b: IB): Promise<PairedAnswers<A, B>> {
    try {
      const r = await this.#batcher.submit({ a, b });
      return { a: settled(r.a), b: settled(r.b) };
    } catch (e) {
      return { a: { status: 'rejected', reason: e }, b: { status: 'rejected', reason: e } };
    }
  }

  async #read(items: { a: IA; b: IB }[]): Promise<{ a: A | Error; b: B | Error }[]> {
    const as = items.map((i) => i.a);
    const bs = items.map((i) => i.b);
    const values = [...this.#a.values(as), ...this.#b.values(bs)];
    if (values.length !== this.#a.params + this.#b.params) throw new Error(`${this.#name}: ${values.length} parameters for ${this.#a.params} + ${this.#b.params}`);
    const { rows } = await this.#pool.query<{ a: PartRow[]; b: PartRow[] }>({ name: this.#name, text: this.#text, values });
    const a = this.#a.answers(rows[0]?.a ?? [], as);
    const b = this.#b.answers(rows[0]?.b ?? [], bs);
    return items.map((_, i) => ({ a: a[i]!, b: b[i]! }));
  }
}

function settled<T>(value: T | Error): PromiseSettledResult<T> {
  return value instanceof Error ? { status: 'rejected', reason: value } : { status: 'fulfilled', value };
}
