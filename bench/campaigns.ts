/**
 * `node bench/campaigns.ts`: the campaigns figures of issue 16.
 *
 *   1. database: BENCH_DATABASE_URL, else a fresh `omni_bench_campaigns_<pid>` on 127.0.0.1:5432
 *      (dropped at the end); an enterprise organization (admin CLI, which migrates);
 *   2. seed straight into the database: BENCH_CAMPAIGN_RECIPIENTS (100,000) test-mode contacts with
 *      E.164 phones and one list holding them all;
 *   3. the service (`--no-workers`), a workers-only process (sandbox latencies 0, unpaced:
 *      CAMPAIGN_SANDBOX_THROUGHPUT=0; batches of the default CAMPAIGN_BATCH_SIZE unless set) and the bare
 *      baseline server, each its own process;
 *   4. baseline: node:http + one INSERT for BENCH_SECONDS (8) at 64 connections (req/s);
 *   5. unpaced campaign to the whole list: time to freeze the audience and enqueue (send →
 *      snapshot_at), then the drain: recipients sent (message accepted) per second until the
 *      campaign completes, with CPU per message of the workers process and of PostgreSQL; the ratio
 *      drain ÷ baseline (issue target ≥ 1.0);
 *   6. paced: BENCH_PACED_SECONDS (60) worth of recipients at 75 msg/s (the sandbox registration) and
 *      at 4 msg/s (a number with an approved 10DLC campaign of a brand scoring 40), the measured rate
 *      from the messages' acceptance times (target ±2 %); BENCH_PACED_SECONDS=0 skips it;
 *   7. crash: BENCH_KILL_RECIPIENTS (20,000) recipients while the workers process is killed with
 *      SIGKILL at a random moment within BENCH_KILL_EVERY_SECONDS (4) after it made progress, and
 *      restarted, until the campaign completed and none of its messages is still queued for
 *      delivery (the kills cover accepting and delivering); at the end every recipient must be
 *      sent or skipped exactly once, counted at the sandbox provider (`sandbox_sends`);
 *      BENCH_KILL_RECIPIENTS=0 skips it;
 *   8. a table and bench/results/campaigns.json.
 *
 * BENCH_STATEMENTS=1 (a server with `shared_preload_libraries = pg_stat_statements`, e.g. a
 * throwaway cluster given as BENCH_DATABASE_URL): the drain's statements by total time per
 * recipient (execution, and planning when `pg_stat_statements.track_planning` is on), the tables'
 * inserted / updated (HOT) / deleted rows and the WAL written, printed after the drain and kept in
 * the results. BENCH_WORKERS_CPU_PROF=<dir>: the first workers process (the unpaced drain's) runs
 * with `--cpu-prof` and writes its profile into <dir> when it stops.
 */
import {
  answers, benchOrganization, call, cpuMark, cpuSince, createCleanup, createLog, envNumber, fmt, freePort, freshLocalDatabase, runMain, sleep,
  startChild, table, waitReady, writeResults, type Child,
} from './support.ts';
import { runLoad } from './load.ts';

const intEnv = (name: string, fallback: number, min = 1) => envNumber(name, fallback, min, true);
const RECIPIENTS = intEnv('BENCH_CAMPAIGN_RECIPIENTS', 100_000, 10);
const SECONDS = intEnv('BENCH_SECONDS', 8);
const PACED_SECONDS = intEnv('BENCH_PACED_SECONDS', 60, 0);
const KILL_RECIPIENTS = intEnv('BENCH_KILL_RECIPIENTS', 20_000, 0);
const KILL_EVERY = intEnv('BENCH_KILL_EVERY_SECONDS', 4);

const log = createLog('bench:campaigns');
const { onCleanup, cleanup } = createCleanup(log);
const hooks = { log, onCleanup };

async function pickDatabase(): Promise<string> {
  if (process.env.BENCH_DATABASE_URL) return process.env.BENCH_DATABASE_URL;
  if (!(await answers('127.0.0.1', 5432))) throw new Error('no PostgreSQL on 127.0.0.1:5432; set BENCH_DATABASE_URL');
  return freshLocalDatabase(`omni_bench_campaigns_${process.pid}`, onCleanup);
}

async function main(): Promise<void> {
  const dbUrl = await pickDatabase();
  const { baseEnv, org, monitor } = await benchOrganization(dbUrl, hooks);
  const key = org.test_api_key;
  // Batches are the product's default size (CAMPAIGN_BATCH_SIZE, 100) unless the environment sets
  // one. Until session 15 the bench sent batches of 50, chosen on a machine at load average 20–28
  // where batches overran their timeout: that halved each batch's statements' reach and measured a
  // drain of 0.84–0.97 × the baseline against 1.16 at the default (docs/benchmarks.md). The 45-s
  // batch timeout stays (a killed worker's batch comes back sooner in the crash part).
  const env = { ...baseEnv, SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '0', SANDBOX_READ_AFTER_MS: '0', CAMPAIGN_SANDBOX_THROUGHPUT: '0', CAMPAIGN_CONCURRENCY: '4', CAMPAIGN_BATCH_TIMEOUT_SECONDS: process.env.CAMPAIGN_BATCH_TIMEOUT_SECONDS ?? '45', MESSAGING_DELIVERY_CONCURRENCY: '64', SANDBOX_BRAND_VETTING_MS: '200', SANDBOX_CAMPAIGN_REVIEW_MS: '400' };
  const database = new URL(dbUrl).pathname.slice(1);

  const servicePort = await freePort();
  const service = startChild('service', ['src/main.ts', '--no-workers'], { ...env, PORT: String(servicePort) }, hooks);
  const baselinePort = await freePort();
  const baseline = startChild('baseline', ['bench/baseline-server.ts'], { ...env, PORT: String(baselinePort), POOL_MAX: '10' }, hooks);
  await Promise.all([waitReady(service, servicePort, '/readyz'), waitReady(baseline, baselinePort, '/healthz')]);
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await call(servicePort, method, path, { 'X-API-Key': key, 'Content-Type': 'application/json' }, body === undefined ? undefined : JSON.stringify(body));
    if (r.status >= 300) throw new Error(`${method} ${path} → ${r.status} ${r.body}`);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- bench reads whatever the API answers
    return r.status === 204 ? undefined : (JSON.parse(r.body) as { data: any }).data;
  };
  const cpuProf = process.env.BENCH_WORKERS_CPU_PROF;
  let workers: Child = startWorkers(cpuProf ? { ...env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --cpu-prof --cpu-prof-dir=${cpuProf}`.trim() } : env);

  // ---- seed ----
  let seeded = 0;
  async function seedList(n: number, name: string): Promise<string> {
    const list = await api('POST', '/v1/contacts/lists', { name });
    const t0 = Date.now();
    await monitor.query(`insert into contacts (id, organization_id, mode, phone, email, first_name, last_name, country, lifecycle_stage, tags, metadata, consent, sequence, created_at, updated_at)
      select 'con_bench' || lpad((g + $3)::text, 10, '0'), $1, 'test', '+1415' || (2000000 + g + $3)::text, null, 'P' || g, null, 'US', null, '[]', '{}', '{}', 1, now(), now()
        from generate_series(1, $2) g`, [org.organization_id, n, seeded]);
    await monitor.query(`insert into contact_list_members (list_id, contact_id, organization_id, mode, added_at)
      select $1, 'con_bench' || lpad((g + $3)::text, 10, '0'), $2, 'test', now() from generate_series(1, $4) g`, [list.id, org.organization_id, seeded, n]);
    seeded += n;
    await monitor.query('analyze contacts; analyze contact_list_members');
    log(`seeded ${n} contacts into ${list.id} in ${Date.now() - t0} ms`);
    return list.id;
  }

  function startWorkers(e: NodeJS.ProcessEnv): Child {
    // A workers-only process serves no HTTP: it starts working once pg-boss is up.
    return startChild('workers', ['src/main.ts', '--workers-only'], e, hooks);
  }

  async function runCampaign(listId: string, extra: Record<string, unknown> = {}) {
    const c = await api('POST', '/v1/campaigns', { name: 'Bench', channel: 'sms', list_id: listId, body: 'Hi {{contact.first_name}}. Reply STOP to opt out', ...extra });
    const sentAt = Date.now();
    await api('POST', `/v1/campaigns/${c.id}/send`);
    return { id: c.id as string, sentAt };
  }
  const campaignRow = async (id: string) => (await monitor.query(`select status, snapshot_at, started_at, completed_at, audience_count from campaigns where id = $1`, [id])).rows[0];
  const counts = async (id: string) => (await monitor.query(`select count(*) filter (where status = 'pending')::int as pending, count(*) filter (where status = 'sent')::int as sent,
      count(*) filter (where status = 'skipped')::int as skipped, count(*)::int as total from campaign_recipients where campaign_id = $1`, [id])).rows[0];

  /**
   * BENCH_STATEMENTS: resets pg_stat_statements and notes the tables' counters and the WAL position;
   * the function it answers reads them again and reports each per recipient.
   */
  async function startProfile() {
    await monitor.query('create extension if not exists pg_stat_statements');
    const tables = async () => new Map((await monitor.query(`select relname, n_tup_ins::float8 as ins, n_tup_upd::float8 as upd, n_tup_hot_upd::float8 as hot, n_tup_del::float8 as del
        from pg_stat_user_tables`)).rows.map((r) => [`${r.relname}`, r as { ins: number; upd: number; hot: number; del: number }]));
    const wal = async () => (await monitor.query(`select pg_current_wal_lsn()::text as lsn`)).rows[0].lsn as string;
    await monitor.query('select pg_stat_clear_snapshot()');
    const t0 = await tables();
    const w0 = await wal();
    await monitor.query('select pg_stat_statements_reset()');
    return async (recipients: number) => {
      const per = (n: number) => n / recipients;
      const rows = (await monitor.query(`select s.calls::float8 as calls, s.total_exec_time as ms, s.total_plan_time as plan_ms, s.plans::float8 as plans, s.rows::float8 as rows,
            s.wal_bytes::float8 as wal, s.shared_blks_dirtied::float8 as dirtied, s.toplevel, regexp_replace(s.query, '\\s+', ' ', 'g') as query
          from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = current_database() order by s.total_exec_time + s.total_plan_time desc`)).rows as
        { calls: number; ms: number; plan_ms: number; plans: number; rows: number; wal: number; dirtied: number; toplevel: boolean; query: string }[];
      await new Promise((r) => setTimeout(r, 1200)); // backends flush their table counters within a second
      await monitor.query('select pg_stat_clear_snapshot()');
      const t1 = await tables();
      const walBytes = Number((await monitor.query(`select pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::float8 as b`, [w0])).rows[0].b);
      // Statements run inside functions (triggers) are listed too, marked "(nested)"; their time is also in their caller's.
      const total = rows.filter((r) => r.toplevel).reduce((a, r) => a + r.ms, 0);
      const planned = rows.filter((r) => r.toplevel).reduce((a, r) => a + r.plan_ms, 0);
      const top = rows.slice(0, 24).map((r) => ({
        ms_per_recipient: per(r.ms), plan_ms_per_recipient: per(r.plan_ms), calls: r.calls, plans: r.plans, rows_per_call: r.calls ? r.rows / r.calls : 0,
        wal_bytes_per_recipient: per(r.wal), query: `${r.toplevel ? '' : '(nested) '}${r.query.slice(0, 160)}`,
      }));
      const changes = [...t1].map(([name, b]) => {
        const a = t0.get(name) ?? { ins: 0, upd: 0, hot: 0, del: 0 };
        return { table: name, inserted: per(b.ins - a.ins), updated: per(b.upd - a.upd), hot: per(b.hot - a.hot), deleted: per(b.del - a.del) };
      }).filter((t) => t.inserted + t.updated + t.deleted > 0.001).sort((x, y) => (y.inserted + y.updated + y.deleted) - (x.inserted + x.updated + x.deleted));
      console.log(table([['exec ms/rcpt', 'plan ms/rcpt', 'calls', 'plans', 'rows/call', 'WAL B/rcpt', 'statement'],
        ...top.map((t) => [fmt(t.ms_per_recipient, 4), fmt(t.plan_ms_per_recipient, 4), String(t.calls), String(t.plans), fmt(t.rows_per_call, 1), fmt(t.wal_bytes_per_recipient, 0), t.query.slice(0, 110)])]));
      console.log(table([['table', 'ins/rcpt', 'upd/rcpt', 'HOT/rcpt', 'del/rcpt'],
        ...changes.map((t) => [t.table, fmt(t.inserted, 2), fmt(t.updated, 2), fmt(t.hot, 2), fmt(t.deleted, 2)])]));
      log(`statements: ${fmt(per(total), 4)} ms per recipient executing and ${fmt(per(planned), 4)} planning in ${rows.filter((r) => r.toplevel).reduce((a, r) => a + r.calls, 0)} calls `
        + `(${rows.filter((r) => r.toplevel).reduce((a, r) => a + r.plans, 0)} planned); WAL ${fmt(per(walBytes), 0)} B per recipient`);
      return { statement_ms_per_recipient: per(total), plan_ms_per_recipient: per(planned), wal_bytes_per_recipient: per(walBytes), top, tables: changes };
    };
  }

  // ---- baseline ----
  const base = await runLoad({
    port: baselinePort, connections: 64, warmupMs: 2000, durationMs: SECONDS * 1000,
    request: (i) => ({ method: 'POST', path: '/messages', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ to: `+1415${String(i).padStart(7, '0')}`, body: 'hi' }) }),
    accept: (s) => s === 201,
  });
  log(`baseline node:http + INSERT: ${fmt(base.rps, 0)} req/s`);
  await baseline.stop();

  // ---- unpaced drain ----
  const listId = await seedList(RECIPIENTS, 'bench all');
  const profile = process.env.BENCH_STATEMENTS === '1' ? await startProfile() : undefined;
  const mark = cpuMark(workers.proc.pid, database);
  const big = await runCampaign(listId);
  let row = await campaignRow(big.id);
  while (!row.snapshot_at) { await sleep(100); row = await campaignRow(big.id); }
  const snapshotMs = new Date(row.snapshot_at).getTime() - big.sentAt;
  const drainStart = Date.now();
  while (row.status !== 'completed') {
    await sleep(250);
    row = await campaignRow(big.id);
    if (Date.now() - drainStart > 30 * 60_000) throw new Error('drain did not finish in 30 min');
  }
  const drainSeconds = (new Date(row.completed_at).getTime() - new Date(row.snapshot_at).getTime()) / 1000;
  const cpu = cpuSince(mark, workers.proc.pid, database);
  const c1 = await counts(big.id);
  const drainRate = c1.sent / drainSeconds;
  log(`unpaced: ${c1.sent} sent in ${fmt(drainSeconds)} s = ${fmt(drainRate, 0)} msg/s; snapshot+enqueue ${snapshotMs} ms`);
  const statements = profile ? await profile(c1.sent) : undefined;

  // ---- paced ----
  const paced: { rate: number; recipients: number; measured: number; error_percent: number }[] = [];
  if (PACED_SECONDS > 0) {
    await workers.stop();
    workers = startWorkers({ ...env, CAMPAIGN_SANDBOX_THROUGHPUT: '75' });
    const brand = await api('POST', '/v1/compliance/brands', { company_name: 'Bench LLC', ein: '45-1234567', country: 'US', entity_type: 'sole_proprietor', vertical: 'retail', contact_email: 'me@bench.test', contact_phone: '+14155550101' });
    const listing = (await api('GET', '/v1/numbers/available?country=US&capabilities=sms'))[0];
    const number = await api('POST', '/v1/numbers', { number: listing.number });
    const reg = await api('POST', '/v1/compliance/campaigns', {
      brand_id: brand.id, use_case: 'marketing', description: 'Weekly offers for members of the bench loyalty club (test).',
      sample_messages: ['Bench: 20% off today. Reply STOP to unsubscribe.'], message_flow: 'Members opt in on the web form and agree to receive offers.',
      opt_in_type: 'web_form', number_ids: [number.id],
    });
    for (let i = 0; i < 100 && (await api('GET', `/v1/compliance/campaigns/${reg.id}`)).status === 'pending'; i++) await sleep(200);
    for (const [rate, from] of [[75, undefined], [4, number.number]] as const) {
      const n = rate * PACED_SECONDS + 1;
      const list = await seedList(n, `paced ${rate}`);
      const c = await runCampaign(list, from ? { from } : {});
      let r = await campaignRow(c.id);
      while (r.status !== 'completed') { await sleep(500); r = await campaignRow(c.id); }
      const times = (await monitor.query(`select created_at from messages where metadata->>'campaign_id' = $1 order by created_at`, [c.id])).rows.map((m) => new Date(m.created_at).getTime());
      const measured = (times.length - 1) / ((times[times.length - 1]! - times[0]!) / 1000);
      paced.push({ rate, recipients: times.length, measured, error_percent: ((measured - rate) / rate) * 100 });
      log(`paced ${rate} msg/s: ${times.length} messages, measured ${fmt(measured, 2)} msg/s`);
    }
  }

  // ---- crash ----
  let crash: { recipients: number; kills: number; sent_once: number; skipped: number; duplicates: number; missing: number; seconds: number } | undefined;
  if (KILL_RECIPIENTS > 0) {
    await workers.stop();
    workers = startWorkers(env);
    const list = await seedList(KILL_RECIPIENTS, 'crash');
    const c = await runCampaign(list);
    const t0 = Date.now();
    let kills = 0;
    // The run ends when the campaign completed (every recipient accepted or skipped) and none of
    // its messages is still queued for delivery: the kills go on through both phases (accepting in
    // batches, then delivering), so the provider's count covers crashes in either.
    const queued = async () => (await monitor.query(`select count(*)::int as n from messages where metadata->>'campaign_id' = $1 and status = 'queued'`, [c.id])).rows[0].n as number;
    const finished = async () => (await campaignRow(c.id)).status === 'completed' && (await queued()) === 0;
    const now = async () => { const k = await counts(c.id); return k.total + k.sent - (await queued()); };
    let progress = -1;
    while (!(await finished())) {
      // Kill only a worker that has done something since it started (a loaded machine may take
      // seconds to boot one), at a random moment within the next KILL_EVERY seconds.
      while ((await now()) === progress && !(await finished())) await sleep(200);
      await sleep(Math.random() * KILL_EVERY * 1000);
      if (await finished()) break;
      workers.proc.kill('SIGKILL');
      await workers.exited;
      progress = await now();
      kills++;
      workers = startWorkers(env);
      if (Date.now() - t0 > 20 * 60_000) throw new Error('crash run did not finish in 20 min');
    }
    const seconds = (Date.now() - t0) / 1000;
    const perAddress = (await monitor.query(`select s.n, count(*)::int as addresses from (
        select r.address, count(ss.idempotency_key)::int as n from campaign_recipients r
          left join messages m on m.id = r.message_id
          left join sandbox_sends ss on ss.idempotency_key = m.id
         where r.campaign_id = $1 and r.status = 'sent' group by r.address) s group by s.n`, [c.id])).rows as { n: number; addresses: number }[];
    const msgDupes = (await monitor.query(`select count(*)::int as n from (select "to" from messages where metadata->>'campaign_id' = $1 group by "to" having count(*) > 1) d`, [c.id])).rows[0].n;
    const k = await counts(c.id);
    crash = {
      recipients: k.total, kills, sent_once: perAddress.find((p) => p.n === 1)?.addresses ?? 0, skipped: k.skipped,
      duplicates: msgDupes + perAddress.filter((p) => p.n > 1).reduce((a, p) => a + p.addresses, 0),
      missing: k.total - k.sent - k.skipped + (perAddress.find((p) => p.n === 0)?.addresses ?? 0), seconds,
    };
    log(`crash: ${JSON.stringify(crash)}`);
  }
  await workers.stop();
  await service.stop();

  const results = {
    recipients: RECIPIENTS, baseline_insert_rps: base.rps,
    snapshot_and_enqueue_ms: snapshotMs, drain_seconds: drainSeconds, drain_msg_per_s: drainRate, drain_over_baseline: drainRate / base.rps,
    cpu_ms_per_message: { workers: (cpu.proc * 1000) / c1.sent, postgres: (cpu.db * 1000) / c1.sent },
    paced, crash, ...(statements ? { statements } : {}),
  };
  console.log(table([
    ['figure', 'value', 'target'],
    ['baseline node:http + INSERT (req/s)', fmt(base.rps, 0), ''],
    [`audience snapshot + enqueue (${RECIPIENTS} recipients, ms)`, String(snapshotMs), ''],
    ['unpaced drain (recipients sent/s)', fmt(drainRate, 0), ''],
    ['drain ÷ baseline', fmt(drainRate / base.rps, 3), '≥ 1.0'],
    ['CPU ms per message: workers / PostgreSQL', `${fmt(results.cpu_ms_per_message.workers, 2)} / ${fmt(results.cpu_ms_per_message.postgres, 2)}`, ''],
    ...paced.map((p) => [`paced ${p.rate} msg/s (${p.recipients} msgs): measured`, `${fmt(p.measured, 2)} (${fmt(p.error_percent, 2)} %)`, '±2 %']),
    ...(crash ? [[`kill -9 ×${crash.kills} (${crash.recipients} recipients): once / duplicates / missing`, `${crash.sent_once + crash.skipped} / ${crash.duplicates} / ${crash.missing}`, 'all / 0 / 0']] : []),
  ]));
  log(`results: ${writeResults('campaigns.json', results)}`);
}

await runMain(main, log, cleanup);
