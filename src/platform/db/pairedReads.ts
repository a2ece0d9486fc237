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
import { Batcher, type HandedOver } from './batcher.ts';

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

/**
 * A third part that rides along: another batcher's queued items (the rate-limit takes of the same
 * requests: platform/ratelimit/limiter.ts) run as a sub-select of the same statement when that
 * batcher has any waiting as a batch of the pair goes. Its part may write (a volatile function):
 * the statement is one implicit transaction either way.
 */
export type Rider<R, RO> = {
  part: ReadPart<R, RO>;
  /** The rider's queued items, taken for this statement (undefined: none waiting). */
  handOver(): HandedOver<R, RO> | undefined;
  /**
   * Called once with whether a statement of the leader is coming (a batch of the pair about to go;
   * for a gated group insert, also one queued behind its batch in flight): the rider leaves its
   * queue to it then (Batcher.follow).
   */
  follow(leaderComing: () => boolean): void;
};

/** An item's two answers: each its value or its own error. */
export type PairedAnswers<A, B> = { a: PromiseSettledResult<A>; b: PromiseSettledResult<B> };

/** The statement of two parts: each part's rows as one JSON array (`a`, `b`). Exported for tests. */
export function pairedReadsSql(a: Pick<ReadPart<never, never>, 'params' | 'sql'>, b: Pick<ReadPart<never, never>, 'params' | 'sql'>, rider?: Pick<ReadPart<never, never>, 'sql'>): string {
  const rows = partRowsJson;
  return `select ${rows(a.sql(1))} as a,
       ${rows(b.sql(1 + a.params))} as b${rider ? `,
       ${rows(rider.sql(1 + a.params + b.params))} as r` : ''}`;
}

/** A part's rows (its SELECT) as one JSON array, an expression of the final SELECT. */
export function partRowsJson(sql: string): string {
  return `(select coalesce(json_agg(p), '[]'::json) from (${sql}) p)`;
}

/** A statement's text and its name (`prefix_` and a hash of the text: a changed statement is a new one). */
function named(prefix: string, text: string): { text: string; name: string } {
  return { text, name: `${prefix}_${createHash('sha1').update(text).digest('hex').slice(0, 16)}` };
}

export class PairedReads<IA, A, IB, B, R = never, RO = never> {
  readonly #pool: Pool;
  readonly #a: ReadPart<IA, A>;
  readonly #b: ReadPart<IB, B>;
  readonly #rider: Rider<R, RO> | undefined;
  readonly #pair: { text: string; name: string };
  /** The statement with the rider's part (`r`). */
  readonly #withRider: { text: string; name: string } | undefined;
  readonly #batcher: Batcher<{ a: IA; b: IB }, { a: A | Error; b: B | Error }>;

  /** `name` prefixes the named statements' names. One batch in flight: the next one grows meanwhile. */
  constructor(deps: { pool: Pool; name: string; a: ReadPart<IA, A>; b: ReadPart<IB, B>; rider?: Rider<R, RO> }) {
    this.#pool = deps.pool;
    this.#a = deps.a;
    this.#b = deps.b;
    this.#rider = deps.rider;
    this.#pair = named(deps.name, pairedReadsSql(deps.a, deps.b));
    this.#withRider = deps.rider ? named(deps.name, pairedReadsSql(deps.a, deps.b, deps.rider.part)) : undefined;
    this.#batcher = new Batcher((items) => this.#read(items), { maxInFlight: 1 });
    deps.rider?.follow(() => this.#batcher.flushing);
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
    // Taken before anything is awaited: the rider's batcher left its queue to this turn's batch.
    const riding = this.#rider?.handOver();
    let rows: { a: PartRow[]; b: PartRow[]; r?: PartRow[] }[];
    const as = items.map((i) => i.a);
    const bs = items.map((i) => i.b);
    try {
      const values = [...this.#a.values(as), ...this.#b.values(bs)];
      const expected = this.#a.params + this.#b.params;
      if (values.length !== expected) throw new Error(`${this.#pair.name}: ${values.length} parameters for ${expected}`);
      if (riding) values.push(...this.#rider!.part.values(riding.items));
      const statement = riding ? this.#withRider! : this.#pair;
      ({ rows } = await this.#pool.query<{ a: PartRow[]; b: PartRow[]; r?: PartRow[] }>({ name: statement.name, text: statement.text, values }));
    } catch (e) {
      // The statement failed, so nothing of it is stored: the rider's items go out in their own
      // batcher's next statement. (A connection lost after the commit but before the answer would
      // count those takes twice: the limit then errs on the strict side, by one per take.)
      riding?.putBack();
      throw e;
    }
    if (riding) {
      try {
        riding.settle(this.#rider!.part.answers(rows[0]?.r ?? [], riding.items));
      } catch (e) {
        riding.fail(e);
      }
    }
    const a = this.#a.answers(rows[0]?.a ?? [], as);
    const b = this.#b.answers(rows[0]?.b ?? [], bs);
    return items.map((_, i) => ({ a: a[i]!, b: b[i]! }));
  }
}

/** An answer (an Error: the item's own refusal) as a settled result. */
export function settled<T>(value: T | Error): PromiseSettledResult<T> {
  return value instanceof Error ? { status: 'rejected', reason: value } : { status: 'fulfilled', value };
}
