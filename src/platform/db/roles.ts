/**
 * Two database roles (ARCHITECTURE.md "Database roles"): the owner role (DATABASE_MIGRATION_URL)
 * owns every table, function and pg-boss's schema and runs migrations; the service's role
 * (DATABASE_URL) owns nothing and gets only what the service does at run time: rows (SELECT,
 * INSERT, UPDATE, DELETE), sequences, pg-boss's tables, and the PHI access log's narrow retention
 * function. It cannot ALTER a table (so not disable a trigger), TRUNCATE, or set
 * `session_replication_role` (superuser only), and on the PHI access log it may only read and
 * append: entries leave through `phi_access_log_retain` alone.
 */
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { createOrm, runMigrations, PGBOSS_SCHEMA, type EntityList } from './orm.ts';

/**
 * Tables the service's role may not change or delete from: what it may do there (the PHI access
 * log: read and append; the record of its rotations, written by phi_access_log_retain: read).
 */
export const GUARDED_TABLES = { phi_access_log: 'select, insert', phi_access_log_removals: 'select' } as const;

/** The role a connection string logs in as. */
export function roleOf(url: string): string {
  const user = decodeURIComponent(new URL(url).username);
  if (!user) throw new Error('the database URL names no user: the service\'s role must be explicit to grant it');
  return user;
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * Grants `role` what the service needs on the objects the connected (owner) role owns. Idempotent;
 * run after every migration, so a new table is covered from its first start.
 */
export async function grantServiceRole(client: pg.ClientBase, role: string): Promise<void> {
  const r = ident(role);
  const { rows: [schema] } = await client.query<{ name: string }>('select current_schema() as name');
  const s = ident(schema!.name);
  const boss = ident(PGBOSS_SCHEMA);
  await client.query(`
    grant usage on schema ${s} to ${r};
    grant select, insert, update, delete on all tables in schema ${s} to ${r};
    grant usage, select, update on all sequences in schema ${s} to ${r};
    ${Object.entries(GUARDED_TABLES).map(([t, allowed]) => `revoke all on ${s}.${ident(t)} from ${r}; grant ${allowed} on ${s}.${ident(t)} to ${r};`).join('\n')}
    grant execute on function ${s}.phi_access_log_retain(text) to ${r};
    grant usage on schema ${boss} to ${r};
    grant select, insert, update, delete on all tables in schema ${boss} to ${r};
    grant usage, select, update on all sequences in schema ${boss} to ${r};
  `);
  // PostgreSQL 17+: VACUUM and ANALYZE of tables it does not own (DB_VACUUM); only a superuser
  // owner role may hand it out here, else the one-time setup does (docs/operations.md, "Database roles").
  const { rows: [v] } = await client.query<{ version: number; superuser: boolean }>(
    `select current_setting('server_version_num')::int as version, (select rolsuper from pg_roles where rolname = current_user) as superuser`);
  if (v!.version >= 170000 && v!.superuser) await client.query(`grant pg_maintain to ${r}`);
}

/**
 * Migrations and pg-boss's schema as the owner role, then the service role's grants. The service's
 * own connections (DATABASE_URL) never run DDL when this is configured.
 */
export async function migrateAsOwner(ownerUrl: string, serviceRole: string, entities: EntityList): Promise<void> {
  const orm = await createOrm(ownerUrl, { entities, poolMax: 2 });
  try {
    await runMigrations(orm);
  } finally {
    await orm.close();
  }
  // pg-boss creates (or migrates) its schema at start; at run time it only reads and writes rows.
  const boss = new PgBoss({ connectionString: ownerUrl, schema: PGBOSS_SCHEMA, supervise: false, schedule: false, max: 1 });
  boss.on('error', () => { /* reported by start() */ });
  await boss.start();
  await boss.stop({ graceful: false, close: true });
  const client = new pg.Client({ connectionString: ownerUrl });
  await client.connect();
  try {
    if (roleOf(ownerUrl) !== serviceRole) await grantServiceRole(client, serviceRole);
  } finally {
    await client.end();
  }
}

/** What the connected role could do to the PHI access log beyond reading and appending (empty: nothing). */
export async function excessPrivileges(client: pg.ClientBase): Promise<string[]> {
  const { rows: [r] } = await client.query<{ superuser: boolean; owner: boolean; del: boolean }>(`
    select (select rolsuper from pg_roles where rolname = current_user) as superuser,
           coalesce((select pg_has_role(current_user, c.relowner, 'usage') from pg_class c where c.oid = to_regclass('phi_access_log')), false) as owner,
           coalesce(has_table_privilege(to_regclass('phi_access_log'), 'delete'), false) as del`);
  return [...(r!.superuser ? ['superuser'] : []), ...(r!.owner ? ['owner of phi_access_log'] : []), ...(r!.del ? ['DELETE on phi_access_log'] : [])];
}
