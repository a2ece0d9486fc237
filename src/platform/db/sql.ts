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

/** Runs one parameterized statement on `db` (a Kysely instance or transaction). */
export async function sqlQuery<R>(db: Kysely<unknown> | Transaction<unknown>, sql: string, params: readonly unknown[] = []): Promise<R[]> {
  const result = await db.executeQuery<R>(CompiledQuery.raw(sql, [...params]));
  return result.rows as R[];
}
