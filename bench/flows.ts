/**
 * `node bench/flows.ts`: the flows figures of issue 15.
 *
 *   1. a fresh database `omni_bench_flows_<pid>` on 127.0.0.1:5432 (dropped at the end), an
 *      enterprise organization (admin CLI, which also migrates);
 *   2. the plain-SMS drain of the same run (bench/run-drain.ts, as `npm run bench` measures it):
 *      BENCH_FLOW_DRAIN_MESSAGES (= BENCH_FLOW_EVENTS; 0 skips) sandbox SMS accepted through REST
 *      while no worker runs, then sent by a workers-only process: messages sent per second, the
 *      reference the flows figures are judged against (executions/s ÷ plain drain ≥ 0.5);
 *   3. throughput: the service with its workers (`node src/main.ts`), a 5-node flow (trigger on
 *      `contact.created`, condition, send_message sms, wait 0 s, end) created through the API, then
 *      BENCH_FLOW_EVENTS (10,000) `contact.created` events inserted straight into the outbox in one
 *      statement; measured until every execution completed: executions completed per second, step
 *      latency (a step's end minus its predecessor's end: queueing + running) p50/p99, and the
 *      sandbox drain rate of the same run (messages handed to the sandbox provider per second)
 *      with the ratio executions/s ÷ drain rate;
 *   4. paced: BENCH_FLOW_PACED_SECONDS (10 s; 0 skips) of events fed at BENCH_FLOW_PACED_SHARE (0.8)
 *      of the executions/s just measured, in slices every 100 ms: step latency p50/p99 and
 *      start→completed p50/p99 of those executions;
 *   5. reliability: BENCH_FLOW_RELIABILITY (1,000) more events while a workers-only process
 *      (`--workers-only`, FLOWS_STEP_EXPIRE_SECONDS=3) is killed with SIGKILL BENCH_FLOW_KILL_MS
 *      (3,000 ms) after each start, once it has moved some execution on, and restarted; then every execution must be completed and
 *      every execution must have exactly one message and one send at the sandbox provider
 *      (`sandbox_sends`), counted once every message went out (a killed worker's delivery lease
 *      lapses first);
 *   6. a table, and bench/results/flows.json.
 */
import pg from 'pg';
import {
  benchOrganization, call, createCleanup, createKeys, createLog, envNumber, fmt, freePort, freshLocalDatabase, runMain, sleep, startChild, table, waitReady, writeResults,
} from './support.ts';
import { runDrain, type DrainResult } from './run-drain.ts';

const intEnv = (name: string, fallback: number, min = 1) => envNumber(name, fallback, min, true);
const EVENTS = intEnv('BENCH_FLOW_EVENTS', 10_000);
const RELIABILITY = intEnv('BENCH_FLOW_RELIABILITY', 1_000, 0);
const KILL_MS = intEnv('BENCH_FLOW_KILL_MS', 3_000);
const TIMEOUT_S = intEnv('BENCH_FLOW_TIMEOUT_SECONDS', 600);
const DRAIN_MESSAGES = intEnv('BENCH_FLOW_DRAIN_MESSAGES', EVENTS, 0);
const PACED_SECONDS = intEnv('BENCH_FLOW_PACED_SECONDS', 10, 0);
const PACED_SHARE = envNumber('BENCH_FLOW_PACED_SHARE', 0.8, 0.01);

const log = createLog('bench:flows');
const { onCleanup, cleanup } = createCleanup(log);

const FLOW = {
  name: 'Bench welcome',
  trigger: { type: 'event', event: 'contact.created' },
  definition: {
    nodes: [
      { id: 'start', type: 'trigger' },
      { id: 'has_phone', type: 'condition', config: { rules: { field: 'input.phone', op: 'exists' } } },
      { id: 'greet', type: 'send_message', config: { channel: 'sms', to: '{{input.phone}}', body: 'Welcome {{input.contact_id}}' } },
      { id: 'pause', type: 'wait', config: { seconds: 0 } },
      { id: 'done', type: 'end' },
    ],
    edges: [
      { from: 'start', to: 'has_phone' }, { from: 'has_phone', to: 'greet', branch: 'true' }, { from: 'has_phone', to: 'done', branch: 'false' },
      { from: 'greet', to: 'pause' }, { from: 'pause', to: 'done' },
    ],
  },
};

/** Inserts `n` contact.created events (phones from `offset`) into the outbox; returns when they committed. */
async function insertEvents(db: pg.Client, orgId: string, n: number, offset: number): Promise<void> {
  await db.query(
    `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
     select 'evt_bench' || lpad(g::text, 20, '0'), $1, 'test', 'contact.created', 'contact', 'con_bench' || g, 1,
            jsonb_build_object('contact_id', 'con_bench' || g, 'phone', '+1' || (415 + g / 10000) || '555' || lpad((g % 10000)::text, 4, '0')), now()
       from generate_series($2::int, $3::int) as g`, [orgId, offset, offset + n - 1]);
}

async function waitCompleted(db: pg.Client, flowId: string, expected: number, onTick?: (over: number) => Promise<void>): Promise<number> {
  const end = Date.now() + TIMEOUT_S * 1000;
  let done = 0;
  while (Date.now() < end) {
    const r = await db.query("select count(*) filter (where status = 'completed')::int as done, count(*) filter (where status in ('completed','failed','cancelled'))::int as over from flow_executions where flow_id = $1", [flowId]);
    done = r.rows[0].done;
    if (r.rows[0].over >= expected) return done;
    await onTick?.(r.rows[0].over);
    await sleep(250);
  }
  return done;
}

async function main(): Promise<void> {
  const dbUrl = await freshLocalDatabase(`omni_bench_flows_${process.pid}`, onCleanup);
  const { baseEnv, org, monitor } = await benchOrganization(dbUrl, { log, onCleanup });
  // The events start one flow thousands of times a minute on purpose: its per-minute cap is lifted.
  const env = { ...baseEnv, SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '100', SANDBOX_READ_AFTER_MS: '100', FLOWS_MAX_EXECUTIONS_PER_MINUTE: '1000000' };
  const port = await freePort();

  // ---- the plain-SMS drain of this run (the reference) ----
  let drain: DrainResult | undefined;
  if (DRAIN_MESSAGES > 0) {
    const api = startChild('service', ['src/main.ts', '--no-workers'], { ...env, PORT: String(port), HOST: '127.0.0.1' }, { log, onCleanup });
    await waitReady(api, port, '/readyz');
    const keys = await createKeys(port, org.test_api_key, 64);
    drain = await runDrain({
      db: monitor, database: new URL(dbUrl).pathname.slice(1), servicePort: port, keys, env, log,
      startChild: (name, args, e) => startChild(name, args, e, { log, onCleanup }),
      // Few connections: what counts is the workers' drain, not the acceptance (a busy machine sheds 64 at once with 503s).
      config: { messages: DRAIN_MESSAGES, concurrency: 64, timeoutSeconds: 120, connections: 8, startupGraceSeconds: 60 },
    });
    if (drain.accept.errors > 0) log(`plain SMS drain: ${drain.accept.errors} sends refused, e.g. ${drain.accept.sampleError ?? '?'}`);
    await api.stop();
    log(`plain SMS drain: ${drain.sent.count} sent in ${fmt(drain.sent.seconds)} s (${fmt(drain.sent.rate)}/s)`);
    await monitor.query('vacuum (analyze)');
  }
  const service = startChild('service', ['src/main.ts'], { ...env, PORT: String(port), HOST: '127.0.0.1' }, { log, onCleanup });
  await waitReady(service, port, '/readyz');
  const created = await call(port, 'POST', '/v1/flows', { 'X-API-Key': org.test_api_key, 'Content-Type': 'application/json' }, JSON.stringify(FLOW));
  if (created.status !== 201) throw new Error(`flow create: ${created.status} ${created.body}`);
  const flowId = (JSON.parse(created.body) as { data: { id: string } }).data.id;
  log(`flow ${flowId}; ${EVENTS} events`);

  // ---- throughput ----
  const t0 = Date.now();
  await insertEvents(monitor, org.organization_id, EVENTS, 1);
  const done = await waitCompleted(monitor, flowId, EVENTS);
  const seconds = (Date.now() - t0) / 1000;
  const lat = await monitor.query(
    `select percentile_cont(0.5) within group (order by ms) as p50, percentile_cont(0.99) within group (order by ms) as p99 from (
       select extract(epoch from s.finished_at - lag(s.finished_at) over (partition by s.execution_id order by s.seq)) * 1000 as ms
         from flow_execution_steps s join flow_executions e on e.id = s.execution_id where e.flow_id = $1) x where ms is not null`, [flowId]);
  const flowDrain = await monitor.query(
    `select count(*)::int as n, extract(epoch from max(m.sent_at) - min(m.created_at)) as s from messages m
      where m.metadata->>'flow_id' = $1 and m.sent_at is not null`, [flowId]);
  const execPerSec = done / seconds;
  const drainPerSec = flowDrain.rows[0].n / Math.max(0.001, Number(flowDrain.rows[0].s));
  const throughput = { events: EVENTS, completed: done, seconds, executions_per_second: execPerSec, step_latency_ms: { p50: Number(lat.rows[0].p50), p99: Number(lat.rows[0].p99) }, sandbox_sent: flowDrain.rows[0].n, sandbox_drain_per_second: drainPerSec, ratio: execPerSec / drainPerSec };
  log(`throughput: ${done}/${EVENTS} completed in ${fmt(seconds)} s`);

  // ---- paced: step latency at a share of the plain drain rate ----
  let paced: Record<string, unknown> | undefined;
  if (PACED_SECONDS > 0) {
    const rate = PACED_SHARE * execPerSec;
    const total = Math.max(1, Math.round(rate * PACED_SECONDS));
    const p0 = Date.now();
    const from = new Date(p0 - 1);
    let fed = 0;
    while (fed < total) {
      const due = Math.min(total, Math.round(((Date.now() - p0) / 1000) * rate));
      if (due > fed) {
        await insertEvents(monitor, org.organization_id, due - fed, EVENTS + 1 + fed);
        fed = due;
      }
      await sleep(100);
    }
    const fedSeconds = (Date.now() - p0) / 1000;
    const pacedDone = await waitCompleted(monitor, flowId, EVENTS + total);
    const pl = await monitor.query(
      `with x as (select e.id, e.created_at, e.finished_at from flow_executions e where e.flow_id = $1 and e.created_at >= $2)
       select (select percentile_cont(0.5) within group (order by ms) from (
                 select extract(epoch from s.finished_at - lag(s.finished_at) over (partition by s.execution_id order by s.seq)) * 1000 as ms
                   from flow_execution_steps s join x on x.id = s.execution_id) l where ms is not null) as step_p50,
              (select percentile_cont(0.99) within group (order by ms) from (
                 select extract(epoch from s.finished_at - lag(s.finished_at) over (partition by s.execution_id order by s.seq)) * 1000 as ms
                   from flow_execution_steps s join x on x.id = s.execution_id) l where ms is not null) as step_p99,
              (select percentile_cont(0.5) within group (order by extract(epoch from finished_at - created_at) * 1000) from x) as e2e_p50,
              (select percentile_cont(0.99) within group (order by extract(epoch from finished_at - created_at) * 1000) from x) as e2e_p99`,
      [flowId, from]);
    const r = pl.rows[0];
    paced = {
      target_per_second: rate, events: total, fed_seconds: fedSeconds, completed: pacedDone - done,
      step_latency_ms: { p50: Number(r.step_p50), p99: Number(r.step_p99) }, start_to_completed_ms: { p50: Number(r.e2e_p50), p99: Number(r.e2e_p99) },
    };
    log(`paced: ${JSON.stringify(paced)}`);
  }
  await service.stop();

  // ---- reliability: kill -9 the workers repeatedly ----
  let kills = 0;
  let reliability: Record<string, unknown> = { executions: 0 };
  if (RELIABILITY > 0) {
    const wenv = { ...env, FLOWS_STEP_EXPIRE_SECONDS: '3' };
    let worker = startChild('workers', ['src/main.ts', '--workers-only'], wenv, { log, onCleanup });
    await sleep(1500);
    const before = await waitCompleted(monitor, flowId, 0);
    const r0 = Date.now();
    await insertEvents(monitor, org.organization_id, RELIABILITY, 1_000_000 + 1);
    // A kill comes BENCH_FLOW_KILL_MS after a (re)start, once that worker has moved something on.
    let startedAt = Date.now();
    let overAtStart = before;
    let exits = 0;
    const completed = await waitCompleted(monitor, flowId, before + RELIABILITY, async (over) => {
      if (worker.proc.exitCode !== null) {
        // Exited by itself (e.g. its start-up refused by an overloaded database): started again, not counted as a kill.
        exits++;
        log(`reliability: the workers process exited (${worker.proc.exitCode}): ${worker.tail().slice(-300)}`);
        worker = startChild('workers', ['src/main.ts', '--workers-only'], wenv, { log, onCleanup });
        startedAt = Date.now();
        overAtStart = over;
        return;
      }
      if (Date.now() - startedAt < KILL_MS || over === overAtStart) return;
      worker.proc.kill('SIGKILL');
      await worker.exited;
      kills++;
      worker = startChild('workers', ['src/main.ts', '--workers-only'], wenv, { log, onCleanup });
      startedAt = Date.now();
      overAtStart = over;
    });
    // A completed execution's message is accepted, not yet sent: its delivery may be held by a
    // killed worker's lease. The sends are counted once every message of the flow went out (or the bound).
    const sendsEnd = Date.now() + TIMEOUT_S * 1000;
    let unsent = -1;
    while (Date.now() < sendsEnd) {
      unsent = (await monitor.query("select count(*)::int as n from messages where metadata->>'flow_id' = $1 and sent_at is null and status = 'queued'", [flowId])).rows[0].n;
      if (unsent === 0) break;
      await sleep(500);
    }
    if (unsent > 0) log(`reliability: ${unsent} messages still unsent at the bound`);
    await worker.stop();
    const dup = await monitor.query(
      `select count(*)::int as executions,
              count(*) filter (where status = 'completed')::int as completed,
              count(*) filter (where n_messages <> 1)::int as not_one_message,
              count(*) filter (where n_sends <> 1)::int as not_one_send,
              count(*) filter (where n_messages > 1)::int as more_than_one_message,
              count(*) filter (where n_sends > 1)::int as more_than_one_send
         from (select e.id, e.status, coalesce(c.n_messages, 0) as n_messages, coalesce(c.n_sends, 0) as n_sends
                 from flow_executions e
                 left join (select m.metadata->>'flow_execution_id' as execution_id, count(distinct m.id) as n_messages, count(s.idempotency_key) as n_sends
                              from messages m left join sandbox_sends s on s.idempotency_key = m.id
                             where m.metadata->>'flow_id' = $1 group by 1) c on c.execution_id = e.id
                where e.flow_id = $1) x`, [flowId]);
    reliability = { ...dup.rows[0], reliability_executions: RELIABILITY, kills, exits, seconds: (Date.now() - r0) / 1000, all_completed: completed - before };
    log(`reliability: ${JSON.stringify(reliability)}`);
  }

  const rows = [
    ['figure', 'value'],
    ['executions completed / s', fmt(execPerSec)],
    ['step latency p50 / p99 (ms)', `${fmt(throughput.step_latency_ms.p50, 0)} / ${fmt(throughput.step_latency_ms.p99, 0)}`],
    ['sandbox drain (messages sent / s)', fmt(drainPerSec)],
    ['executions/s ÷ drain rate', fmt(throughput.ratio, 2)],
    ['plain SMS drain of this run (sent / s)', drain ? fmt(drain.sent.rate) : 'n/a'],
    ['executions/s ÷ plain SMS drain (goal ≥ 0.5)', drain ? fmt(execPerSec / drain.sent.rate, 2) : 'n/a'],
    [`paced at ${fmt(PACED_SHARE, 2)} × executions/s: step latency p50 / p99 (ms)`, paced ? `${fmt((paced.step_latency_ms as { p50: number }).p50, 0)} / ${fmt((paced.step_latency_ms as { p99: number }).p99, 0)}` : 'n/a'],
    ['paced: start → completed p50 / p99 (ms)', paced ? `${fmt((paced.start_to_completed_ms as { p50: number }).p50, 0)} / ${fmt((paced.start_to_completed_ms as { p99: number }).p99, 0)}` : 'n/a'],
    ['reliability: executions / kills', `${RELIABILITY} / ${kills}`],
    ['reliability: not completed, ≠1 message, ≠1 send', RELIABILITY > 0 ? `${Number(reliability.executions) - Number(reliability.completed)} / ${String(reliability.not_one_message)} / ${String(reliability.not_one_send)}` : 'n/a'],
    ['reliability: >1 message, >1 send (exactly once)', RELIABILITY > 0 ? `${String(reliability.more_than_one_message)} / ${String(reliability.more_than_one_send)}` : 'n/a'],
  ];
  process.stdout.write(`${table(rows)}\n`);
  log(`results: ${writeResults('flows.json', { drain: drain ? { messages: DRAIN_MESSAGES, sent_per_second: drain.sent.rate, seconds: drain.sent.seconds, count: drain.sent.count } : null, throughput, ratio_to_plain_drain: drain ? execPerSec / drain.sent.rate : null, paced: paced ?? null, reliability })}`);
}

await runMain(main, log, cleanup);
