/**
 * The loop of a table of due rows, the base of the sandboxes' timelines (voice's call steps,
 * messaging's delivery reports): a subclass's `tick` claims and applies what is due and says how
 * many rows it claimed. The
 * loop ticks again at once after a full batch (more are due), otherwise sleeps until the next look
 * (`tickMs`) or until something this instance scheduled falls due (`wake(at)`), whichever is first.
 * A tick that throws is logged and the loop goes on; `stop` ends the sleep and waits for the tick
 * under way. `settleDue` is a tick's end for every such table (the messaging delivery queue's too):
 * one statement deletes the rows finished and makes the failed ones due again.
 */
import type { Pool } from 'pg';
import type { Logger } from '../logger.ts';
import { genericArrays } from '../db/plans.ts';

export type DueTickerOptions = {
  /** Rows a tick claims at most: a tick that claimed this many ticks again at once. */
  batch: number;
  /** How often the loop looks when nothing of this instance's falls due sooner (ms). */
  tickMs: number;
  log: Logger;
  /** Names the loop in its log lines (`voice sandbox timeline`). */
  name: string;
};

/**
 * A table of due rows as `settleDue` sees it: the table, its two key columns with their PostgreSQL
 * types, the name of the prepared statement, and how a claimed row gives its key (`due_at` is the
 * column made due again).
 */
export type DueTable<R> = {
  statement: string;
  table: string;
  keys: readonly [{ column: string; type: string }, { column: string; type: string }];
  key: (row: R) => readonly [unknown, unknown];
};

/**
 * The one statement of `settleDue`: delete the finished rows, make the others due again after their
 * `ms`. Its arrays are read through sub-selects so the named statement keeps one generic plan
 * (platform/db/plans.ts: the retry arrays are mostly empty, and with their real lengths every
 * custom plan looked cheaper: 8.5 s of planning per 10 minutes in the soak at 566/s).
 */
export function settleSql(t: Pick<DueTable<unknown>, 'table' | 'keys'>): string {
  const [a, b] = t.keys;
  const match = `e.${a.column} = k.${a.column} and e.${b.column} = k.${b.column}`;
  return `with done as (
               delete from ${t.table} e using unnest(${genericArrays([`$1::${a.type}[]`, `$2::${b.type}[]`])}) as k(${a.column}, ${b.column}) where ${match})
             update ${t.table} e set due_at = now() + make_interval(secs => k.ms / 1000.0)
               from unnest(${genericArrays([`$3::${a.type}[]`, `$4::${b.type}[]`, '$5::int[]'])}) as k(${a.column}, ${b.column}, ms) where ${match}`;
}

/**
 * Deletes the rows a tick finished and makes the others due again after their `ms`, in one
 * statement; then `wake` is told when the soonest of them falls due.
 */
export async function settleDue<R>(pool: Pool, table: DueTable<R>, done: readonly R[], retry: readonly { row: R; ms: number }[], wake: (at: number) => void): Promise<void> {
  if (done.length === 0 && retry.length === 0) return;
  const doneKeys = done.map(table.key);
  const retryKeys = retry.map((r) => table.key(r.row));
  await pool.query({
    name: table.statement,
    text: settleSql(table),
    values: [doneKeys.map((k) => k[0]), doneKeys.map((k) => k[1]), retryKeys.map((k) => k[0]), retryKeys.map((k) => k[1]), retry.map((r) => Math.round(r.ms))],
  });
  const soonest = retry.reduce((m, r) => Math.min(m, r.ms), Number.POSITIVE_INFINITY);
  if (soonest < Number.POSITIVE_INFINITY) wake(Date.now() + soonest);
}

export abstract class DueTicker {
  readonly #o: DueTickerOptions;
  #running = false;
  #loop: Promise<void> | undefined;
  /** The pending sleep's wake-up: its time and how to end it early. */
  #sleep: { until: number; timer: NodeJS.Timeout; resolve: () => void } | undefined;
  /** Something of this instance's falls due before the loop would look again: look then. */
  #wanted = Number.POSITIVE_INFINITY;

  constructor(options: DueTickerOptions) {
    this.#o = options;
  }

  /** Claims the due rows and applies them; returns how many it claimed. */
  abstract tick(): Promise<number>;

  get running(): boolean {
    return this.#running;
  }

  /** Something of this instance's falls due at `at` (ms since the epoch): the loop looks then. */
  wake(at: number): void {
    if (!this.#running) return;
    this.#wanted = Math.min(this.#wanted, at);
    const sleep = this.#sleep;
    if (sleep && at < sleep.until) {
      clearTimeout(sleep.timer);
      this.#sleep = undefined;
      if (at <= Date.now()) sleep.resolve();
      else this.#nap(at, sleep.resolve);
    }
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#running = false;
    const sleep = this.#sleep;
    if (sleep) {
      clearTimeout(sleep.timer);
      this.#sleep = undefined;
      sleep.resolve();
    }
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (this.#running) {
      let claimed = 0;
      try {
        this.#wanted = Number.POSITIVE_INFINITY;
        claimed = await this.tick();
      } catch (e) {
        this.#o.log.warn({ err: e }, `${this.#o.name}: tick failed`);
      }
      if (!this.#running) return;
      // A full batch: more are due now. Otherwise sleep until the next look or a row of ours falls due.
      if (claimed >= this.#o.batch) continue;
      const until = Math.min(Date.now() + this.#o.tickMs, this.#wanted);
      if (until <= Date.now()) continue;
      await new Promise<void>((resolve) => this.#nap(until, resolve));
    }
  }

  #nap(until: number, resolve: () => void): void {
    const timer = setTimeout(() => {
      this.#sleep = undefined;
      resolve();
    }, Math.max(0, until - Date.now()));
    this.#sleep = { until, timer, resolve };
  }
}
