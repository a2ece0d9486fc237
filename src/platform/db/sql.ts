/**
 * Plain parameterized SQL on the ORM's own connection pool (its Kysely instance), for hot paths
 * that skip the unit of work: `$1`, `$2`, … placeholders, arrays bind as PostgreSQL arrays.
 * Note: this pool returns timestamps as strings (MikroORM's type parsers); read epoch milliseconds
 * or parse them. (The app's separate pg pool, `createPool`, returns Dates.)
 */
import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import type pg from 'pg';

/** The Kysely instance under the MikroORM connection pool (the same pool the ORM uses). */
export function sqlClient(orm: MikroORM): Kysely<unknown> {
  return orm.em.getConnection().getClient<unknown>();
}

/** A pg client (or pool) checked out by a caller that runs its own transaction on it. */
export type PgQueryable = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> };

/** At most this many texts run as named prepared statements (each is kept by every connection that ran it). */
export const MAX_PREPARED = 64;
const preparedNames = new Map<string, string>();

/**
 * Marks `text` as a hot statement: on the pools {@link preparePooledStatements} was installed on
 * (the ORM's and the app's, orm.ts), a connection runs it as a named prepared statement, parsed and
 * planned on its first run and then executed from its cached plan (PostgreSQL moves to a generic
 * plan after five runs when it is not costlier than the custom ones: keep such statements' plans
 * right without parameter values, as test/messaging-plans.test.ts checks). For texts that are the
 * same on every call and have no literal values in them: the name is derived from the text, and
 * at most {@link MAX_PREPARED} texts are taken (further ones run unnamed, as before). Returns
 * `text`, so constants can be declared with it: `const SQL = prepared(\`…\`)`.
 */
export function prepared(text: string): string {
  if (!preparedNames.has(text) && preparedNames.size < MAX_PREPARED) {
    preparedNames.set(text, `hot_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`);
  }
  return text;
}

/** The statement name `text` runs under (undefined: it runs unnamed). */
export function preparedName(text: string): string | undefined {
  return preparedNames.get(text);
}

type QueryFn = (config: unknown, values?: unknown, callback?: unknown) => unknown;

/**
 * Makes the connections of `pool` run the texts marked with {@link prepared} as named prepared
 * statements (pg's `{ name, text, values }`): a query given as a string that was marked goes out
 * under its name. Call before the pool opens its first connection. Pipelined connections (orm.ts)
 * keep this right: pg sends a statement's Parse only once per connection, even when several of its
 * queries are on the wire before the first one's answer.
 */
export function preparePooledStatements(pool: Pick<pg.Pool, 'on'>): void {
  pool.on('connect', (client) => {
    // The client's own query at each call (its class's, looked up then: a spy on it still sees every statement).
    const own = Object.hasOwn(client, 'query') ? (client.query as QueryFn) : undefined;
    const query: QueryFn = (...args) => (own ?? (Object.getPrototypeOf(client) as { query: QueryFn }).query).apply(client, args);
    (client as unknown as { query: QueryFn }).query = (config, values, callback) => {
      const name = typeof config === 'string' ? preparedNames.get(config) : undefined;
      if (name === undefined) return query(config, values, callback);
      return typeof values === 'function'
        ? query({ name, text: config, values: undefined }, values)
        : query({ name, text: config, values }, callback);
    };
  });
}

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
