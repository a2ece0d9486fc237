/**
 * The service's own vacuuming, for a PostgreSQL server whose autovacuum is off. Queue and status
 * tables churn: every job is inserted, then updated twice (created → active → completed), every
 * message three or four times, every event once more when it is dispatched. Without vacuum the
 * dead row versions stay in the tables and in their partial indexes (pg-boss's fetch index covers
 * `state < 'active'`: each completed job leaves a dead entry there), so each fetch and status read
 * walks more of them and throughput decays over minutes (the fault harness's soak saw the workers
 * fall behind after 5½ minutes on a server started with `autovacuum = off`).
 *
 * `DB_VACUUM`: `auto` (default) vacuums only when the server's `autovacuum` setting is off,
 * `always` regardless, `off` never. Each pass (the scheduled job `platform.vacuum`, every minute,
 * one instance at a time) runs `VACUUM` on the tables of this database with more dead rows than
 * max(`DB_VACUUM_MIN_DEAD_ROWS`, 10 % of their live rows), most dead rows first, and `ANALYZE` on
 * those with as many changed rows at most every 10 minutes (`needsAnalyze`).
 *
 * A pass is throttled as autovacuum throttles itself: `vacuum_cost_delay` `DB_VACUUM_COST_DELAY_MS`
 * (2 ms, autovacuum's default; a manual VACUUM's own default is 0, unthrottled) after every
 * `vacuum_cost_limit` (200) of page work. Unthrottled, a pass over a messages table of a few hundred
 * thousand rows took a core for a second or more once a minute, and the soak at half the sustained
 * rate answered with seconds-long p99s and shed requests (docs/faults.md, scenario 7, session 11).
 */
import type { Pool } from 'pg';

export type VacuumMode = 'auto' | 'always' | 'off';

export const VACUUM_MODES: readonly VacuumMode[] = ['auto', 'always', 'off'];

/** Whether a pass vacuums, given the mode and the server's `autovacuum` setting. */
export function vacuumWanted(mode: VacuumMode, serverAutovacuum: string): boolean {
  if (mode === 'always') return true;
  if (mode === 'off') return false;
  return serverAutovacuum.trim().toLowerCase() !== 'on';
}

/** A table's dead rows past the threshold: max(minDead, 10 % of its live rows). */
export function needsVacuum(live: number, dead: number, minDead: number): boolean {
  return dead >= Math.max(minDead, Math.ceil(live * 0.1));
}

/** Planner statistics are refreshed at most this often per table (unless never taken, or the table changed by more than its size). */
export const ANALYZE_INTERVAL_SECONDS = 600;

/**
 * Whether a table's planner statistics are due: as many rows changed since the last ANALYZE as
 * the vacuum threshold (inserts count: an insert-only table is analyzed too), and the last one is
 * older than ANALYZE_INTERVAL_SECONDS, or there was none, or more rows changed than it has.
 * A churning table crossed the threshold every minute, and ANALYZE (a 30,000-row sample) cost a
 * 500,000-row messages table about a second of CPU per pass, more than its VACUUM.
 */
export function needsAnalyze(t: { live: number; modified: number; secondsSinceAnalyze: number | null }, minDead: number): boolean {
  if (t.modified < Math.max(minDead, Math.ceil(t.live * 0.1))) return false;
  return t.secondsSinceAnalyze === null || t.secondsSinceAnalyze >= ANALYZE_INTERVAL_SECONDS || t.modified >= t.live;
}

/**
 * Queue-shaped tables (few live rows, a steady stream of inserts and deletes: the events outbox,
 * the delivery queue, sandbox reports, rate-limit counters, pg-boss's queues) get a quick pass
 * every `DB_VACUUM_QUEUE_INTERVAL_MS` (10 s) besides the minute's. Their readers walk the dead
 * entries left since the last vacuum on every read: in the soak at 566/s (session 12) the relay's
 * outbox read touched 440 buffers per call and `events_outbox` alone took 18.9 million buffer hits
 * in four minutes, a third of the database's, on a table with almost no live rows.
 */
export const QUEUE_TABLE_MAX_LIVE_ROWS = 10_000;

/** A quick pass's threshold: dead rows past max(min(minDead, 1,000), 10 % of live rows), on tables of at most QUEUE_TABLE_MAX_LIVE_ROWS live rows. */
export function needsQueueVacuum(live: number, dead: number, minDead: number): boolean {
  return live <= QUEUE_TABLE_MAX_LIVE_ROWS && needsVacuum(live, dead, Math.min(minDead, 1_000));
}

export type VacuumPass = {
  vacuumed: { table: string; dead: number; analyzed: boolean }[];
  /** Tables only analyzed (enough changed rows, too few dead ones to vacuum: insert-mostly tables). */
  analyzed: string[];
  skipped: 'off' | 'autovacuum' | 'busy' | null;
};

/** Advisory lock key of a pass (one instance vacuums at a time); quick passes over queue tables take the next key. */
const LOCK_KEY = 7_310_421_907;

export class VacuumKeeper {
  readonly #pool: Pool;
  readonly #mode: VacuumMode;
  readonly #minDead: number;
  readonly #costDelayMs: number;

  constructor(deps: { pool: Pool; mode: VacuumMode; minDeadRows: number; costDelayMs?: number }) {
    this.#pool = deps.pool;
    this.#mode = deps.mode;
    this.#minDead = deps.minDeadRows;
    this.#costDelayMs = deps.costDelayMs ?? 2;
  }

  /**
   * `all` (the minute's pass): every table past its threshold, with ANALYZE when due. `queues`:
   * only queue-shaped tables (needsQueueVacuum), no ANALYZE, no truncation of the file's empty
   * tail (that takes an exclusive lock the table's writers would queue behind). Both skip a table
   * another vacuum holds (SKIP_LOCKED), and each kind runs on one instance at a time.
   */
  async pass(kind: 'all' | 'queues' = 'all'): Promise<VacuumPass> {
    if (this.#mode === 'off') return { vacuumed: [], analyzed: [], skipped: 'off' };
    const client = await this.#pool.connect();
    const lockKey = kind === 'all' ? LOCK_KEY : LOCK_KEY + 1;
    try {
      const { rows: [setting] } = await client.query<{ autovacuum: string }>(`select current_setting('autovacuum') as autovacuum`);
      if (!vacuumWanted(this.#mode, setting!.autovacuum)) return { vacuumed: [], analyzed: [], skipped: 'autovacuum' };
      const { rows: [lock] } = await client.query<{ ok: boolean }>('select pg_try_advisory_lock($1) as ok', [lockKey]);
      if (!lock!.ok) return { vacuumed: [], analyzed: [], skipped: 'busy' };
      try {
        // A large table's vacuum may outlast DB_STATEMENT_TIMEOUT_MS; reset before the client goes back.
        await client.query('set statement_timeout = 0');
        await client.query(`set vacuum_cost_delay = ${vacuumCostDelay(this.#costDelayMs)}`);
        const { rows } = await client.query<{ schema: string; name: string; live: string; dead: string; modified: string; since: number | null }>(
          `select schemaname as schema, relname as name, n_live_tup as live, n_dead_tup as dead, n_mod_since_analyze as modified,
                  extract(epoch from now() - greatest(last_analyze, last_autoanalyze))::float8 as since
             from pg_stat_user_tables where n_dead_tup > 0 or n_mod_since_analyze > 0 order by n_dead_tup desc`);
        const vacuumed: VacuumPass['vacuumed'] = [];
        const analyzed: string[] = [];
        for (const r of rows) {
          const [live, dead] = [Number(r.live), Number(r.dead)];
          const vacuum = kind === 'all' ? needsVacuum(live, dead, this.#minDead) : needsQueueVacuum(live, dead, this.#minDead);
          const analyze = kind === 'all' && needsAnalyze({ live, modified: Number(r.modified), secondsSinceAnalyze: r.since }, this.#minDead);
          if (!vacuum && !analyze) continue;
          // VACUUM and ANALYZE take no parameters: the names are quoted identifiers read from the catalog.
          const table = `${quoteIdent(r.schema)}.${quoteIdent(r.name)}`;
          const options = ['skip_locked', ...(analyze ? ['analyze'] : []), ...(kind === 'queues' ? ['truncate false'] : [])].join(', ');
          await client.query(vacuum ? `vacuum (${options}) ${table}` : `analyze (skip_locked) ${table}`);
          if (vacuum) vacuumed.push({ table: `${r.schema}.${r.name}`, dead, analyzed: analyze });
          else analyzed.push(`${r.schema}.${r.name}`);
        }
        return { vacuumed, analyzed, skipped: null };
      } finally {
        await client.query('reset statement_timeout');
        await client.query('reset vacuum_cost_delay');
        await client.query('select pg_advisory_unlock($1)', [lockKey]);
      }
    } finally {
      client.release();
    }
  }
}

/** The `vacuum_cost_delay` setting's literal for a delay in ms (a number: nothing to quote). */
export function vacuumCostDelay(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0 || ms > 100) throw new RangeError(`vacuum cost delay must be 0–100 ms, got ${ms}`);
  return `'${ms}ms'`;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * The quick passes over queue tables, every `intervalMs` on each workers process (the advisory
 * lock keeps them to one instance at a time). Not a pg-boss schedule: cron's finest step is a
 * minute. A failed pass is logged and the next one runs on time.
 */
export class QueueVacuumLoop {
  readonly #keeper: VacuumKeeper;
  readonly #intervalMs: number;
  readonly #onPass: (pass: VacuumPass) => void;
  readonly #onError: (e: unknown) => void;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;

  constructor(deps: { keeper: VacuumKeeper; intervalMs: number; onPass?: (pass: VacuumPass) => void; onError: (e: unknown) => void }) {
    this.#keeper = deps.keeper;
    this.#intervalMs = deps.intervalMs;
    this.#onPass = deps.onPass ?? (() => {});
    this.#onError = deps.onError;
  }

  start(): void {
    if (this.#intervalMs <= 0 || this.#timer) return;
    this.#timer = setInterval(() => {
      if (this.#running) return;
      this.#running = this.#keeper.pass('queues').then(this.#onPass, this.#onError).finally(() => { this.#running = undefined; });
    }, this.#intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}
