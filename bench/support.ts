/**
 * What every bench script needs: a log, a cleanup stack run once (also on signals), free ports,
 * child processes with their log lines, CPU accounting from /proc, and table formatting.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export function createLog(prefix: string): (msg: string) => void {
  return (msg) => process.stderr.write(`[${prefix}] ${msg}\n`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** APP_SECRET of every service a bench starts (fresh databases only). */
export const BENCH_APP_SECRET = 'bench-app-secret-0123456789abcdef';

/** A numeric BENCH_* knob: `fallback` when unset or empty, else a finite number >= `min` (floored when `integer`). */
export function envNumber(name: string, fallback: number, min = 1, integer = false): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number >= ${min}, got "${raw}"`);
  return integer ? Math.floor(n) : n;
}

/** A LIFO stack of cleanups run once, on success, error or SIGINT/SIGTERM. */
export function createCleanup(log: (msg: string) => void): { onCleanup: (name: string, fn: () => Promise<void>) => void; cleanup: () => Promise<void> } {
  const cleanups: { name: string; fn: () => Promise<void> }[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = (): Promise<void> => {
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
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      log(`${signal}: cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  return { onCleanup: (name, fn) => { cleanups.push({ name, fn }); }, cleanup };
}

export function freePort(): Promise<number> {
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

export function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
    s.setTimeout(1000, () => { s.destroy(); resolve(false); });
  });
}

/** The repository root (bench scripts run children from it). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Runs `node <args>` from the repository root and answers its stdout. */
export function runNode(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: ROOT, env, timeout: 60_000, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`node ${args.join(' ')} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/**
 * What every bench starts with on database `dbUrl`: the services' environment, an enterprise
 * organization made by the admin CLI (which applies migrations first) and a monitor connection
 * (closed at cleanup).
 */
export async function benchOrganization(dbUrl: string, hooks: { log: (msg: string) => void; onCleanup: (name: string, fn: () => Promise<void>) => void }): Promise<{
  baseEnv: NodeJS.ProcessEnv; org: { organization_id: string; test_api_key: string; live_api_key: string }; monitor: pg.Client;
}> {
  const baseEnv: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: dbUrl, APP_SECRET: BENCH_APP_SECRET, BOOTSTRAP_ORG: 'false', LOG_LEVEL: 'warn', NODE_ENV: 'production' };
  const orgOut = await runNode(['src/admin.ts', 'org', 'create', '--name', 'Bench', '--plan', 'enterprise', '--json'], baseEnv);
  const org = JSON.parse(orgOut.trim().split('\n').pop()!) as { organization_id: string; test_api_key: string; live_api_key: string };
  hooks.log(`organization ${org.organization_id} (enterprise)`);
  const monitor = new pg.Client({ connectionString: dbUrl });
  await monitor.connect();
  hooks.onCleanup('monitor connection', () => monitor.end());
  return { baseEnv, org, monitor };
}

/**
 * What a figure was measured on: the commit (and uncommitted files under src/, migrations/ and
 * bench/), the machine (cores, CPU model, memory, load averages at the time) and node.
 */
export function runContext(): object {
  const git = (args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: ROOT, timeout: 10_000, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return '';
    }
  };
  const cpus = os.cpus();
  return {
    commit: git(['rev-parse', '--short', 'HEAD']).trim() || 'unknown',
    dirty: git(['status', '--porcelain', '--', 'src', 'migrations', 'bench']).split('\n').filter(Boolean).map((l) => l.slice(3)),
    machine: {
      cores: os.availableParallelism(), cpu_model: cpus[0]?.model ?? 'unknown', memory_gb: Math.round(os.totalmem() / 2 ** 30 * 10) / 10,
      loadavg_1m_5m_15m: os.loadavg().map((l) => Math.round(l * 100) / 100), hostname: os.hostname(),
    },
    node: process.version,
  };
}

/**
 * Writes `data` as JSON to bench/results/<name> (with `run`: the commit and the machine's figures,
 * runContext) and returns its path relative to the repository.
 */
export function writeResults(name: string, data: object): string {
  const dir = path.join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  writeFileSync(file, `${JSON.stringify({ written_at: new Date().toISOString(), run: runContext(), ...data }, null, 2)}\n`);
  return path.relative(ROOT, file);
}

export type Reply = { status: number; headers: http.IncomingHttpHeaders; body: string };

/** One HTTP request to 127.0.0.1 (10 s timeout). */
export function call(port: number, method: string, p: string, headers: Record<string, string> = {}, body?: string, agent?: http.Agent): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const h: Record<string, string | number> = { ...headers };
    if (body !== undefined) h['Content-Length'] = Buffer.byteLength(body);
    const req = http.request({ ...(agent ? { agent } : {}), host: '127.0.0.1', port, method, path: p, headers: h }, (res) => {
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

/** `count` owner test-mode API keys made through the API (rotated per request by the benches to stay clear of per-key limits). */
export async function createKeys(port: number, ownerKey: string, count: number): Promise<string[]> {
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

/** Waits until a child process answers 200 on `p`, or fails with its last output lines. */
export async function waitReady(child: { name: string; tail(): string; exited: Promise<unknown> }, port: number, p: string, timeoutMs = 60_000): Promise<void> {
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

/** A fresh database on the machine's PostgreSQL (127.0.0.1:5432), dropped by the cleanup stack. */
export async function freshLocalDatabase(name: string, onCleanup: (name: string, fn: () => Promise<void>) => void): Promise<string> {
  // BENCH_ADMIN_DATABASE_URL: another local server (e.g. a throw-away cluster with pg_stat_statements).
  const adminUrl = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`drop database if exists "${name}" with (force)`);
  await admin(`create database "${name}"`);
  onCleanup(`database ${name}`, () => admin(`drop database if exists "${name}" with (force)`));
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

// ---------------------------------------------------------------------------------------------
// Child processes.
// ---------------------------------------------------------------------------------------------
export type Child = {
  name: string;
  proc: ChildProcess;
  tail(): string;
  logLines: { warn: number; error: number };
  /** The first warn/error line, for diagnosis. */
  sampleWarning(): string | undefined;
  exited: Promise<number | null>;
  /** Resolves with the first output line matching `test`; rejects if the child exits first or after `timeoutMs`. */
  waitForLine(test: (line: string) => boolean, timeoutMs: number): Promise<string>;
  /** Calls `fn` with every further output line (stdout and stderr). */
  onLine(fn: (line: string) => void): void;
  /** SIGTERM, then SIGKILL after 12 s; resolves once the process is gone. */
  stop(): Promise<void>;
};

export function startChild(name: string, args: string[], env: NodeJS.ProcessEnv, hooks: { log: (msg: string) => void; onCleanup: (name: string, fn: () => Promise<void>) => void }): Child {
  const { log, onCleanup } = hooks;
  const proc = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const logLines = { warn: 0, error: 0 };
  let firstWarning: string | undefined;
  const listeners = new Set<(line: string) => void>();
  const collect = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      // pino: 40 warn, 50 error, 60 fatal.
      const level = /"level":(\d+)/.exec(line)?.[1];
      if (level === '40') logLines.warn++;
      else if (level && Number(level) >= 50) logLines.error++;
      if (level && Number(level) >= 40) firstWarning ??= line.slice(0, 400);
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
  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const done = await Promise.race([exited.then(() => true), sleep(12_000).then(() => false)]);
    if (!done) {
      log(`${name} did not stop after SIGTERM, killing`);
      proc.kill('SIGKILL');
      await exited;
    }
  };
  const child: Child = { name, proc, tail, logLines, sampleWarning: () => firstWarning, exited, waitForLine, onLine: (fn) => { listeners.add(fn); }, stop };
  onCleanup(name, stop);
  return child;
}

// ---------------------------------------------------------------------------------------------
// CPU accounting from /proc (Linux; elsewhere the figures are n/a). On a busy machine CPU time per
// request is steadier than throughput, and it says whether the server or the database does the work.
// ---------------------------------------------------------------------------------------------
const CLOCK_TICKS = 100; // USER_HZ on Linux

/** The machine's process ids (none off Linux). */
export function procPids(): number[] {
  try {
    return readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number);
  } catch {
    return [];
  }
}

/** A process's parent and its CPU seconds (utime + stime), or undefined when it is gone. */
export function procStat(pid: number): { ppid: number; cpu: number } | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return { ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS };
  } catch {
    return undefined;
  }
}

export function procCpuSeconds(pid: number): number | undefined {
  return procStat(pid)?.cpu;
}

/** CPU seconds the whole machine has been busy (all cores: /proc/stat, everything but idle and iowait). */
export function machineBusySeconds(): number {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - f[3]! - f[4]!) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}

/** CPU seconds per PostgreSQL backend connected to `database` (a local server's processes only). */
export function backendCpu(database: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of procPids()) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(` ${database} `)) continue;
      const cpu = procCpuSeconds(pid);
      if (cpu !== undefined) out.set(pid, cpu);
    } catch { /* gone, or not ours to read */ }
  }
  return out;
}

export type CpuMark = { proc: number | undefined; db: Map<number, number> };
export const cpuMark = (pid: number | undefined, database: string | undefined): CpuMark =>
  ({ proc: pid === undefined ? undefined : procCpuSeconds(pid), db: database ? backendCpu(database) : new Map() });
/** Seconds of CPU since `from`: the process, and the database backends (new ones counted from zero, exited ones lost). */
export function cpuSince(from: CpuMark, pid: number | undefined, database: string | undefined): { proc: number; db: number } {
  const now = cpuMark(pid, database);
  let db = 0;
  for (const [backend, cpu] of now.db) db += cpu - (from.db.get(backend) ?? 0);
  const proc = now.proc !== undefined && from.proc !== undefined ? now.proc - from.proc : NaN;
  return { proc, db: database && now.db.size ? db : NaN };
}

// ---------------------------------------------------------------------------------------------
// Formatting.
// ---------------------------------------------------------------------------------------------
export const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
/** JSON has no NaN: unknown figures are null. */
export const finite = (n: number) => (Number.isFinite(n) ? n : null);

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  const sep = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(rows[0]!), sep, ...rows.slice(1).map(line)].join('\n');
}

/** Runs a bench script's `main`, logs a failure, runs the cleanup stack, and exits (1 on failure). */
export async function runMain(main: () => Promise<void>, log: (msg: string) => void, cleanup: () => Promise<void>): Promise<never> {
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
}
