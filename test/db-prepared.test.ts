/**
 * Hot statements as named prepared statements (platform/db/sql.ts `prepared`): a marked text runs
 * under its name on the ORM pool's connections (inside transactions too) and on the app's pool,
 * also when several of its queries are pipelined on a connection that has not parsed it yet; an
 * unmarked text runs unnamed; at most MAX_PREPARED texts are taken.
 */
import { randomBytes } from 'node:crypto';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PREPARED, prepared, preparedName, sqlQuery } from '../src/platform/db/sql.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

let t: TestApp;
beforeAll(async () => { t = await startTestApp({ workers: false }); });
afterAll(async () => { await t?.close(); });

/** A text no connection has seen yet. */
const fresh = (sql: string) => `${sql} /* ${randomBytes(6).toString('hex')} */`;
const PREPARED_NAMES = 'select name from pg_prepared_statements';

describe('prepared hot statements', () => {
  it('runs a marked text under its name on the ORM pool, also pipelined inside a transaction before its first answer', async () => {
    const text = prepared(fresh('select $1::int * 2 as v'));
    const name = preparedName(text)!;
    expect(name).toMatch(/^hot_[0-9a-f]{20}$/);
    const { values, names } = await t.app.orm.em.fork().transactional(async (tx) => {
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      // Five at once: pg puts them all on the wire; only the first carries the Parse.
      const results = await Promise.all([1, 2, 3, 4, 5].map((i) => sqlQuery<{ v: number }>(trx, text, [i])));
      return { values: results.map((r) => r[0]!.v), names: (await sqlQuery<{ name: string }>(trx, PREPARED_NAMES)).map((r) => r.name) };
    });
    expect(values).toEqual([2, 4, 6, 8, 10]);
    expect(names).toContain(name);
  });

  it('runs an unmarked text unnamed', async () => {
    const text = fresh('select $1::int + 1 as v');
    expect(preparedName(text)).toBeUndefined();
    const names = await t.app.orm.em.fork().transactional(async (tx) => {
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      expect((await sqlQuery<{ v: number }>(trx, text, [1]))[0]!.v).toBe(2);
      return (await sqlQuery<{ statement: string }>(trx, 'select statement from pg_prepared_statements')).map((r) => r.statement);
    });
    expect(names).not.toContain(text);
  });

  it("runs a marked text under its name on the app's pool", async () => {
    const text = prepared(fresh('select $1::text as v'));
    const client = await t.app.pool.connect();
    try {
      expect((await client.query<{ v: string }>(text, ['x'])).rows[0]!.v).toBe('x');
      expect((await client.query<{ name: string }>(PREPARED_NAMES)).rows.map((r) => r.name)).toContain(preparedName(text));
    } finally {
      client.release();
    }
  });

  it(`takes at most ${MAX_PREPARED} texts; later ones run unnamed`, async () => {
    for (let i = 0; i < MAX_PREPARED + 5; i++) prepared(fresh(`select ${i}`));
    const late = prepared(fresh('select $1::int as v'));
    expect(preparedName(late)).toBeUndefined();
    expect((await sqlQuery<{ v: number }>(t.app.orm.em.getConnection().getClient<unknown>(), late, [7]))[0]!.v).toBe(7);
  });
});
