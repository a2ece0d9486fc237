/**
 * `settleDue` (platform/jobs/dueTicker.ts), the end of a tick of every table of due rows (the
 * messaging delivery queue, the messaging and voice sandbox timelines): against the real voice
 * timeline table, the finished rows are deleted and the failed ones made due again after their
 * delay, in one statement, and the loop is woken for the soonest of them.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleDue } from '../src/platform/jobs/dueTicker.ts';
import { TIMELINE_DUE } from '../src/modules/voice/sandbox/timeline.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

let t: TestApp;
let pool: pg.Pool;
beforeAll(async () => {
  t = await startTestApp({ workers: false });
  pool = new pg.Pool({ connectionString: t.databaseUrl, max: 2 });
});
afterAll(async () => {
  await pool?.end();
  await t?.close();
});

type Row = Parameters<typeof TIMELINE_DUE.key>[0];
const row = (call_id: string, seq: number): Row => ({ call_id, seq, attempts: 1, event: { type: 'timer', kind: 'max_duration' }, tenant: null });

describe('settleDue', () => {
  it('deletes the finished rows, makes the failed ones due again after their delay, and wakes for the soonest', async () => {
    const ids = ['cal_settle_a', 'cal_settle_b', 'cal_settle_c', 'cal_settle_d'];
    await pool.query(`insert into voice_sandbox_events (call_id, seq, due_at, event)
      select id, 1, now() + interval '15 seconds', '{"type":"timer","kind":"max_duration"}' from unnest($1::text[]) id`, [ids]);
    const woken: number[] = [];
    const before = Date.now();
    await settleDue(pool, TIMELINE_DUE, [row('cal_settle_a', 1)], [{ row: row('cal_settle_b', 1), ms: 3000 }, { row: row('cal_settle_c', 1), ms: 800.4 }], (at) => woken.push(at));
    const { rows } = await pool.query<{ call_id: string; in_ms: number }>(
      `select call_id, (extract(epoch from due_at - now()) * 1000)::int as in_ms from voice_sandbox_events where call_id = any($1::text[]) order by call_id`, [ids]);
    expect(rows.map((r) => r.call_id)).toEqual(['cal_settle_b', 'cal_settle_c', 'cal_settle_d']);
    const inMs = new Map(rows.map((r) => [r.call_id, r.in_ms]));
    expect(inMs.get('cal_settle_b')).toBeGreaterThan(2000);
    expect(inMs.get('cal_settle_b')).toBeLessThanOrEqual(3000);
    expect(inMs.get('cal_settle_c')).toBeLessThanOrEqual(800);
    expect(inMs.get('cal_settle_d')).toBeGreaterThan(10_000); // not named: untouched
    expect(woken).toHaveLength(1);
    expect(woken[0]).toBeGreaterThanOrEqual(before + 800);
    expect(woken[0]).toBeLessThanOrEqual(Date.now() + 801);
  });

  it('sends nothing and wakes nobody when nothing was finished or failed', async () => {
    const woken: number[] = [];
    const failing = { query: () => Promise.reject(new Error('no statement expected')) } as unknown as pg.Pool;
    await settleDue(failing, TIMELINE_DUE, [], [], (at) => woken.push(at));
    expect(woken).toEqual([]);
  });
});
