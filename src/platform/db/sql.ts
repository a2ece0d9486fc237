/**
 * Plain parameterized SQL on the ORM's own connection pool (its Kysely instance), for hot paths
 * that skip the unit of work: `$1`, `$2`, … placeholders, arrays bind as PostgreSQL arrays.
 * Note: this pool returns timestamps as strings (MikroORM's type parsers); read epoch milliseconds
 * or parse them. (The app's separate pg pool, `createPool`, returns Dates.)
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { CompiledQuery, type Kysely, type Transaction } from 'kysely';

/** The Kysely instance under the MikroORM connection pool (the same pool the ORM uses). */
export function sqlClient(orm: MikroORM): Kysely<unknown> {
  return orm.em.getConnection().getClient<unknown>();
}

/** A pg client (or pool) checked out by a caller that runs its own transaction on it. */
export type PgQueryable = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> };

/** Runs one parameterized statement on `db` (a Kysely instance or transaction, or a pg client inside the caller's transaction). */
export async function sqlQuery<R>(db: Kysely<unknown> | Transaction<unknown> | PgQueryable, sql: string, params: readonly unknown[] = []): Promise<R[]> {
  if (!('executeQuery' in db)) return (await db.query(sql, [...params])).rows as R[];
  const result = await db.executeQuery<R>(CompiledQuery.raw(sql, [...params]));
  return result.rows as R[];
}
