/** What every bench script needs: a log, a cleanup stack run once (also on signals), free ports. */
import { execFile } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export function createLog(prefix: string): (msg: string) => void {
  return (msg) => process.stderr.write(`[${prefix}] ${msg}\n`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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
  const adminUrl = 'postgres://postgres@127.0.0.1:5432/postgres';
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
