/**
 * Agents bench (`node bench/agents.ts`): on a fresh database (the machine's PostgreSQL, else an
 * embedded one) with the service and the bare node:http + INSERT baseline in their own processes:
 *   1. non-streamed chat with the sandbox model at zero model latency: requests/s ÷ the baseline's
 *      one-INSERT requests/s, as BENCH_PAIRS (5) interleaved rounds of 1 s warm-up + BENCH_SECONDS
 *      (3) each (bench/pairs.ts): the median of the rounds' ratios (target ≥ 0.3; not judged under
 *      background load);
 *   2. streamed chat: time to the first `chunk` as the client sees it, minus the model's own
 *      first-token delay (SANDBOX_LLM_FIRST_TOKEN_MS, here BENCH_AGENT_FIRST_TOKEN_MS): the
 *      service's added time, p50/p99 (target p99 ≤ 5 ms), one request at a time;
 *   3. knowledge: indexing a BENCH_AGENT_CORPUS_MB text corpus through the upload route (time,
 *      chunks/s), then grown to BENCH_AGENT_CHUNKS chunks with SQL, and retrieval (a chat turn that
 *      calls knowledge_base) p50/p99.
 * Knobs: BENCH_CONNECTIONS (32), BENCH_SECONDS (3, per side and round), BENCH_AGENT_STREAMS (200),
 * BENCH_AGENT_STREAM_WARMUP (10, unmeasured streams first; then one per API key not used yet), BENCH_AGENT_STREAM_GAP_MS (0, a pause before each stream), BENCH_AGENT_FIRST_TOKEN_MS (20), BENCH_AGENT_CORPUS_MB (5), BENCH_AGENT_CHUNKS (100000), BENCH_STAGES=1 (the
 * streamed requests' Server-Timing stages before the stream starts),
 * BENCH_AGENT_QUERIES (200), BENCH_KEYS (100),
 * BENCH_AGENT_TAIL=1 (what overlapped the slowest streamed samples: the collections of this process
 * and of the stream service, the latter preloaded with bench/gc-observe.ts, and the database
 * connections opened during the streams; with BENCH_STAGES=1 also each slow sample's stages),
 * BENCH_SERVICE_NODE_ARGS (node options for both service processes, e.g. `--max-semi-space-size=32`).
 * Results: bench/results/agents.json.
 */
import http from 'node:http';
import { PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runLoad, type LoadResult, type RequestSpec } from './load.ts';
import { createLoadMeter, formatFigure, formatLoad, formatVerdict, interleave } from './pairs.ts';
import {
  answers, benchOrganization, call, cpuMark, cpuSince, createKeys, createCleanup, createLog, envNumber, fmt, freePort, freshLocalDatabase, runMain, startChild as spawnChild,
  table, waitReady, writeResults, type Child,
} from './support.ts';

const log = createLog('agents');
const { onCleanup, cleanup } = createCleanup(log);
const startChild = (name: string, args: string[], env: NodeJS.ProcessEnv): Child => spawnChild(name, args, env, { log, onCleanup });

const CONNECTIONS = envNumber('BENCH_CONNECTIONS', 32, 1, true);
const SECONDS = envNumber('BENCH_SECONDS', 3);
const STREAMS = envNumber('BENCH_AGENT_STREAMS', 200, 1, true);
const STREAM_WARMUP = envNumber('BENCH_AGENT_STREAM_WARMUP', 10, 0, true);
const STREAM_GAP_MS = envNumber('BENCH_AGENT_STREAM_GAP_MS', 0, 0, true);
const FIRST_TOKEN_MS = envNumber('BENCH_AGENT_FIRST_TOKEN_MS', 20, 0, true);
const CORPUS_MB = envNumber('BENCH_AGENT_CORPUS_MB', 5, 0.01);
const CHUNKS = envNumber('BENCH_AGENT_CHUNKS', 100_000, 1, true);
const QUERIES = envNumber('BENCH_AGENT_QUERIES', 200, 1, true);
const TAIL = process.env.BENCH_AGENT_TAIL === '1';
const SERVICE_ARGS = [...(process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(/\s+/).filter(Boolean), 'src/main.ts', '--no-workers'];

const WORDS = ['refund', 'shipping', 'warranty', 'invoice', 'delivery', 'account', 'password', 'order', 'return', 'discount', 'store', 'hours',
  'payment', 'card', 'subscription', 'cancel', 'upgrade', 'support', 'ticket', 'address', 'tracking', 'package', 'label', 'exchange'];

async function database(): Promise<string> {
  if (await answers('127.0.0.1', 5432)) return freshLocalDatabase(`omni_bench_agents_${process.pid}`, onCleanup);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'omni-bench-agents-'));
  onCleanup(`temp dir ${dir}`, async () => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  const pgChild = startChild('embedded PostgreSQL', ['bench/embedded-pg.ts'], { ...process.env, BENCH_PG_DIR: dir, BENCH_PG_PORT: String(port) });
  return (JSON.parse(await pgChild.waitForLine((l) => l.startsWith('{"url"'), 120_000)) as { url: string }).url;
}

/** A process's system-call and CPU counters (/proc): write and read calls, user and system CPU seconds. */
function procCounters(pid: number | undefined): { syscw: number; syscr: number; user: number; system: number } {
  try {
    const io = Object.fromEntries(readFileSync(`/proc/${pid}/io`, 'utf8').trim().split('\n').map((l) => l.split(': ')).map(([k, v]) => [k, Number(v)]));
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return { syscw: io.syscw ?? NaN, syscr: io.syscr ?? NaN, user: Number(stat[11]) / 100, system: Number(stat[12]) / 100 };
  } catch {
    return { syscw: NaN, syscr: NaN, user: NaN, system: NaN };
  }
}
/** What the server did per request between two procCounters readings: write and read calls, user and system CPU ms. */
function perRequestCalls(from: ReturnType<typeof procCounters>, to: ReturnType<typeof procCounters>, n: number): string {
  return `${fmt((to.syscw - from.syscw) / n, 2)} write + ${fmt((to.syscr - from.syscr) / n, 2)} read calls, user ${fmt(((to.user - from.user) * 1000) / n, 3)} + system ${fmt(((to.system - from.system) * 1000) / n, 3)} ms CPU`;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;

/** Time from sending a streamed chat to its response headers (the checks before the stream), in ms, per request. */
const headerTimes: number[] = [];
/** BENCH_STAGES=1: the service's Server-Timing stages of each streamed request (ms by stage). */
const stageTimes = new Map<string, number[]>();
/** The Server-Timing header of each streamed request, in order. */
const serverTimings: string[] = [];

// This process's own scavenges must not fall inside a streamed sample (they did: 10–12 of 500 samples
// overlapped one): a minor collection is forced before each measured stream, whose own garbage then
// stays far below the young generation's size.
v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as (options?: { type?: 'minor' | 'major'; execution?: 'sync' | 'async' }) => void;

/** Where the last streamed request started (epoch ms, the clock the collections are lined up on). */
let lastStart = 0;

/** Time from sending a streamed chat to its first `chunk` event, in ms. */
function firstChunkMs(port: number, key: string, agentId: string, agent: http.Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ message: 'How long does shipping take?', stream: true });
    const started = performance.now();
    lastStart = performance.timeOrigin + started;
    const req = http.request({ agent, host: '127.0.0.1', port, method: 'POST', path: `/v1/agents/${agentId}/chat`, headers: { 'Content-Type': 'application/json', 'X-API-Key': key, 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      let first: number | undefined;
      let text = ''; // only until the first chunk (then only the byte count: no per-sample garbage beyond it)
      headerTimes.push(performance.now() - started);
      serverTimings.push(String(res.headers['server-timing'] ?? ''));
      for (const m of String(res.headers['server-timing'] ?? '').matchAll(/(\w+);dur=([\d.]+)/g)) {
        const list = stageTimes.get(m[1]!) ?? [];
        list.push(Number(m[2]));
        stageTimes.set(m[1]!, list);
      }
      res.on('data', (c: Buffer) => {
        if (first !== undefined) return;
        text += c.toString('utf8');
        if (text.includes('event: chunk')) first = performance.now() - started;
      });
      res.on('end', () => (first === undefined ? reject(new Error(`no chunk: ${res.statusCode} ${text.slice(0, 200)}`)) : resolve(first)));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function corpus(bytes: number): string {
  const out: string[] = [];
  let size = 0;
  let n = 0;
  while (size < bytes) {
    const sentence = `Article ${n} about ${WORDS[n % WORDS.length]} and ${WORDS[(n * 7) % WORDS.length]}: customers asking about ${WORDS[(n * 13) % WORDS.length]} should check section ${n % 97}.`;
    out.push(n % 8 === 7 ? `${sentence}\n\n` : `${sentence} `);
    size += sentence.length + 1;
    n++;
  }
  return out.join('');
}

await runMain(async () => {
  const dbUrl = await database();
  const { baseEnv, org, monitor } = await benchOrganization(dbUrl, { log, onCleanup });
  const key = org.test_api_key;
  const servicePort = await freePort();
  const service = startChild('service', SERVICE_ARGS, {
    ...baseEnv, PORT: String(servicePort), HOST: '127.0.0.1', SANDBOX_LLM_FIRST_TOKEN_MS: '0', SANDBOX_LLM_CHUNK_MS: '0', MAX_UPLOAD_BYTES: String(Math.ceil(CORPUS_MB * 1.1 * 1024 * 1024) + 65536),
  });
  const baselinePort = await freePort();
  const baseline = startChild('baseline', ['bench/baseline-server.ts'], { ...baseEnv, PORT: String(baselinePort), POOL_MAX: '10' });
  await Promise.all([waitReady(service, servicePort, '/readyz'), waitReady(baseline, baselinePort, '/healthz')]);
  const json = { 'Content-Type': 'application/json', 'X-API-Key': key };
  // Enterprise chat limit: 1,200 per minute per key; rotate keys so the limiter never answers.
  const keys = await createKeys(servicePort, key, envNumber('BENCH_KEYS', 100, 1, true));
  const keyed = (i: number) => ({ 'Content-Type': 'application/json', 'X-API-Key': keys[i % keys.length]! });
  const created = await call(servicePort, 'POST', '/v1/agents', json, JSON.stringify({ name: 'Bench', type: 'conversational', model: 'sandbox-1', system_prompt: 'Answer briefly.', channels: ['web'], tools: [{ name: 'knowledge_base', description: 'docs' }] }));
  const agentId = (JSON.parse(created.body) as { data: { id: string } }).data.id;
  await call(servicePort, 'POST', `/v1/agents/${agentId}/deploy`, json, '{}');

  // 1. Non-streamed chat vs the INSERT baseline (new conversation each time: one transaction per turn).
  // CPU per request (/proc: the server process, and the database's backends), steadier than
  // requests/s on a shared machine: over the whole run, warm-up included, per successful response.
  const dbName = new URL(dbUrl).pathname.slice(1);
  const meter = createLoadMeter([dbName]);
  const baseCpu = { proc: 0, db: 0 };
  const chatCpu = { proc: 0, db: 0 };
  const baseCalls = procCounters(baseline.proc.pid);
  const chatCalls = procCounters(service.proc.pid);
  const measured = (pid: number | undefined, acc: { proc: number; db: number }, port: number, request: (i: number) => RequestSpec) => async (): Promise<LoadResult> => {
    const mark = cpuMark(pid, dbName);
    const r = await runLoad({ port, connections: CONNECTIONS, warmupMs: 1000, durationMs: SECONDS * 1000, request });
    const used = cpuSince(mark, pid, dbName);
    acc.proc += used.proc;
    acc.db += used.db;
    return r;
  };
  const pairs = await interleave<LoadResult>({
    meter, rate: (r) => r.rps, log,
    sides: [
      { name: 'baseline', run: measured(baseline.proc.pid, baseCpu, baselinePort, (i) => ({ method: 'POST', path: '/messages', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ to: '+14155550100', body: `hi ${i}` }) })) },
      { name: 'chat', run: measured(service.proc.pid, chatCpu, servicePort, (i) => ({ method: 'POST', path: `/v1/agents/${agentId}/chat`, headers: keyed(i), body: JSON.stringify({ message: `Question ${i} about my order` }) })) },
    ],
    ratios: [{ name: 'chat req/s ÷ baseline req/s', numerator: 'chat', denominator: 'baseline', target: { op: '>=', value: 0.3 } }],
  });
  meter.stop();
  const baseCallsEnd = procCounters(baseline.proc.pid);
  const chatCallsEnd = procCounters(service.proc.pid);
  const sumOf = (rs: LoadResult[]) => {
    const okAll = rs.reduce((n, r) => n + r.okAll, 0);
    const med = (f: (r: LoadResult) => number) => [...rs.map(f)].sort((a, b) => a - b)[Math.floor(rs.length / 2)] ?? NaN;
    return { rps: med((r) => r.rps), p50: med((r) => r.p50), p99: med((r) => r.p99), errors: rs.reduce((n, r) => n + r.errors, 0), okAll, sampleError: rs.find((r) => r.sampleError)?.sampleError };
  };
  const base = sumOf(pairs.results.baseline!);
  const chat = sumOf(pairs.results.chat!);
  const judged = pairs.ratios[0]!;
  const perRequest = (cpu: { proc: number; db: number }, n: number) => `server ${fmt((cpu.proc * 1000) / n, 3)} + database ${fmt((cpu.db * 1000) / n, 3)} ms CPU/request`;
  log(`chat ${fmt(chat.rps)} req/s (errors ${chat.errors} ${chat.sampleError ?? ''}; ${perRequest(chatCpu, chat.okAll)}), baseline ${fmt(base.rps)} req/s (${perRequest(baseCpu, base.okAll)})`);
  log(`per request, server: chat ${perRequestCalls(chatCalls, chatCallsEnd, chat.okAll)}; baseline ${perRequestCalls(baseCalls, baseCallsEnd, base.okAll)}`);

  // 2. Streamed chat: added time to the first chunk, with the model's own first-token delay set.
  await service.stop();
  const streamPort = await freePort();
  // BENCH_AGENT_TAIL: [start epoch ms, duration ms, kind] of every collection, this process's and the stream service's.
  const clientGcs: number[] = [];
  const serviceGcs: number[] = [];
  if (TAIL) new PerformanceObserver((list) => { for (const e of list.getEntries()) clientGcs.push(performance.timeOrigin + e.startTime, e.duration, (e as { detail?: { kind?: number } }).detail?.kind ?? 0); }).observe({ entryTypes: ['gc'] });
  const streamService = startChild('service (stream)', TAIL ? ['--import', './bench/gc-observe.ts', ...SERVICE_ARGS] : SERVICE_ARGS, {
    ...baseEnv, PORT: String(streamPort), HOST: '127.0.0.1', SANDBOX_LLM_FIRST_TOKEN_MS: String(FIRST_TOKEN_MS), SANDBOX_LLM_CHUNK_MS: '1',
    SERVER_TIMING: process.env.BENCH_STAGES === '1' ? 'true' : 'false',
  });
  if (TAIL) {
    streamService.onLine((line) => {
      if (!line.startsWith('gc-observe ')) return;
      const [, start, duration, kind] = line.split(' ');
      serviceGcs.push(Number(start), Number(duration), Number(kind));
    });
  }
  await waitReady(streamService, streamPort, '/readyz');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < STREAM_WARMUP; i++) await firstChunkMs(streamPort, keys[i % keys.length]!, agentId, agent);
  // Every key the measured streams use has been seen once (this process's credential cache is new:
  // a key's first request reads its row, a cold start the warm-up is there to keep out).
  for (let i = STREAM_WARMUP; i < Math.min(keys.length, STREAMS); i++) await firstChunkMs(streamPort, keys[i]!, agentId, agent);
  const ttfc: number[] = [];
  const windows = new Float64Array(STREAMS * 2); // each sample's [start, first chunk] in epoch ms
  const measuredFrom = clientGcs.length;
  const serviceFrom = serviceGcs.length;
  const timingsFrom = serverTimings.length;
  const sessions = async () => Number((await monitor.query('select sessions from pg_stat_database where datname = current_database()')).rows[0].sessions);
  const sessionsBefore = TAIL ? await sessions() : 0;
  // Autovacuum and autoanalyze runs per table (the tables the previous legs filled are due for them).
  type Maintenance = { relname: string; vacuums: string; analyzes: string; vacuumed_at: number | null; analyzed_at: number | null };
  const maintenance = async () => (await monitor.query(`select schemaname || '.' || relname as relname, autovacuum_count as vacuums, autoanalyze_count as analyzes,
      extract(epoch from last_autovacuum) * 1000 as vacuumed_at, extract(epoch from last_autoanalyze) * 1000 as analyzed_at from pg_stat_all_tables`)).rows as Maintenance[];
  const maintenanceBefore = TAIL ? await maintenance() : [];
  for (let i = 0; i < STREAMS; i++) {
    if (STREAM_GAP_MS) await new Promise((r) => setTimeout(r, STREAM_GAP_MS));
    collectGarbage({ type: 'minor' });
    const ms = await firstChunkMs(streamPort, keys[i % keys.length]!, agentId, agent);
    windows[2 * i] = lastStart;
    windows[2 * i + 1] = lastStart + ms;
    ttfc.push(ms - FIRST_TOKEN_MS);
  }
  // Where the tail sits in the run (a cold start shows as slow early samples; interference as spread ones).
  const slowest = ttfc.map((ms, i) => ({ ms, i })).sort((a, b) => b.ms - a.ms);
  let gcNote = (_i: number) => '';
  if (TAIL) {
    await new Promise((r) => setTimeout(r, 1100)); // the service's last lines, the backends' statistics (flushed within a second)
    // The collection of `gcs` (triples) overlapping sample i, as "client 2.1 ms" (kind 1: scavenge).
    const overlap = (gcs: number[], from: number, i: number) => {
      let found = '';
      for (let g = from; g < gcs.length; g += 3) {
        if (gcs[g]! < windows[2 * i + 1]! && gcs[g]! + gcs[g + 1]! > windows[2 * i]!) found += ` ${gcs[g + 2] === 1 ? 'scavenge' : `gc${gcs[g + 2]}`} ${fmt(gcs[g + 1]!, 2)}`;
      }
      return found;
    };
    gcNote = (i) => {
      const c = overlap(clientGcs, measuredFrom, i);
      const sv = overlap(serviceGcs, serviceFrom, i);
      return c || sv ? ` [${c ? `client${c}` : ''}${c && sv ? '; ' : ''}${sv ? `service${sv}` : ''}]` : '';
    };
    const count = (gcs: number[], from: number) => {
      const end = windows[2 * STREAMS - 1]!;
      let n = 0;
      let ms = 0;
      for (let g = from; g < gcs.length; g += 3) if (gcs[g]! <= end) { n++; ms += gcs[g + 1]!; }
      return `${n} (${fmt(ms, 1)} ms)`;
    };
    // Database connections opened during the streams (those still open: their start time).
    const opened = await sessions() - sessionsBefore;
    const starts = (await monitor.query(`select extract(epoch from backend_start) * 1000 as at, application_name from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid()`)).rows as { at: number; application_name: string }[];
    const gcOnly = gcNote;
    gcNote = (i) => {
      const connected = starts.filter((b) => Number(b.at) >= windows[2 * i]! - 1 && Number(b.at) <= windows[2 * i + 1]!).length;
      const stages = serverTimings[timingsFrom + i] ? ` {${serverTimings[timingsFrom + i]!.replace(/;dur=/g, ' ')}}` : '';
      return `${gcOnly(i)}${connected ? ` [${connected} connection(s) opened]` : ''}${stages}`;
    };
    // Autovacuum and autoanalyze that finished during the streams (only the last run per table and kind has a time): which sample was then.
    const sampleAt = (t: number) => {
      for (let i = 0; i < STREAMS; i++) if (windows[2 * i + 1]! >= t) return `#${i}`;
      return 'after the last sample';
    };
    const before = new Map(maintenanceBefore.map((m) => [m.relname, m]));
    const ran: string[] = [];
    for (const m of await maintenance()) {
      const b = before.get(m.relname);
      if (Number(m.vacuums) > Number(b?.vacuums ?? 0)) ran.push(`vacuum ${m.relname} (${Number(m.vacuums) - Number(b?.vacuums ?? 0)}, last ended at ${sampleAt(Number(m.vacuumed_at))})`);
      if (Number(m.analyzes) > Number(b?.analyzes ?? 0)) ran.push(`analyze ${m.relname} (${Number(m.analyzes) - Number(b?.analyzes ?? 0)}, last ended at ${sampleAt(Number(m.analyzed_at))})`);
    }
    log(`stream tail: autovacuum during the measured streams: ${ran.length ? ran.join(', ') : 'none'}`);
    log(`stream tail: ${opened} database connection(s) opened during the measured streams (${starts.filter((b) => Number(b.at) >= windows[0]!).length} of them still open)`);
    const hit = (which: 'client' | 'service', among: { i: number }[]) => among.filter((x) => gcOnly(x.i).includes(which)).length;
    const top = slowest.slice(0, Math.max(1, Math.ceil(STREAMS / 100)));
    const over = slowest.filter((x) => x.ms > 5);
    log(`stream gc: collections during the measured streams: client ${count(clientGcs, measuredFrom)}, service ${count(serviceGcs, serviceFrom)}; samples overlapping one: client ${hit('client', slowest)}, service ${hit('service', slowest)} of ${STREAMS}; among the slowest 1% (${top.length}): client ${hit('client', top)}, service ${hit('service', top)}; among the ${over.length} over 5 ms: client ${hit('client', over)}, service ${hit('service', over)}`);
  }
  log(`stream: slowest added times ${slowest.slice(0, TAIL ? 10 : 5).map((x) => `#${x.i} ${fmt(x.ms, 2)} ms${gcNote(x.i)}`).join(', ')}`);
  ttfc.sort((a, b) => a - b);
  const headers = headerTimes.slice(-STREAMS).sort((a, b) => a - b);
  log(`stream: added time to first chunk p50 ${fmt(pct(ttfc, 0.5), 2)} ms, p99 ${fmt(pct(ttfc, 0.99), 2)} ms (response headers p50 ${fmt(pct(headers, 0.5), 2)} ms, p99 ${fmt(pct(headers, 0.99), 2)} ms)`);
  for (const [stage, list] of stageTimes) {
    const sorted = list.slice(-STREAMS).sort((a, b) => a - b);
    log(`stream stage ${stage}: p50 ${fmt(pct(sorted, 0.5), 2)} ms, p99 ${fmt(pct(sorted, 0.99), 2)} ms`);
  }

  // 3. Knowledge: index a corpus through the route, grow to CHUNKS, then retrieval turns.
  const text = corpus(CORPUS_MB * 1024 * 1024);
  const form = new FormData();
  form.append('file', new Blob([text], { type: 'text/plain' }), 'corpus.txt');
  form.append('type', 'txt');
  const t0 = performance.now();
  const up = await fetch(`http://127.0.0.1:${streamPort}/v1/agents/${agentId}/knowledge`, { method: 'POST', headers: { 'X-API-Key': key }, body: form });
  const indexMs = performance.now() - t0;
  const doc = (await up.json()) as { data: { id: string; chunks: number } };
  if (up.status !== 201) throw new Error(`upload failed: ${up.status} ${JSON.stringify(doc)}`);
  log(`indexed ${fmt(CORPUS_MB)} MB: ${doc.data.chunks} chunks in ${fmt(indexMs, 0)} ms (${fmt(doc.data.chunks / (indexMs / 1000), 0)} chunks/s)`);
  const missing = CHUNKS - doc.data.chunks;
  if (missing > 0) {
    await monitor.query(`insert into agent_knowledge_chunks (organization_id, mode, document_id, ordinal, content)
      select organization_id, mode, document_id, 100000000 + g, content from agent_knowledge_chunks c, generate_series(1, ceil($2::float / $3)::int) g
       where c.document_id = $1 limit $2`, [doc.data.id, missing, doc.data.chunks]);
    await monitor.query('analyze agent_knowledge_chunks');
  }
  const total = (await monitor.query('select count(*)::int as n from agent_knowledge_chunks where document_id = $1', [doc.data.id])).rows[0].n as number;
  const retrieval: number[] = [];
  for (let i = 0; i < QUERIES; i++) {
    const q = `${WORDS[i % WORDS.length]} ${WORDS[(i * 5 + 3) % WORDS.length]} section ${i % 97}`;
    const s = performance.now();
    const r = await call(streamPort, 'POST', `/v1/agents/${agentId}/chat`, keyed(i), JSON.stringify({ message: `#tool:knowledge_base{"query":"${q}"}` }), agent);
    retrieval.push(performance.now() - s);
    if (r.status !== 200) throw new Error(`retrieval chat failed: ${r.status} ${r.body.slice(0, 200)}`);
  }
  retrieval.sort((a, b) => a - b);
  // The same SQL alone (what retrieval costs in the database).
  const sqlTimes: number[] = [];
  for (let i = 0; i < Math.min(QUERIES, 100); i++) {
    const s = performance.now();
    await monitor.query(`select c.id, ts_rank_cd(c.tsv, q) r from agent_knowledge_chunks c cross join websearch_to_tsquery('english', $2) q
      where c.document_id = any($1::text[]) and c.tsv @@ q order by r desc limit 4`, [[doc.data.id], `${WORDS[i % WORDS.length]} ${WORDS[(i * 5 + 3) % WORDS.length]}`]);
    sqlTimes.push(performance.now() - s);
  }
  sqlTimes.sort((a, b) => a - b);

  const results = {
    machine: { cpus: os.cpus().length, load: os.loadavg() },
    judged: pairs.ratios, load: pairs.load,
    chat: { rps: chat.rps, p50: chat.p50, p99: chat.p99, errors: chat.errors, baseline_rps: base.rps, ratio: judged.median, target: 0.3,
      server_cpu_ms_per_request: (chatCpu.proc * 1000) / chat.okAll, database_cpu_ms_per_request: (chatCpu.db * 1000) / chat.okAll,
      baseline_server_cpu_ms_per_request: (baseCpu.proc * 1000) / base.okAll, baseline_database_cpu_ms_per_request: (baseCpu.db * 1000) / base.okAll },
    stream: { first_token_ms: FIRST_TOKEN_MS, added_p50_ms: pct(ttfc, 0.5), added_p99_ms: pct(ttfc, 0.99), samples: ttfc.length, target_p99_ms: 5 },
    knowledge: { corpus_mb: CORPUS_MB, chunks_indexed: doc.data.chunks, index_ms: indexMs, chunks_per_s: doc.data.chunks / (indexMs / 1000), total_chunks: total,
      retrieval_turn_p50_ms: pct(retrieval, 0.5), retrieval_turn_p99_ms: pct(retrieval, 0.99), search_sql_p50_ms: pct(sqlTimes, 0.5), search_sql_p99_ms: pct(sqlTimes, 0.99) },
  };
  process.stdout.write(`${table([
    ['measure', 'value', 'target'],
    ['chat req/s (sandbox model, 0 ms)', fmt(chat.rps), ''],
    ['baseline node:http + INSERT req/s', fmt(base.rps), ''],
    ['chat ÷ baseline (median of interleaved rounds)', formatFigure(judged), formatVerdict(judged)],
    ['chat p50 / p99 ms', `${fmt(chat.p50)} / ${fmt(chat.p99)}`, ''],
    ['stream: added time to first chunk p50 / p99 ms', `${fmt(results.stream.added_p50_ms, 2)} / ${fmt(results.stream.added_p99_ms, 2)}`, 'p99 ≤ 5'],
    [`index ${fmt(CORPUS_MB)} MB text`, `${fmt(indexMs, 0)} ms, ${fmt(results.knowledge.chunks_per_s, 0)} chunks/s`, ''],
    [`retrieval turn over ${total} chunks p50 / p99 ms`, `${fmt(results.knowledge.retrieval_turn_p50_ms)} / ${fmt(results.knowledge.retrieval_turn_p99_ms)}`, ''],
    ['search SQL alone p50 / p99 ms', `${fmt(results.knowledge.search_sql_p50_ms)} / ${fmt(results.knowledge.search_sql_p99_ms)}`, ''],
  ])}\n${formatLoad(pairs.load)} (chat rounds)\n`);
  log(`results: ${writeResults('agents.json', results)}`);
}, log, cleanup);
