import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { insertRowsStatement, rowsJson, withStatements } from './rowsets.ts';

describe('rowsets against PostgreSQL', () => {
  let client: pg.Client;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await client.connect();
    await client.query('create temporary table rowsets_t (id text primary key, n integer, at timestamptz, doc jsonb, note text)');
    await client.query('create temporary table rowsets_u (id text primary key, parent text not null)');
  });
  afterAll(async () => {
    await client?.end();
  });

  it('insertRowsStatement writes typed rows from a JSON parameter and skips conflicts', async () => {
    const at = new Date('2026-11-22T10:00:00.123Z');
    const columns = ['id', 'n', 'at', 'doc', 'note'];
    const sql = insertRowsStatement({ table: 'rowsets_t', columns, onConflict: 'on conflict (id) do nothing' }, 1);
    const rows = [{ id: 'a', n: 1, at, doc: { k: ['x', 2] }, note: "o'clock $v$ \\ back" }, { id: 'b', n: null, at, doc: {}, extra: 'ignored' }];
    await client.query(sql, [rowsJson(columns, rows)]);
    await client.query(sql, [rowsJson(columns, rows)]); // conflicts: nothing doubles
    const { rows: stored } = await client.query('select id, n, at, doc, note from rowsets_t order by id');
    expect(stored).toEqual([
      { id: 'a', n: 1, at, doc: { k: ['x', 2] }, note: "o'clock $v$ \\ back" },
      { id: 'b', n: null, at, doc: {}, note: null },
    ]);
    expect(() => insertRowsStatement({ table: 'rowsets_t; drop table x', columns: ['id'] }, 1)).toThrow(/identifier/);
  });

  it('withStatements runs every insert as one statement, ahead of a final statement with or without its own WITH', async () => {
    const t = insertRowsStatement({ table: 'rowsets_t', columns: ['id'] }, 1);
    const final = `with ins as (insert into rowsets_u (id, parent) select x->>'id', x->>'parent' from json_array_elements($2::json) x returning id) select count(*)::int as n from ins`;
    const { rows } = await client.query(withStatements([{ name: 'parents', sql: t }], final), [rowsJson(['id'], [{ id: 'p1' }]), JSON.stringify([{ id: 'c1', parent: 'p1' }])]);
    expect(rows).toEqual([{ n: 1 }]);
    expect((await client.query(`select id from rowsets_t where id = 'p1'`)).rowCount).toBe(1);
    // A failing part fails the whole statement: nothing of it is stored.
    await expect(client.query(withStatements([{ name: 'parents', sql: t }], final), [rowsJson(['id'], [{ id: 'p2' }]), JSON.stringify([{ id: 'c1', parent: 'p2' }])])).rejects.toThrow(/duplicate key/);
    expect((await client.query(`select id from rowsets_t where id = 'p2'`)).rowCount).toBe(0);
    // A plain final statement works too.
    await client.query(withStatements([{ name: 'parents', sql: t }], `select 1`), [rowsJson(['id'], [{ id: 'p3' }])]);
    expect((await client.query(`select id from rowsets_t where id = 'p3'`)).rowCount).toBe(1);
    expect(() => withStatements([{ name: 'x', sql: t }], 'with recursive r as (select 1) select 1')).toThrow(/RECURSIVE/);
  });
});
