import { describe, expect, it } from 'vitest';
import { ANALYZE_INTERVAL_SECONDS, QUEUE_TABLE_MAX_LIVE_ROWS, QueueVacuumLoop, VacuumKeeper, needsAnalyze, needsQueueVacuum, needsVacuum, vacuumCostDelay, vacuumWanted } from './vacuum.ts';

describe('vacuum decisions', () => {
  it('auto vacuums only when the server does not', () => {
    expect(vacuumWanted('auto', 'off')).toBe(true);
    expect(vacuumWanted('auto', 'on')).toBe(false);
    expect(vacuumWanted('always', 'on')).toBe(true);
    expect(vacuumWanted('off', 'off')).toBe(false);
  });

  it('a table needs it past max(minimum, 10 % of its live rows) dead rows', () => {
    expect(needsVacuum(0, 999, 1000)).toBe(false);
    expect(needsVacuum(0, 1000, 1000)).toBe(true);
    expect(needsVacuum(100_000, 9_999, 1000)).toBe(false);
    expect(needsVacuum(100_000, 10_000, 1000)).toBe(true);
  });
});

describe('a vacuum pass', () => {
  /** A pool whose one client answers the pass's catalog reads and records every statement. */
  function recordingPool() {
    const statements: string[] = [];
    const client = {
      query: async (text: string) => {
        statements.push(text);
        if (text.includes("current_setting('autovacuum')")) return { rows: [{ autovacuum: 'off' }] };
        if (text.includes('pg_try_advisory_lock')) return { rows: [{ ok: true }] };
        if (text.includes('pg_stat_user_tables')) {
          return { rows: [
            { schema: 'public', name: 'messages', live: '100000', dead: '50000', modified: '60000', since: 30 },
            { schema: 'public', name: 'events', live: '100000', dead: '0', modified: '20000', since: null },
            { schema: 'public', name: 'keys', live: '10', dead: '5', modified: '5', since: null },
            { schema: 'public', name: 'events_outbox', live: '3', dead: '4000', modified: '500', since: 20 },
          ] };
        }
        return { rows: [] };
      },
      release: () => {},
    };
    return { statements, pool: { connect: async () => client } as unknown as ConstructorParameters<typeof VacuumKeeper>[0]['pool'] };
  }

  it('throttles its VACUUMs with vacuum_cost_delay (autovacuum-like) and resets it before the client goes back', async () => {
    const { statements, pool } = recordingPool();
    const pass = await new VacuumKeeper({ pool, mode: 'always', minDeadRows: 1000, costDelayMs: 2 }).pass();
    // messages: vacuumed, not analyzed again 30 s after the last ANALYZE; events (insert-only, never analyzed): analyzed.
    expect(pass.vacuumed).toEqual([{ table: 'public.messages', dead: 50000, analyzed: false }, { table: 'public.events_outbox', dead: 4000, analyzed: false }]);
    expect(pass.analyzed).toEqual(['public.events']);
    expect(statements).toContain('analyze (skip_locked) "public"."events"');
    expect(statements).toContain('select pg_advisory_unlock($1)');
    const set = statements.indexOf("set vacuum_cost_delay = '2ms'");
    const vacuum = statements.findIndex((s) => s === 'vacuum (skip_locked) "public"."messages"');
    const reset = statements.indexOf('reset vacuum_cost_delay');
    expect(set).toBeGreaterThanOrEqual(0);
    expect(vacuum).toBeGreaterThan(set);
    expect(reset).toBeGreaterThan(vacuum);
  });

  it('a quick pass vacuums only queue-shaped tables, without ANALYZE or truncation, under its own lock', async () => {
    const { statements, pool } = recordingPool();
    const pass = await new VacuumKeeper({ pool, mode: 'always', minDeadRows: 10_000, costDelayMs: 2 }).pass('queues');
    // messages: too many live rows; events: nothing dead; keys: 5 dead < min(10,000, 1,000).
    expect(pass).toEqual({ vacuumed: [{ table: 'public.events_outbox', dead: 4000, analyzed: false }], analyzed: [], skipped: null });
    expect(statements.filter((s) => /^(vacuum|analyze)/.test(s))).toEqual(['vacuum (skip_locked, truncate false) "public"."events_outbox"']);
    expect(statements).toContain('select pg_try_advisory_lock($1) as ok');
  });

  it('queue tables: few live rows, past max(min(minimum, 1,000), 10 % of live) dead rows', () => {
    expect(needsQueueVacuum(0, 1000, 10_000)).toBe(true);
    expect(needsQueueVacuum(0, 999, 10_000)).toBe(false);
    expect(needsQueueVacuum(0, 40, 40)).toBe(true);
    expect(needsQueueVacuum(QUEUE_TABLE_MAX_LIVE_ROWS, 1000, 10_000)).toBe(true);
    expect(needsQueueVacuum(QUEUE_TABLE_MAX_LIVE_ROWS + 1, 1_000_000, 10_000)).toBe(false);
  });

  it('the quick loop runs a queue pass per interval, never two at once, and stop() waits for the one running', async () => {
    let running = 0;
    let most = 0;
    let passes = 0;
    let release: () => void = () => {};
    const keeper = { pass: async (kind: string) => {
      expect(kind).toBe('queues');
      running++; passes++; most = Math.max(most, running);
      await new Promise<void>((r) => { release = r; });
      running--;
      return { vacuumed: [], analyzed: [], skipped: null };
    } } as unknown as VacuumKeeper;
    const loop = new QueueVacuumLoop({ keeper, intervalMs: 5, onError: (e) => { throw e; } });
    loop.start();
    for (const end = Date.now() + 5_000; passes === 0 && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 40)); // several intervals while the first pass is held
    expect(passes).toBe(1);
    let stopped = false;
    const stopping = loop.stop().then(() => { stopped = true; });
    await new Promise((r) => setTimeout(r, 10));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(most).toBe(1);
    await new Promise((r) => setTimeout(r, 20));
    expect(passes).toBe(1);
  });

  it('planner statistics: past the change threshold, at most every ANALYZE_INTERVAL_SECONDS unless never taken or the table changed by more than its size', () => {
    expect(needsAnalyze({ live: 100_000, modified: 9_999, secondsSinceAnalyze: null }, 1000)).toBe(false);
    expect(needsAnalyze({ live: 100_000, modified: 10_000, secondsSinceAnalyze: null }, 1000)).toBe(true);
    expect(needsAnalyze({ live: 100_000, modified: 50_000, secondsSinceAnalyze: 60 }, 1000)).toBe(false);
    expect(needsAnalyze({ live: 100_000, modified: 50_000, secondsSinceAnalyze: ANALYZE_INTERVAL_SECONDS }, 1000)).toBe(true);
    expect(needsAnalyze({ live: 100_000, modified: 100_000, secondsSinceAnalyze: 60 }, 1000)).toBe(true);
    expect(needsAnalyze({ live: 0, modified: 999, secondsSinceAnalyze: null }, 1000)).toBe(false);
  });

  it('0 ms runs unthrottled; a delay outside 0–100 ms is refused', () => {
    expect(vacuumCostDelay(0)).toBe("'0ms'");
    expect(vacuumCostDelay(2.5)).toBe("'2.5ms'");
    expect(() => vacuumCostDelay(-1)).toThrow(RangeError);
    expect(() => vacuumCostDelay(Number.NaN)).toThrow(RangeError);
  });
});
