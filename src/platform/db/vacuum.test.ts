import { describe, expect, it } from 'vitest';
import { VacuumKeeper, needsVacuum, vacuumCostDelay, vacuumWanted } from './vacuum.ts';

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
        if (text.includes('pg_stat_user_tables')) return { rows: [{ schema: 'public', name: 'messages', live: '100000', dead: '50000' }, { schema: 'public', name: 'keys', live: '10', dead: '5' }] };
        return { rows: [] };
      },
      release: () => {},
    };
    return { statements, pool: { connect: async () => client } as unknown as ConstructorParameters<typeof VacuumKeeper>[0]['pool'] };
  }

  it('throttles its VACUUMs with vacuum_cost_delay (autovacuum-like) and resets it before the client goes back', async () => {
    const { statements, pool } = recordingPool();
    const pass = await new VacuumKeeper({ pool, mode: 'always', minDeadRows: 1000, costDelayMs: 2 }).pass();
    expect(pass.vacuumed).toEqual([{ table: 'public.messages', dead: 50000 }]);
    const set = statements.indexOf("set vacuum_cost_delay = '2ms'");
    const vacuum = statements.findIndex((s) => s.startsWith('vacuum (analyze) "public"."messages"'));
    const reset = statements.indexOf('reset vacuum_cost_delay');
    expect(set).toBeGreaterThanOrEqual(0);
    expect(vacuum).toBeGreaterThan(set);
    expect(reset).toBeGreaterThan(vacuum);
  });

  it('0 ms runs unthrottled; a delay outside 0–100 ms is refused', () => {
    expect(vacuumCostDelay(0)).toBe("'0ms'");
    expect(vacuumCostDelay(2.5)).toBe("'2.5ms'");
    expect(() => vacuumCostDelay(-1)).toThrow(RangeError);
    expect(() => vacuumCostDelay(Number.NaN)).toThrow(RangeError);
  });
});
