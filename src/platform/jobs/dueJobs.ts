/**
 * The look for due pg-boss jobs, one per instance (platform/jobs/jobs.ts starts it with the
 * workers). A new job wakes its queue's workers at once (pg-boss's NOTIFY at commit); a job due
 * later (`startAfter`, a retry after its delay, a job handed back by the supervisor) is found only
 * by looking. pg-boss looks per worker: every worker of every queue polls on its own timer (about
 * 20 queues, some with several workers, every 0.5–5 s: ~105 fetch statements a second on an idle
 * service, a fifth of a voice burst's statements). Here ONE statement every `tickMs` asks which of
 * this instance's queues hold a job due now, and only those queues' workers are woken to fetch
 * (their own poll is a slow backstop). Which worker gets a job is still pg-boss's locking fetch
 * (`for update skip locked`): every job runs once, whichever instance looks first.
 */
import type { Logger } from '../logger.ts';
import { DueTicker } from './dueTicker.ts';

/** Due jobs counted per queue at most (enough to know how many workers to wake). */
export const DUE_COUNT_CAP = 100;
/**
 * A queue had more due jobs than the idle workers woken for it take: look again this soon (ms).
 * Those workers take one fetch each, then wait for the next wake-up (`batchSize: 1` queues take a
 * job per fetch); busy ones woken fetch again as soon as their jobs are done, so a backlog behind
 * busy workers needs no early look.
 */
export const BACKLOG_LOOK_MS = 50;

/**
 * The queues among `$1` with jobs fetchable now, and how many (at most DUE_COUNT_CAP): pg-boss's
 * own fetch conditions (`plans.fetchNextJob`: not yet active, not blocked by a dependency, due by
 * `job_now()`), on its fetch index (`job_i11`: name first, partial on `state < 'active' and not
 * blocked`) — one probe per queue when nothing is waiting.
 */
export function dueQueuesSql(schema: string): string {
  return `select q.name, d.n from unnest($1::text[]) as q(name)
   cross join lateral (select count(*)::int as n from (select 1 from ${schema}.job j
      where j.name = q.name and j.state < 'active' and not j.blocked and j.start_after <= ${schema}.job_now() limit ${DUE_COUNT_CAP}) due) d
   where d.n > 0`;
}

/** What the look needs of pg-boss (PgBoss's own methods). */
export type DueJobsBoss = {
  getDb(): { executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> };
  /** The workers: `count` is the jobs in hand (0: idle), `options.batchSize` the jobs a fetch takes. */
  getWipData(): { id: string; name: string; count: number; options: { batchSize?: number } }[];
  notifyWorker(workerId: string): void;
};

export class DueJobs extends DueTicker {
  readonly #boss: DueJobsBoss;
  readonly #sql: string;
  readonly #queues: string[];
  /** How often it looks (ms). */
  readonly tickMs: number;

  constructor(deps: { boss: DueJobsBoss; schema: string; queues: readonly string[]; tickMs: number; log: Logger }) {
    // Never a "full batch": one look per tick.
    super({ batch: Number.POSITIVE_INFINITY, tickMs: deps.tickMs, log: deps.log, name: 'due jobs' });
    this.#boss = deps.boss;
    this.#sql = dueQueuesSql(deps.schema);
    this.#queues = [...deps.queues];
    this.tickMs = deps.tickMs;
  }

  /**
   * Looks once; for each queue with due jobs wakes as many of its local workers as their fetches
   * take those jobs, idle workers first (an idle worker fetches at once, a busy one as soon as its
   * jobs are done). When idle workers could not take them all, looks again after BACKLOG_LOOK_MS.
   * Returns the number of queues woken.
   */
  async tick(): Promise<number> {
    if (this.#queues.length === 0) return 0;
    const { rows } = await this.#boss.getDb().executeSql(this.#sql, [this.#queues]);
    if (rows.length === 0) return 0;
    const due = new Map((rows as { name: string; n: number }[]).map((r) => [r.name, r.n]));
    const idleWoken = new Set<string>();
    const workers = this.#boss.getWipData().filter((w) => due.has(w.name)).sort((a, b) => (a.count === 0 ? 0 : 1) - (b.count === 0 ? 0 : 1));
    for (const worker of workers) {
      const left = due.get(worker.name)!;
      if (left <= 0) continue;
      this.#boss.notifyWorker(worker.id);
      if (worker.count === 0) idleWoken.add(worker.name);
      due.set(worker.name, left - Math.max(1, worker.options.batchSize ?? 1));
    }
    if ([...idleWoken].some((name) => due.get(name)! > 0)) this.wake(Date.now() + BACKLOG_LOOK_MS);
    return rows.length;
  }
}
