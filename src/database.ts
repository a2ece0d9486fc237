/** Which database the process uses: DATABASE_URL, or the embedded PostgreSQL in DATA_DIR. Shared by server and CLI. */
import type { Config } from './config.ts';
import { startEmbeddedPostgres } from './platform/db/embedded.ts';

export async function resolveDatabase(config: Config): Promise<{ url: string; stop(): Promise<void>; embedded: boolean }> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => {}, embedded: false };
  const db = await startEmbeddedPostgres(config.dataDir, config.embeddedPgPort);
  return { ...db, embedded: true };
}
