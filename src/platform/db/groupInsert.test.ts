import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { GroupInsert, type InsertGate } from './groupInsert.ts';

type Item = { id: string; ok: boolean; children: number };

describe('GroupInsert with a gate, against PostgreSQL', () => {
  let pool: pg.Pool;
  const suffix = `${process.pid}_${Date.now()}`;
  const parents = `gi_parent_${suffix}`;
  const children = `gi_child_${suffix}`;
  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: inject('pgAdminUrl'), max: 4 });
    await pool.query(`create table ${parents} (id text primary key)`);
    await pool.query(`create table ${children} (parent text not null, n integer not null, primary key (parent, n))`);
  });
  afterAll(async () => {
    await pool?.query(`drop table if exists ${parents}, ${children}`);
    await pool?.end();
  });

  /** A gate that lets through the items marked ok (read from its own parameter, as a real gate reads its lookups). */
  function group(log: string[]) {
    const gate: InsertGate<Item, { written: boolean; seen: number }> = {
      params: 1,
      ctes: (first) => [{ name: 'gate', sql: `select g.i from unnest($${first}::boolean[]) with ordinality as g(ok, i) where g.ok` }],
      select: `(select count(*)::int from gate) as passed`,
      batch: (items) => {
        log.push(`batch of ${items.length}`);
        return {
          values: [`{${items.map((i) => (i.ok ? 't' : 'f')).join(',')}}`],
          answers: (row, written) => items.map((_, n) => ({ written: written.has(n + 1), seen: Number(row.passed) })),
          failed: () => { log.push('failed'); },
        };
      },
    };
    return new GroupInsert<Item, { written: boolean; seen: number }>({
      pool, name: `gi_${suffix}`, gate,
      sets: [
        { table: parents, columns: ['id'], row: (i) => ({ id: i.id }) },
        { table: children, columns: ['parent', 'n'], rows: (i) => Array.from({ length: i.children }, (_, n) => ({ parent: i.id, n })) },
      ],
    });
  }

  it('writes only the items its gate lets through (every row of each: one or many), and answers each caller from the same statement', async () => {
    const log: string[] = [];
    const g = group(log);
    const items: Item[] = [
      { id: 'a', ok: true, children: 2 }, { id: 'b', ok: false, children: 3 }, { id: 'c', ok: true, children: 0 },
      { id: 'd', ok: false, children: 1 }, { id: 'e', ok: true, children: 1 },
    ];
    const answers = await Promise.all(items.map((i) => g.submit(i)));
    expect(log).toEqual(['batch of 5']);
    expect(answers).toEqual(items.map((i) => ({ written: i.ok, seen: 3 })));
    expect((await pool.query(`select id from ${parents} order by id`)).rows.map((r) => r.id)).toEqual(['a', 'c', 'e']);
    expect((await pool.query(`select parent, n from ${children} order by parent, n`)).rows).toEqual([{ parent: 'a', n: 0 }, { parent: 'a', n: 1 }, { parent: 'e', n: 0 }]);
  });

  it('a failed statement stores nothing and tells its gate (a rider gives its takes back); then each item runs alone', async () => {
    const log: string[] = [];
    const g = group(log);
    // 'a' exists already: the batch fails on its primary key, then 'a' fails alone and the others are written.
    const [dup, fresh, gated] = await Promise.allSettled([
      g.submit({ id: 'a', ok: true, children: 0 }), g.submit({ id: 'f', ok: true, children: 1 }), g.submit({ id: 'g', ok: false, children: 0 }),
    ]);
    expect(log).toEqual(['batch of 3', 'failed', 'batch of 1', 'batch of 1', 'batch of 1', 'failed']);
    expect(dup).toMatchObject({ status: 'rejected', reason: { code: '23505' } });
    expect(fresh).toEqual({ status: 'fulfilled', value: { written: true, seen: 1 } });
    expect(gated).toEqual({ status: 'fulfilled', value: { written: false, seen: 0 } });
    expect((await pool.query(`select id from ${parents} where id in ('f', 'g')`)).rows.map((r) => r.id)).toEqual(['f']);
  });
});
