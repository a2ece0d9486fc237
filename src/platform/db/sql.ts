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

/**
 * Sends one statement of the caller's transaction without waiting for its answer, so the COMMIT
 * that follows goes out right behind it: one round trip for both instead of two (the ORM pool's
 * connections pipeline their queries: orm.ts). Call it last in the transaction's callback, with
 * no other statement of the transaction in flight: the statement is then on the connection before
 * this returns (Kysely hands it to the pg client synchronously), ahead of the COMMIT (and of
 * anything the ORM flushes before it, which waits for it).
 *
 * Await the returned promise once the transaction has ended: when the statement failed, the
 * transaction was aborted and its COMMIT answered as a rollback (the ORM sees no error), so
 * nothing of the transaction was stored. Guard the statement with {@link sameTransaction} so it
 * could never run in another one.
 */
export function sendBeforeCommit<R>(trx: Transaction<unknown>, sql: string, params: readonly unknown[] = []): Promise<R[]> {
  const sent = sqlQuery<R>(trx, sql, params);
  sent.catch(() => {}); // the caller reads the outcome after the commit
  return sent;
}

/** The current transaction's id as text (`txid_current()`, which assigns one): select it with a transaction's first write or lock. */
export const TRANSACTION_ID_SQL = 'txid_current()::text';

/**
 * A SELECT that fails (division by zero) unless it runs in the transaction `$param` named (its
 * {@link TRANSACTION_ID_SQL}): the final statement of a write that must never be stored by
 * another transaction, e.g. sent after its own transaction ended.
 */
export function sameTransaction(param: number): string {
  return `select 1 / coalesce((txid_current_if_assigned()::text = $${param}::text)::int, 0) as same_transaction`;
}
