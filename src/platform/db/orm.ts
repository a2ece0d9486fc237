/** MikroORM over PostgreSQL: configuration, migrations, and a small pg pool for hot-path raw SQL. */
import { MikroORM, PostgreSqlDriver } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import pg from 'pg';
import { entities } from '../../entities.ts';
import { migrationsList } from '../../../migrations/index.ts';

export const PGBOSS_SCHEMA = 'pgboss';

export async function createOrm(url: string, opts: { poolMax?: number } = {}): Promise<MikroORM> {
  return MikroORM.init({
    driver: PostgreSqlDriver,
    clientUrl: url,
    entities,
    extensions: [Migrator],
    pool: { max: opts.poolMax ?? 10 },
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

export function createPool(url: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => { /* idle client errors are reported by the next query */ });
  return pool;
}
