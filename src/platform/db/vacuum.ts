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

export type VacuumPass = {
  vacuumed: { table: string; dead: number; analyzed: boolean }[];
  /** Tables only analyzed (enough changed rows, too few dead ones to vacuum: insert-mostly tables). */
  analyzed: string[];
  skipped: 'off' | 'autovacuum' | 'busy' | null;
};

/** Advisory lock key of a pass (one instance vacuums at a time). */
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

  async pass(): Promise<VacuumPass> {
    if (this.#mode === 'off') return { vacuumed: [], analyzed: [], skipped: 'off' };
    const client = await this.#pool.connect();
    try {
      const { rows: [setting] } = await client.query<{ autovacuum: string }>(`select current_setting('autovacuum') as autovacuum`);
      if (!vacuumWanted(this.#mode, setting!.autovacuum)) return { vacuumed: [], analyzed: [], skipped: 'autovacuum' };
      const { rows: [lock] } = await client.query<{ ok: boolean }>('select pg_try_advisory_lock($1) as ok', [LOCK_KEY]);
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
          const vacuum = needsVacuum(live, dead, this.#minDead);
          const analyze = needsAnalyze({ live, modified: Number(r.modified), secondsSinceAnalyze: r.since }, this.#minDead);
          if (!vacuum && !analyze) continue;
          // VACUUM and ANALYZE take no parameters: the names are quoted identifiers read from the catalog.
          const table = `${quoteIdent(r.schema)}.${quoteIdent(r.name)}`;
          await client.query(vacuum ? `vacuum${analyze ? ' (analyze)' : ''} ${table}` : `analyze ${table}`);
          if (vacuum) vacuumed.push({ table: `${r.schema}.${r.name}`, dead, analyzed: analyze });
          else analyzed.push(`${r.schema}.${r.name}`);
        }
        return { vacuumed, analyzed, skipped: null };
      } finally {
        await client.query('reset statement_timeout');
        await client.query('reset vacuum_cost_delay');
        await client.query('select pg_advisory_unlock($1)', [LOCK_KEY]);
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
