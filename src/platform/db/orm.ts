/** MikroORM over PostgreSQL: configuration, migrations, and a small pg pool for hot-path raw SQL. */
import { MikroORM, PostgreSqlDriver } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import pg from 'pg';
import { migrationsList } from '../../../migrations/index.ts';
import { preparePooledStatements } from './sql.ts';

export const PGBOSS_SCHEMA = 'pgboss';

/** MikroORM entity definitions, passed in by the composition root (platform knows no module). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type EntityList = readonly any[];

/** Bounds on waiting for the database (see DB_CONNECT_TIMEOUT_MS and DB_STATEMENT_TIMEOUT_MS). */
export type DbTimeouts = { connectTimeoutMs?: number; statementTimeoutMs?: number };

/** pg pool options for the timeouts: a pool wait or connect past `connectTimeoutMs` fails fast. */
function timeoutOptions(t: DbTimeouts = {}) {
  return {
    ...(t.connectTimeoutMs ? { connectionTimeoutMillis: t.connectTimeoutMs } : {}),
    ...(t.statementTimeoutMs ? { statement_timeout: t.statementTimeoutMs } : {}),
  };
}

export async function createOrm(url: string, opts: { entities: EntityList; poolMax?: number; timeouts?: DbTimeouts }): Promise<MikroORM> {
  return MikroORM.init({
    driver: PostgreSqlDriver,
    clientUrl: url,
    entities: [...opts.entities],
    extensions: [Migrator],
    pool: { max: opts.poolMax ?? 10 },
    // Pipelined connections: a query is sent at once even while the previous one's answer is on its
    // way (answers come back in order). Callers await each statement anyway; sendBeforeCommit
    // (sql.ts) relies on it to send a transaction's last statement and its COMMIT together. Hot
    // statements marked `prepared` (sql.ts) run as named prepared statements on its connections.
    driverOptions: { ...timeoutOptions(opts.timeouts), pipeline: true, onPoolCreated: (pool: pg.Pool) => preparePooledStatements(pool) },
    discovery: { warnWhenNoEntities: true },
    allowGlobalContext: false,
    debug: false,
    migrations: {
      migrationsList,
      snapshot: false,
      snapshotOnMigrate: false,
      transactional: true,
      allOrNothing: true,
      silent: true,
    },
    schemaGenerator: { ignoreSchema: [PGBOSS_SCHEMA] },
  });
}

export async function runMigrations(orm: MikroORM): Promise<void> {
  await orm.migrator.up();
}

export function createPool(url: string, max = 10, timeouts?: DbTimeouts): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max, ...timeoutOptions(timeouts) });
  preparePooledStatements(pool);
  pool.on('error', () => { /* idle client errors are reported by the next query */ });
  return pool;
}
