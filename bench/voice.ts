/**
 * `node bench/voice.ts`: the voice figures of issue 13.
 *
 *   1. database: BENCH_DATABASE_URL, else a fresh `omni_bench_voice_<pid>` on 127.0.0.1:5432 (dropped at
 *      the end), else an embedded PostgreSQL in a temp dir;
 *   2. an enterprise organization (admin CLI, which migrates), BENCH_VOICE_KEYS (32) owner test keys
 *      and one bought voice number. The keys are there so the rate limiter is not what is measured:
 *      POST /v1/voice/calls allows 600 a minute per key on Enterprise, and every key 100 requests a
 *      second (the burst limit; more wait for a later second), so 4 keys capped the bench at 400
 *      calls/s. 32 keys allow 3,200/s and 19,200 calls a minute; the table prints that ceiling;
 *   3. the service (`node src/main.ts`, HTTP and workers in one process, the sandbox's call timings:
 *      the product's defaults, ringing 1 s after the placement and the answer 2 s later, unless
 *      BENCH_VOICE_RING_MS / BENCH_VOICE_ANSWER_MS set them; `npm run bench` also runs a stress profile
 *      of 50 / 100 ms, where every call's lifecycle runs during the bursts) and the bare node:http +
 *      INSERT baseline, each in its own process;
 *   4. warm-up (below: calls like the measured ones, until they ended, and baseline inserts). Then BENCH_VOICE_ROUNDS
 *      (BENCH_PAIRS, 5) rounds (bench/pairs.ts) of a baseline burst and a calls burst, each round
 *      waiting for its calls to end (so the baseline always goes first: a round's calls still ring,
 *      answer and hang up after their burst; each side writes its own table): the judged ratio is the
 *      median of the rounds' calls per second over their inserts per second, with its min–max, not
 *      judged under background load (one pair of 1-s bursts swung 0.41–0.58 on the same code on this
 *      2-core machine). Baseline: BENCH_VOICE_CALLS (1,000) `POST /messages` over
 *      BENCH_VOICE_CONCURRENCY (32) connections;
 *   5. BENCH_VOICE_CALLS sandbox calls to +15005550009 (answers, presses 1, hangs up after 5 s) over
 *      the same concurrency: calls accepted per second (POST → 201), then the time until every call is
 *      `completed`. BENCH_VOICE_SUBSCRIBED (50) of them are watched over graphql-ws `callUpdated`: for
 *      each status the subscriber had not seen yet, the delay from the status change (the step time
 *      the service records in the transaction that makes the change) to its arrival; the first value
 *      (the call as it is when the subscription starts) and repeats of a status already shown (an
 *      event committed before the subscription started) are not counted (also logged by status). Meanwhile a raw pg client
 *      NOTIFYs its send time every 20 ms to a LISTENing one (the floor). CPU per call of the service
 *      and of the database's backends while placing (workers included), and per baseline insert;
 *   BENCH_VOICE_SCHEMA_SQL: SQL run on the bench database once the service has migrated it, before
 *   the warm-up (schema experiments: docs/benchmarks.md, voice, session 20);
 *   6. a table and bench/results/voice.json (voice-<BENCH_VOICE_PROFILE>.json when set). Targets (medians
 *      over the rounds): accepted/s ≥ 0.5 × baseline; subscription p99 ≤ LISTEN/NOTIFY p99 + 25 ms, both
 *      p99 of the round's own seconds (calls burst to the last call ended).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import pg from 'pg';
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';
import {
  answers, benchOrganization, call, cpuMark, cpuSince, createCleanup, machineBusySeconds, createKeys, finite, createLog, envNumber, fmt, freePort, freshLocalDatabase, runMain, sleep, startChild, table, waitReady, writeResults,
} from './support.ts';
import { createLoadMeter, formatLoad, interleave, judgedRows, pairSettings, type Judged } from './pairs.ts';

const CALLS = envNumber('BENCH_VOICE_CALLS', 1000, 1, true);
const CONCURRENCY = envNumber('BENCH_VOICE_CONCURRENCY', 32, 1, true);
const KEYS = envNumber('BENCH_VOICE_KEYS', 32, 1, true);
/** Enterprise limits per key (platform/ratelimit/plans.ts): burst per second, and POST /v1/voice/calls per minute. */
const BURST_PER_KEY = 100;
const CALLS_PER_KEY_MINUTE = 600;
const SUBSCRIBED = envNumber('BENCH_VOICE_SUBSCRIBED', 50, 0, true);
const ROUNDS = envNumber('BENCH_VOICE_ROUNDS', pairSettings().rounds, 1, true);
/** The sandbox's timings (unset: the service's defaults, voice.config.ts) and the results' name. */
const RING_MS = process.env.BENCH_VOICE_RING_MS;
const ANSWER_MS = process.env.BENCH_VOICE_ANSWER_MS;
const PROFILE = process.env.BENCH_VOICE_PROFILE;
/**
 * BENCH_VOICE_ROLES=split: the service as two processes, `--no-workers` (HTTP and subscriptions: the
 * one the bench talks to) and `--workers-only` (placement, the sandbox's lifecycle, the relay), a
 * deployment the README documents; every call status then reaches subscribers through the commit's
 * NOTIFY (none is handed over in-process). CPU per call sums both processes.
 */
const SPLIT = process.env.BENCH_VOICE_ROLES === 'split';
/** BENCH_STAGES=1: the service answers with Server-Timing, and each round logs the calls' mean ms per front-door stage. */
const STAGES = process.env.BENCH_STAGES === '1';
/**
 * Requests sent to each side before the measured bursts, not measured: BENCH_VOICE_WARMUP (300)
 * calls like the measured ones, waited for until they have ended (every step of their lifecycle
 * has run), and BENCH_VOICE_BASELINE_WARMUP (1,000) baseline inserts. Until session 15 both bursts
 * ran on processes that had served only their set-up: a 1,000-request burst lasts about a second,
 * so it measured code still being compiled (the baseline spent 0.28 ms of server CPU per insert
 * there against 0.09 in a 10-s run). Until session 19 the warm-up calls went to the busy number
 * (ended 150 ms after placement), so round 1 compiled the ringing, answer and hangup paths while it
 * was measured (15–19 % of the service's CPU in that round went to V8's compiler threads), and
 * the baseline's 300 inserts left it warming through the rounds (round 1 at 1,160–1,630 inserts/s,
 * round 3 at 2,000–2,400).
 */
const WARMUP = envNumber('BENCH_VOICE_WARMUP', 300, 0, true);
const BASELINE_WARMUP = envNumber('BENCH_VOICE_BASELINE_WARMUP', 1000, 0, true);
/** The measured calls' destination: answers, presses 1, hangs up 5 s after the answer. */
const CALL_TO = '+15005550009';
const TARGET_RATIO = 0.5;
const TARGET_P99_OVER_NOTIFY_MS = 25;

const log = createLog('bench:voice');
const { onCleanup, cleanup } = createCleanup(log);
const hooks = { log, onCleanup };

/** `local`: the database's name when its backends are this machine's processes (CPU accounting). */
async function pickDatabase(): Promise<{ url: string; kind: string; local?: string }> {
  if (process.env.BENCH_DATABASE_URL) {
    // A database of this machine's server: its backends' CPU is counted too.
    const url = new URL(process.env.BENCH_DATABASE_URL);
    const local = ['127.0.0.1', 'localhost'].includes(url.hostname) ? decodeURIComponent(url.pathname.slice(1)) : undefined;
    return { url: process.env.BENCH_DATABASE_URL, kind: 'BENCH_DATABASE_URL', ...(local ? { local } : {}) };
  }
  if (await answers('127.0.0.1', 5432)) {
    const name = `omni_bench_voice_${process.pid}`;
    return { url: await freshLocalDatabase(name, onCleanup), kind: `127.0.0.1:5432/${name} (fresh, dropped at exit)`, local: name };
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'omni-bench-voice-'));
  onCleanup(`temp dir ${dir}`, async () => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const child = startChild('embedded PostgreSQL', ['bench/embedded-pg.ts'], { ...process.env, BENCH_PG_DIR: dir, BENCH_PG_PORT: String(port) }, hooks);
  const line = await child.waitForLine((l) => l.startsWith('{"url"'), 120_000);
  return { url: (JSON.parse(line) as { url: string }).url, kind: `embedded PostgreSQL :${port}` };
}

const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN);
const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { count: s.length, p50: pct(s, 50), p99: pct(s, 99), max: s.at(-1) ?? NaN };
};

/** Sends `count` requests over `concurrency` keep-alive connections; returns the statuses and the elapsed seconds. */
async function burst(count: number, concurrency: number, send: (i: number, agent: http.Agent) => Promise<{ status: number; body: string; headers?: http.IncomingHttpHeaders }>): Promise<{ seconds: number; replies: { status: number; body: string; headers?: http.IncomingHttpHeaders }[] }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const replies: { status: number; body: string; headers?: http.IncomingHttpHeaders }[] = new Array(count);
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) {
      const i = next++;
      replies[i] = await send(i, agent);
    }
  }));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { seconds, replies };
}

/** The machine's busy cores over a burst, and this process's (the load generator's) share of them. */
function busyCores(from: { machine: number; self: NodeJS.CpuUsage }, seconds: number): string {
  const self = process.cpuUsage(from.self);
  return `${fmt((machineBusySeconds() - from.machine) / seconds, 2)} / ${fmt((self.user + self.system) / 1e6 / seconds, 2)}`;
}

/** Mean ms per Server-Timing stage over the replies that carry one. */
function meanStages(replies: { headers?: http.IncomingHttpHeaders }[]): string {
  const sums = new Map<string, { total: number; n: number }>();
  for (const r of replies) {
    for (const m of String(r.headers?.['server-timing'] ?? '').matchAll(/(\w+);dur=([\d.]+)/g)) {
      const s = sums.get(m[1]!) ?? { total: 0, n: 0 };
      s.total += Number(m[2]);
      s.n++;
      sums.set(m[1]!, s);
    }
  }
  return [...sums].map(([stage, s]) => `${stage} ${fmt(s.total / s.n, 2)}`).join(', ') || 'none';
}

async function main(): Promise<void> {
  const db = await pickDatabase();
  log(`database: ${db.kind}`);
  const meter = createLoadMeter(db.local ? [db.local] : []);
  onCleanup('load meter', async () => meter.stop());
  const { baseEnv, org, monitor } = await benchOrganization(db.url, hooks);
  const servicePort = await freePort();
  const serviceEnv = {
    ...baseEnv, PORT: String(servicePort), HOST: '127.0.0.1', ...(RING_MS ? { SANDBOX_CALL_RING_MS: RING_MS } : {}), ...(ANSWER_MS ? { SANDBOX_CALL_ANSWER_MS: ANSWER_MS } : {}),
    ...(STAGES ? { SERVER_TIMING: 'true' } : {}),
  };
  const service = startChild('service', ['src/main.ts', ...(SPLIT ? ['--no-workers'] : [])], serviceEnv, hooks);
  const workersPort = SPLIT ? await freePort() : undefined;
  const workers = workersPort ? startChild('workers', ['src/main.ts', '--workers-only'], { ...serviceEnv, PORT: String(workersPort) }, hooks) : undefined;
  if (SPLIT) log('roles split: --no-workers (HTTP) and --workers-only');
  const baselinePort = await freePort();
  const baseline = startChild('baseline', ['bench/baseline-server.ts'], { ...baseEnv, PORT: String(baselinePort), POOL_MAX: '10' }, hooks);
  await Promise.all([waitReady(service, servicePort, '/readyz'), waitReady(baseline, baselinePort, '/healthz')]);
  // A schema experiment (e.g. fewer indexes on calls): run once the service has migrated the database.
  if (process.env.BENCH_VOICE_SCHEMA_SQL) {
    await monitor.query(process.env.BENCH_VOICE_SCHEMA_SQL);
    log(`schema experiment applied: ${process.env.BENCH_VOICE_SCHEMA_SQL}`);
  }
  const json = (key: string) => ({ 'X-API-Key': key, 'Content-Type': 'application/json' });

  // A round lasts more than 10 s (its calls last 5 s after the answer): two rounds fit in a minute at most.
  const perMinute = Math.min(ROUNDS, 2) * CALLS + WARMUP;
  if (perMinute > KEYS * CALLS_PER_KEY_MINUTE) throw new Error(`${perMinute} calls in a minute need at least ${Math.ceil(perMinute / CALLS_PER_KEY_MINUTE)} keys (BENCH_VOICE_KEYS): ${CALLS_PER_KEY_MINUTE} a minute per key`);
  const keys = await createKeys(servicePort, org.test_api_key, KEYS);
  const found = await call(servicePort, 'GET', '/v1/numbers/available?country=US&type=local&limit=1', json(org.test_api_key));
  const number = (JSON.parse(found.body) as { data: { number: string }[] }).data[0]!.number;
  const bought = await call(servicePort, 'POST', '/v1/numbers', json(org.test_api_key), JSON.stringify({ number }));
  if (bought.status !== 201) throw new Error(`buy number: ${bought.status} ${bought.body}`);
  log(`${keys.length} keys, voice number ${number}`);

  const ws = createClient({ url: `ws://127.0.0.1:${servicePort}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: org.test_api_key }, retryAttempts: 0, lazy: true });
  onCleanup('graphql-ws client', () => ws.dispose() as Promise<void>);

  // ---- warm-up of both sides (not measured) ----
  // The calls side includes `callUpdated` subscriptions (as many as a round starts): until session 17
  // round 1's subscriptions were the first the service ran.
  if (BASELINE_WARMUP > 0) await burst(BASELINE_WARMUP, CONCURRENCY, (i, agent) => call(baselinePort, 'POST', '/messages', { 'Content-Type': 'application/json' }, JSON.stringify({ to: '+14155550100', body: `warm-up ${i}` }), agent));
  if (WARMUP > 0) {
    const warmWatched: Promise<void>[] = [];
    const warmWatch = (id: string) => warmWatched.push(new Promise<void>((resolve) => {
      const dispose = ws.subscribe<{ callUpdated: { status: string } }>({ query: 'subscription($id: ID!) { callUpdated(id: $id) { status steps { at type detail } } }', variables: { id } }, {
        next: (v) => { if (v.data?.callUpdated.status === 'completed') { dispose(); resolve(); } },
        error: () => resolve(), complete: () => resolve(),
      });
    }));
    const warm = await burst(WARMUP, CONCURRENCY, async (i, agent) => {
      const r = await call(servicePort, 'POST', '/v1/voice/calls', json(keys[i % keys.length]!), JSON.stringify({ to: CALL_TO, from: number }), agent);
      if (r.status === 201 && SUBSCRIBED > 0 && i % Math.max(1, Math.floor(WARMUP / SUBSCRIBED)) === 0) warmWatch((JSON.parse(r.body) as { data: { id: string } }).data.id);
      return r;
    });
    const placedWarm = warm.replies.filter((r) => r.status === 201).length;
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(100)) {
      const { rows } = await monitor.query<{ n: number }>(`select count(*)::int as n from calls where ended_at is not null`);
      if (rows[0]!.n >= placedWarm) break;
    }
    await Promise.race([Promise.all(warmWatched), sleep(10_000)]);
    log(`warm-up: ${BASELINE_WARMUP} baseline inserts, ${placedWarm} calls to ${CALL_TO} (ended), ${warmWatched.length} of them watched`);
  }
  const warmedCalls = (await monitor.query<{ n: number }>('select count(*)::int as n from calls')).rows[0]!.n;

  // ---- LISTEN/NOTIFY floor, running through the rounds ----
  const listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  onCleanup('listener', () => listener.end());
  const notifyLatencies: number[] = [];
  listener.on('notification', (m) => { if (m.channel === 'bench_voice_rtt') notifyLatencies.push(performance.timeOrigin + performance.now() - Number(m.payload)); });
  await listener.query('listen bench_voice_rtt');
  let notifying = true;
  const notifier = (async () => {
    while (notifying) {
      await monitor.query(`select pg_notify('bench_voice_rtt', $1)`, [String(performance.timeOrigin + performance.now())]);
      await sleep(20);
    }
  })();

  const subLatencies: number[] = [];
  /** The same latencies by the status that arrived (which statuses make the tail). */
  const byStatus = new Map<string, number[]>();
  /** And by round (`<round> <status>`): whether a round's waves differ (state left by earlier calls). */
  const byRoundStatus = new Map<string, number[]>();
  /** All of a round's subscription latencies (its p99 is judged against the round's NOTIFY p99). */
  const byRound = new Map<number, number[]>();
  const watching: Promise<void>[] = [];
  const watch = (id: string, round: number) => watching.push(new Promise<void>((resolve) => {
    let last: string | undefined;
    const dispose = ws.subscribe<{ callUpdated: { status: string; steps: { at: string; type: string; detail: { status?: string } | null }[] } }>(
      { query: 'subscription($id: ID!) { callUpdated(id: $id) { status steps { at type detail } } }', variables: { id } }, {
        next: (v) => {
          const arrived = Date.now();
          const c = v.data!.callUpdated;
          // Only a status this subscriber has not seen yet: the first value is the call as it was at
          // subscription time, and an event committed before that arrives again as a repeat.
          if (last !== undefined && c.status !== last) {
            const step = c.steps.findLast((s) => s.type === 'status' && s.detail?.status === c.status);
            if (step) {
              subLatencies.push(arrived - Date.parse(step.at));
              byStatus.set(c.status, [...(byStatus.get(c.status) ?? []), arrived - Date.parse(step.at)]);
              byRoundStatus.set(`${round} ${c.status}`, [...(byRoundStatus.get(`${round} ${c.status}`) ?? []), arrived - Date.parse(step.at)]);
              byRound.set(round, [...(byRound.get(round) ?? []), arrived - Date.parse(step.at)]);
            }
          }
          last = c.status;
          if (c.status === 'completed') { dispose(); resolve(); }
        },
        error: () => resolve(), complete: () => resolve(),
      });
  }));

  // ---- rounds: a baseline burst (bare node:http + one INSERT), then a calls burst ----
  const total = { baseSeconds: 0, baseProc: 0, baseDb: 0, placeSeconds: 0, placeProc: 0, placeDb: 0, accepted: 0, done: 0, completedSeconds: 0 };
  const refused: number[] = [];
  type BaseSide = { per_second: number; cores: string; cpu: { proc: number; db: number } };
  type CallsSide = { round: number; accepted_per_second: number; cores: string; accepted: number; refused: number[]; cpu: { proc: number; db: number }; stages: string; notifyFrom: number; notifyTo: number };
  const baseResults: BaseSide[] = [];
  const baseSide = async (round: number): Promise<BaseSide> => {
    const baseMark = cpuMark(baseline.proc.pid, db.local);
    const baseBusy = { machine: machineBusySeconds(), self: process.cpuUsage() };
    const base = await burst(CALLS, CONCURRENCY, (i, agent) => call(baselinePort, 'POST', '/messages', { 'Content-Type': 'application/json' }, JSON.stringify({ to: '+14155550100', body: `round ${round} call ${i}` }), agent));
    const baseCpu = cpuSince(baseMark, baseline.proc.pid, db.local);
    Object.assign(total, { baseSeconds: total.baseSeconds + base.seconds, baseProc: total.baseProc + baseCpu.proc, baseDb: total.baseDb + baseCpu.db });
    const r = { per_second: CALLS / base.seconds, cores: busyCores(baseBusy, base.seconds), cpu: baseCpu };
    baseResults.push(r);
    return r;
  };
  const callsSide = async (round: number): Promise<CallsSide> => {
    const notifyFrom = notifyLatencies.length;
    const watchedBefore = watching.length;
    const placeMark = cpuMark(service.proc.pid, db.local);
    const workersMark = workers ? cpuMark(workers.proc.pid, undefined) : undefined;
    const placeBusy = { machine: machineBusySeconds(), self: process.cpuUsage() };
    const placed = await burst(CALLS, CONCURRENCY, async (i, agent) => {
      const r = await call(servicePort, 'POST', '/v1/voice/calls', json(keys[(round * CALLS + i) % keys.length]!), JSON.stringify({ to: CALL_TO, from: number }), agent);
      if (r.status === 201 && i % Math.max(1, Math.floor(CALLS / Math.max(1, SUBSCRIBED))) === 0 && watching.length - watchedBefore < SUBSCRIBED) watch((JSON.parse(r.body) as { data: { id: string } }).data.id, round);
      return r;
    });
    const placeCpu = cpuSince(placeMark, service.proc.pid, db.local);
    if (workers && workersMark) placeCpu.proc += cpuSince(workersMark, workers.proc.pid, undefined).proc;
    const cores = busyCores(placeBusy, placed.seconds);
    const accepted = placed.replies.filter((r) => r.status === 201).length;
    const refusedNow = placed.replies.filter((r) => r.status !== 201).map((r) => r.status);
    refused.push(...refusedNow);
    Object.assign(total, {
      placeSeconds: total.placeSeconds + placed.seconds, placeProc: total.placeProc + placeCpu.proc, placeDb: total.placeDb + placeCpu.db, accepted: total.accepted + accepted,
    });
    const started = performance.now();
    for (const deadline = Date.now() + 120_000; Date.now() < deadline;) {
      const { rows } = await monitor.query<{ n: number }>(`select count(*)::int as n from calls where status in ('completed','failed','busy','no_answer','cancelled')`);
      total.done = rows[0]!.n - warmedCalls;
      if (total.done >= total.accepted) break;
      await sleep(200);
    }
    total.completedSeconds = Math.max(total.completedSeconds, (performance.now() - started) / 1000 + placed.seconds);
    // The round's watched calls have ended: their last updates are in (or lost), bounded.
    await Promise.race([Promise.all(watching.slice(watchedBefore)), sleep(5_000)]);
    return { round, accepted_per_second: accepted / placed.seconds, cores, accepted, refused: refusedNow, cpu: placeCpu, stages: STAGES ? meanStages(placed.replies) : '', notifyFrom, notifyTo: notifyLatencies.length };
  };
  const overNotifyOf = (c: CallsSide) => stats(byRound.get(c.round) ?? []).p99 - stats(notifyLatencies.slice(c.notifyFrom, c.notifyTo)).p99;
  const pairs = await interleave<BaseSide | CallsSide>({
    sides: [{ name: 'baseline', run: (i) => baseSide(i + 1) }, { name: 'calls', run: (i) => callsSide(i + 1) }],
    order: 'fixed', meter, rounds: ROUNDS,
    rate: (r) => ('per_second' in r ? r.per_second : r.accepted_per_second),
    after: async (side, r) => {
      if (side !== 'calls') return;
      const c = r as CallsSide;
      const roundNo = c.round;
      const b = baseResults.at(-1)!;
      log(`round ${roundNo} busy cores (machine / of it this load generator): baseline ${b.cores}; calls ${c.cores}`);
      if (STAGES) log(`round ${roundNo} stages (mean ms): ${c.stages}`);
      log(`round ${roundNo}: baseline ${fmt(b.per_second)} inserts/s (CPU ms: server ${fmt(b.cpu.proc * 1000 / CALLS, 2)}, database ${fmt(b.cpu.db * 1000 / CALLS, 2)}); calls ${c.accepted} accepted at ${fmt(c.accepted_per_second)}/s (CPU ms per call: service ${fmt(c.cpu.proc * 1000 / CALLS, 2)}, database ${fmt(c.cpu.db * 1000 / CALLS, 2)}); refused: ${c.refused.length ? [...new Set(c.refused)].join(',') : 'none'}; ratio ${fmt(c.accepted_per_second / b.per_second, 2)}; subscription p99 − NOTIFY p99 ${fmt(overNotifyOf(c))} ms`);
    },
    ratios: [
      { name: 'calls accepted/s ÷ baseline inserts/s', numerator: 'calls', denominator: 'baseline', target: { op: '>=', value: TARGET_RATIO },
        value: (c, b) => (c as CallsSide).accepted_per_second / (b as BaseSide).per_second },
      { name: 'subscription p99 − LISTEN/NOTIFY p99 (ms)', numerator: 'calls', denominator: 'baseline', target: { op: '<=', value: TARGET_P99_OVER_NOTIFY_MS },
        value: (c) => overNotifyOf(c as CallsSide) },
    ],
  });
  const rounds = pairs.results.calls!.map((c, i) => {
    const b = pairs.results.baseline![i] as BaseSide;
    const cs = c as CallsSide;
    return { baseline_per_second: b.per_second, accepted_per_second: cs.accepted_per_second, ratio: cs.accepted_per_second / b.per_second, subscription_p99_over_notify_ms: finite(overNotifyOf(cs)) };
  });
  const [judgedRatio, judgedOverNotify] = pairs.ratios as [Judged, Judged];
  const measured = ROUNDS * CALLS;
  const baselineRate = measured / total.baseSeconds;
  const acceptedRate = total.accepted / total.placeSeconds;
  const baseCpu = { proc: total.baseProc, db: total.baseDb };
  const placeCpu = { proc: total.placeProc, db: total.placeDb };
  const accepted = total.accepted;
  const done = total.done;
  const allCompletedSeconds = total.completedSeconds;
  const limiterCeiling = KEYS * BURST_PER_KEY;
  await Promise.race([Promise.all(watching), sleep(10_000)]);
  notifying = false;
  await notifier;

  const sub = stats(subLatencies);
  const notify = stats(notifyLatencies);
  const ratio = judgedRatio.median;
  const statuses = Object.fromEntries([...byStatus].map(([status, xs]) => [status, stats(xs)]));
  log(`callUpdated by status (count, p50 / p99 ms): ${Object.entries(statuses).map(([k, v]) => `${k} ${v.count}, ${fmt(v.p50)} / ${fmt(v.p99)}`).join('; ')}`);
  log(`callUpdated by round and status (p50 / max ms): ${[...byRoundStatus].map(([k, xs]) => { const v = stats(xs); return `${k} ${fmt(v.p50)} / ${fmt(Math.max(...xs))}`; }).join('; ')}`);
  const overNotify = sub.p99 - notify.p99;
  process.stdout.write(`${table([
    ['figure', 'value', 'target'],
    ['sandbox timings: ringing / answer after', RING_MS || ANSWER_MS ? `${RING_MS ?? 'default'} / ${ANSWER_MS ?? 'default'} ms` : 'product defaults (1 s / 2 s)', ''],
    ['baseline node:http + INSERT', `${fmt(baselineRate)} req/s (${ROUNDS} × ${CALLS})`, ''],
    ['  CPU ms per insert: server / database', `${fmt(baseCpu.proc * 1000 / measured, 2)} / ${fmt(baseCpu.db * 1000 / measured, 2)}`, ''],
    ['calls accepted (POST → 201)', `${fmt(acceptedRate)} calls/s (${accepted}/${measured})`, ''],
    ['  CPU ms per call while placing: service / database', `${fmt(placeCpu.proc * 1000 / measured, 2)} / ${fmt(placeCpu.db * 1000 / measured, 2)}`, ''],
    ['ratio to baseline (summed over the rounds; judged below per round)', fmt(acceptedRate / baselineRate, 2), ''],
    ['rate-limit ceiling (burst × keys)', `${fmt(limiterCeiling)} calls/s (${KEYS} keys)${acceptedRate > 0.8 * limiterCeiling ? ': LIMITER-BOUND' : ''}`, ''],
    ['POST → all completed (slowest round)', `${fmt(allCompletedSeconds, 1)} s (${done} ended; each call lasts 5 s after its answer)`, ''],
    ['call status → callUpdated p50 / p99', `${fmt(sub.p50)} / ${fmt(sub.p99)} ms (${sub.count} updates)`, ''],
    ['LISTEN/NOTIFY p50 / p99', `${fmt(notify.p50)} / ${fmt(notify.p99)} ms (${notify.count})`, ''],
    ['subscription p99 − NOTIFY p99 (whole run; judged below per round)', `${fmt(overNotify)} ms`, ''],
  ])}\n\n${table(judgedRows(pairs.ratios))}\nper round: ${rounds.map((r) => `${fmt(r.ratio, 2)} / ${fmt(r.subscription_p99_over_notify_ms ?? NaN)} ms`).join(', ')}\n${formatLoad(pairs.load)}\n`);
  const file = writeResults(PROFILE ? `voice-${PROFILE}.json` : 'voice.json', {
    calls: CALLS, rounds: ROUNDS, ring_ms: RING_MS ?? null, answer_ms: ANSWER_MS ?? null, concurrency: CONCURRENCY, keys: KEYS, limiter_ceiling_per_second: limiterCeiling, database: db.kind,
    baseline_per_second: baselineRate, baseline_cpu_ms: { server: finite(baseCpu.proc * 1000 / measured), db: finite(baseCpu.db * 1000 / measured) },
    placing_cpu_ms_per_call: { service: finite(placeCpu.proc * 1000 / measured), db: finite(placeCpu.db * 1000 / measured) }, accepted, accepted_per_second: acceptedRate, ratio, per_round: rounds, refused_statuses: refused,
    all_completed_seconds: allCompletedSeconds, ended: done, subscription_ms: sub, subscription_ms_by_status: statuses, notify_ms: notify, subscription_p99_over_notify_ms: overNotify,
    subscription_p99_over_notify_ms_judged: judgedOverNotify.median, judged: pairs.ratios, load: pairs.load,
  });
  log(`results: ${file}`);
  if (service.logLines.error) log(`service logged ${service.logLines.error} errors, e.g. ${service.sampleWarning()}`);
}

await runMain(main, log, cleanup);
