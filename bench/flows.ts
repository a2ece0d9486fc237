/**
 * `node bench/flows.ts`: the flows figures of issue 15.
 *
 *   1. a fresh database `omni_bench_flows_<pid>` on 127.0.0.1:5432 (dropped at the end), an
 *      enterprise organization (admin CLI, which also migrates);
 *   2. throughput: the service with its workers (`node src/main.ts`), a 5-node flow (trigger on
 *      `contact.created`, condition, send_message sms, wait 0 s, end) created through the API, then
 *      BENCH_FLOW_EVENTS (10,000) `contact.created` events inserted straight into the outbox in one
 *      statement; measured until every execution completed: executions completed per second, step
 *      latency (a step's end minus its predecessor's end: queueing + running) p50/p99, and the
 *      sandbox drain rate of the same run (messages handed to the sandbox provider per second)
 *      with the ratio executions/s ÷ drain rate;
 *   3. reliability: BENCH_FLOW_RELIABILITY (1,000) more events while a workers-only process
 *      (`--workers-only`, FLOWS_STEP_EXPIRE_SECONDS=3) is killed with SIGKILL BENCH_FLOW_KILL_MS
 *      (3,000 ms) after each start, once it has moved some execution on, and restarted; then every execution must be completed and
 *      every execution must have exactly one message and one send at the sandbox provider
 *      (`sandbox_sends`);
 *   4. a table, and bench/results/flows.json.
 */
import pg from 'pg';
import {
  benchOrganization, call, createCleanup, createLog, envNumber, fmt, freePort, freshLocalDatabase, runMain, sleep, startChild, table, waitReady, writeResults,
} from './support.ts';

const intEnv = (name: string, fallback: number, min = 1) => envNumber(name, fallback, min, true);
const EVENTS = intEnv('BENCH_FLOW_EVENTS', 10_000);
const RELIABILITY = intEnv('BENCH_FLOW_RELIABILITY', 1_000, 0);
const KILL_MS = intEnv('BENCH_FLOW_KILL_MS', 3_000);
const TIMEOUT_S = intEnv('BENCH_FLOW_TIMEOUT_SECONDS', 600);

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
  const env = { ...baseEnv, SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '100', SANDBOX_READ_AFTER_MS: '100', FLOWS_CONCURRENCY: '2', FLOWS_BATCH_SIZE: '8', FLOWS_MAX_EXECUTIONS_PER_MINUTE: '1000000' };
  const port = await freePort();
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
  const drain = await monitor.query(
    `select count(*)::int as n, extract(epoch from max(m.sent_at) - min(m.created_at)) as s from messages m
      where m.metadata->>'flow_id' = $1 and m.sent_at is not null`, [flowId]);
  const execPerSec = done / seconds;
  const drainPerSec = drain.rows[0].n / Math.max(0.001, Number(drain.rows[0].s));
  const throughput = { events: EVENTS, completed: done, seconds, executions_per_second: execPerSec, step_latency_ms: { p50: Number(lat.rows[0].p50), p99: Number(lat.rows[0].p99) }, sandbox_sent: drain.rows[0].n, sandbox_drain_per_second: drainPerSec, ratio: execPerSec / drainPerSec };
  log(`throughput: ${done}/${EVENTS} completed in ${fmt(seconds)} s`);
  await service.stop();

  // ---- reliability: kill -9 the workers repeatedly ----
  let kills = 0;
  let reliability: Record<string, unknown> = { executions: 0 };
  if (RELIABILITY > 0) {
    const wenv = { ...env, FLOWS_STEP_EXPIRE_SECONDS: '3' };
    let worker = startChild('workers', ['src/main.ts', '--workers-only'], wenv, { log, onCleanup });
    await sleep(1500);
    const before = done;
    const r0 = Date.now();
    await insertEvents(monitor, org.organization_id, RELIABILITY, EVENTS + 1);
    // A kill comes BENCH_FLOW_KILL_MS after a (re)start, once that worker has moved something on.
    let startedAt = Date.now();
    let overAtStart = before;
    const completed = await waitCompleted(monitor, flowId, before + RELIABILITY, async (over) => {
      if (Date.now() - startedAt < KILL_MS || over === overAtStart) return;
      worker.proc.kill('SIGKILL');
      await worker.exited;
      kills++;
      worker = startChild('workers', ['src/main.ts', '--workers-only'], wenv, { log, onCleanup });
      startedAt = Date.now();
      overAtStart = over;
    });
    await worker.stop();
    const dup = await monitor.query(
      `select count(*)::int as executions,
              count(*) filter (where status = 'completed')::int as completed,
              count(*) filter (where n_messages <> 1)::int as not_one_message,
              count(*) filter (where n_sends <> 1)::int as not_one_send
         from (select e.id, e.status,
                      (select count(*) from messages m where m.metadata->>'flow_execution_id' = e.id) as n_messages,
                      (select count(*) from messages m join sandbox_sends s on s.idempotency_key = m.id where m.metadata->>'flow_execution_id' = e.id) as n_sends
                 from flow_executions e where e.flow_id = $1) x`, [flowId]);
    reliability = { executions: RELIABILITY, kills, seconds: (Date.now() - r0) / 1000, all_completed: completed - before, ...dup.rows[0] };
    log(`reliability: ${JSON.stringify(reliability)}`);
  }

  const rows = [
    ['figure', 'value'],
    ['executions completed / s', fmt(execPerSec)],
    ['step latency p50 / p99 (ms)', `${fmt(throughput.step_latency_ms.p50, 0)} / ${fmt(throughput.step_latency_ms.p99, 0)}`],
    ['sandbox drain (messages sent / s)', fmt(drainPerSec)],
    ['executions/s ÷ drain rate', fmt(throughput.ratio, 2)],
    ['reliability: executions / kills', `${RELIABILITY} / ${kills}`],
    ['reliability: not completed, ≠1 message, ≠1 send', RELIABILITY > 0 ? `${Number(reliability.executions) - Number(reliability.completed)} / ${String(reliability.not_one_message)} / ${String(reliability.not_one_send)}` : 'n/a'],
  ];
  process.stdout.write(`${table(rows)}\n`);
  log(`results: ${writeResults('flows.json', { throughput, reliability })}`);
}

await runMain(main, log, cleanup);
