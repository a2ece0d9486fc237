/**
 * Fault finding of the soak (issue 20): on a PostgreSQL server with `autovacuum = off` (this
 * machine's), the churn of jobs, messages and events left dead row versions in the tables and in
 * pg-boss's partial fetch index, and delivery throughput decayed over minutes until the workers
 * fell behind; one manual VACUUM drained a backlog of 7,878 messages within 30 s. The service now
 * vacuums its churning tables itself when the server does not (DB_VACUUM, platform/db/vacuum.ts):
 * the scheduled `platform.vacuum` job, one instance at a time.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import { VacuumKeeper } from '../../src/platform/db/vacuum.ts';
import { startTestApp, type TestApp } from '../helpers/testApp.ts';
import { eventuallyHolds } from '../helpers/assertions.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    // VACUUM of a table needs its owner before PostgreSQL 17 (from 17 the service's role holds
    // pg_maintain): docs/operations.md, "Database roles".
    asOwner: true,
    clock: systemClock, workers: true,
    env: { DB_VACUUM: 'always', DB_VACUUM_MIN_DEAD_ROWS: '40', DB_VACUUM_QUEUE_INTERVAL_MS: '300', SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '0' },
  });
});
afterAll(async () => { await t?.close(); });


async function tableStats(table: string): Promise<{ dead: number; vacuums: number }> {
  const [schema, name] = table.split('.');
  const { rows: [r] } = await t.db.query<{ dead: string; vacuums: string }>(
    `select n_dead_tup as dead, vacuum_count as vacuums from pg_stat_user_tables where schemaname = $1 and relname = $2`, [schema, name]);
  return { dead: Number(r?.dead ?? 0), vacuums: Number(r?.vacuums ?? 0) };
}

const waitFor = <T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, ms = 30_000): Promise<T> => eventuallyHolds(what, read, ok, ms, 200);

/** Runs `fn` while a session holds advisory lock `key` (a pass of that kind then steps aside as busy). */
async function holding<T>(key: number, fn: () => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: t.databaseUrl });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [key]);
    return await fn();
  } finally {
    await client.end();
  }
}
const MINUTE_PASS_LOCK = 7_310_421_907;
const QUEUE_PASS_LOCK = MINUTE_PASS_LOCK + 1;

async function sendAndDeliver(key: string, n: number, label: string): Promise<void> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await t.rest('POST', '/v1/messages/sms', { key, body: { to: '+14155550100', body: `${label} ${i}` } });
    expect(r.status, r.text).toBe(201);
    ids.push(r.body.data.id);
  }
  await waitFor(async () => (await t.db.query<{ n: number }>(`select count(*)::int as n from messages where id = any($1) and status = 'delivered'`, [ids])).rows[0]!.n, (n) => n === ids.length, 'deliveries');
}

describe('the service vacuums its churning tables', () => {
  it('queue tables are vacuumed between the minute passes (DB_VACUUM_QUEUE_INTERVAL_MS), without the minute pass', async () => {
    const org = await t.createOrg('enterprise');
    // The minute's pass is held off: a vacuum seen here is a quick pass's.
    await holding(MINUTE_PASS_LOCK, async () => {
      const start = await tableStats('public.events_outbox');
      // Every message's events go through the outbox: inserted, then deleted by the relay.
      await sendAndDeliver(org.testKey, 20, 'outbox churn');
      const after = await waitFor(() => tableStats('public.events_outbox'), (s) => s.vacuums > start.vacuums, 'a quick vacuum of events_outbox', 15_000);
      expect(after.vacuums).toBeGreaterThan(start.vacuums);
    });
  });

  it('the platform.vacuum job vacuums the delivery queue that delivered messages left dead rows in', () => holding(QUEUE_PASS_LOCK, async () => {
    const org = await t.createOrg('enterprise');
    const start = await tableStats('public.messaging_deliveries');
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: `churn ${i}` } });
      expect(r.status, r.text).toBe(201);
      ids.push(r.body.data.id);
    }
    await waitFor(async () => (await t.db.query<{ n: number }>(`select count(*)::int as n from messages where id = any($1) and status = 'delivered'`, [ids])).rows[0]!.n, (n) => n === ids.length, 'deliveries');
    // Each delivery row was inserted, claimed (updated) and deleted: dead versions of it (statistics
    // arrive within a second or so; the minute's scheduled pass may have vacuumed them already).
    const churned = await waitFor(() => tableStats('public.messaging_deliveries'), (s) => s.dead >= 40 || s.vacuums > start.vacuums, 'dead delivery rows in the statistics');
    // The schedule fires every minute; the test runs the same job now.
    await t.app.jobs.enqueue('platform.vacuum', {});
    const after = await waitFor(() => tableStats('public.messaging_deliveries'), (s) => s.vacuums > start.vacuums && s.dead < 40, 'a vacuum of messaging_deliveries');
    expect(after.dead).toBeLessThan(Math.max(churned.dead, 40));
    const { rows: schedule } = await t.db.query(`select cron from pgboss.schedule where name = 'platform.vacuum'`);
    expect(schedule).toEqual([{ cron: '* * * * *' }]);
  }));

  // The quick passes (every 300 ms here) are held off: they would vacuum the counters first.
  it('vacuums only past the threshold, never with DB_VACUUM=off, follows the server setting with auto, and one instance at a time', () => holding(QUEUE_PASS_LOCK, async () => {
    const pool = new pg.Pool({ connectionString: t.databaseUrl, max: 2 });
    try {
      await t.db.query(`insert into rate_limit_counters (bucket, window_start, count, expires_at) select 'vac:' || g, 0, 0, now() + interval '1 hour' from generate_series(1, 200) g`);
      for (let i = 0; i < 3; i++) await t.db.query(`update rate_limit_counters set count = count + 1 where bucket like 'vac:%'`);
      await waitFor(() => tableStats('public.rate_limit_counters'), (s) => s.dead >= 400, 'dead counter rows');

      expect(await new VacuumKeeper({ pool, mode: 'off', minDeadRows: 1 }).pass()).toEqual({ vacuumed: [], analyzed: [], skipped: 'off' });
      // Past any table's dead rows: nothing to do.
      expect(await new VacuumKeeper({ pool, mode: 'always', minDeadRows: 10_000_000 }).pass()).toEqual({ vacuumed: [], analyzed: [], skipped: null });

      // Another instance's pass holds the lock: this one steps aside.
      const holder = await pool.connect();
      try {
        await holder.query('select pg_advisory_lock(7310421907)');
        expect(await new VacuumKeeper({ pool, mode: 'always', minDeadRows: 1 }).pass()).toEqual({ vacuumed: [], analyzed: [], skipped: 'busy' });
        await holder.query('select pg_advisory_unlock(7310421907)');
      } finally {
        holder.release();
      }

      const { rows: [server] } = await t.db.query<{ autovacuum: string }>(`select current_setting('autovacuum') as autovacuum`);
      const auto = await new VacuumKeeper({ pool, mode: 'auto', minDeadRows: 300 }).pass();
      if (server!.autovacuum === 'on') {
        expect(auto).toEqual({ vacuumed: [], analyzed: [], skipped: 'autovacuum' });
      } else {
        expect(auto.skipped).toBeNull();
        expect(auto.vacuumed.map((v) => v.table)).toContain('public.rate_limit_counters');
        await waitFor(() => tableStats('public.rate_limit_counters'), (s) => s.dead < 400 && s.vacuums > 0, 'the counters vacuumed');
      }
    } finally {
      await pool.end();
    }
  }));
});
