import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { arrayLiteral, columnTypes, insertRowsStatement, rowsParams, updateRowsStatement, withStatements, type ColumnTypes, type RowSet } from './rowsets.ts';

describe('rowsets against PostgreSQL', () => {
  let client: pg.Client;
  let tTypes: ColumnTypes;
  const query = (text: string, values: unknown[]) => client.query<{ name: string; type: string }>(text, values);
  beforeAll(async () => {
    client = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await client.connect();
    await client.query('create temporary table rowsets_t (id text primary key, n integer, at timestamptz, doc jsonb, note text, flag boolean, code varchar(8))');
    await client.query('create temporary table rowsets_u (id text primary key, parent text not null)');
    await client.query('create temporary table rowsets_a (id text primary key, tags text[])');
    tTypes = await columnTypes(query, 'rowsets_t');
  });
  afterAll(async () => {
    await client?.end();
  });

  it('columnTypes reads each column type from the catalog, without modifiers', async () => {
    expect(Object.fromEntries(tTypes)).toEqual({
      id: 'text', n: 'integer', at: 'timestamp with time zone', doc: 'jsonb', note: 'text', flag: 'boolean', code: 'character varying',
    });
    await expect(columnTypes(query, 'no_such_table')).rejects.toThrow(/does not exist/);
  });

  it('insertRowsStatement writes typed rows from one array per column and skips conflicts', async () => {
    const at = new Date('2026-11-22T10:00:00.123Z');
    const set: RowSet = { table: 'rowsets_t', columns: ['id', 'n', 'at', 'doc', 'note', 'flag', 'code'], onConflict: 'on conflict (id) do nothing' };
    const sql = insertRowsStatement(set, tTypes, 1);
    const awkward = 'o\'clock $v$ \\ back "quoted" {braces}, commas\nnew line ☃';
    const rows = [
      { id: 'a', n: 1, at, doc: { k: ['x', 2], q: 'say "hi" \\ {}' }, note: awkward, flag: true, code: 'AB' },
      { id: 'b', n: null, at, doc: {}, extra: 'ignored', flag: false },
      { id: 'c', n: 0, at: at.toISOString(), doc: 'a JSON string', note: 'NULL', code: '' },
      { id: 'd', n: -5, at, doc: null, note: ' padded ' },
    ];
    await client.query(sql, rowsParams(set, tTypes, rows));
    await client.query(sql, rowsParams(set, tTypes, rows)); // conflicts: nothing doubles
    const { rows: stored } = await client.query('select id, n, at, doc, note, flag, code from rowsets_t order by id');
    expect(stored).toEqual([
      { id: 'a', n: 1, at, doc: { k: ['x', 2], q: 'say "hi" \\ {}' }, note: awkward, flag: true, code: 'AB' },
      { id: 'b', n: null, at, doc: {}, note: null, flag: false, code: null },
      { id: 'c', n: 0, at, doc: 'a JSON string', note: 'NULL', flag: null, code: '' },
      { id: 'd', n: -5, at, doc: null, note: ' padded ', flag: null, code: null },
    ]);
    // The column's own type applies: a value too long for varchar(8) fails the insert, it is not cut.
    await expect(client.query(sql, rowsParams(set, tTypes, [{ id: 'e', code: 'too long for it' }]))).rejects.toThrow(/too long/);
    // JSON travels as one JSON array per column: only an absent value is SQL NULL, JSON nulls inside a value stay.
    await client.query(sql, rowsParams(set, tTypes, [{ id: 'g', doc: [null, { a: null }] }, { id: 'h', doc: 'null' }, { id: 'i' }]));
    const { rows: nulls } = await client.query(`select id, doc, doc is null as absent from rowsets_t where id in ('g', 'h', 'i') order by id`);
    expect(nulls).toEqual([{ id: 'g', doc: [null, { a: null }], absent: false }, { id: 'h', doc: 'null', absent: false }, { id: 'i', doc: null, absent: true }]);
    expect(() => insertRowsStatement({ table: 'rowsets_t; drop table x', columns: ['id'] }, tTypes, 1)).toThrow(/identifier/);
    expect(() => insertRowsStatement({ table: 'rowsets_t', columns: ['nope'] }, tTypes, 1)).toThrow(/not a column/);
    expect(() => rowsParams(set, tTypes, [{ id: 'f', note: { not: 'text' } }])).toThrow(/non-JSON column/);
    const aTypes = await columnTypes(query, 'rowsets_a');
    expect(() => insertRowsStatement({ table: 'rowsets_a', columns: ['id', 'tags'] }, aTypes, 1)).toThrow(/array columns/);
  });

  it('rowsParams reads each column under its property when the set names them, and writes every row its own timestamp', async () => {
    const set: RowSet = { table: 'rowsets_t', columns: ['id', 'n', 'at', 'doc'], properties: ['key', 'count', 'when', 'body'] };
    const first = new Date('2026-11-30T04:00:00.001Z');
    const second = new Date('2026-11-30T04:00:00.002Z');
    const entities = [
      { key: 'p-a', count: 1, when: first, body: { a: 1 }, id: 'not this', n: 99 },
      { key: 'p-b', count: 2, when: new Date(first.getTime()), body: null },
      { key: 'p-c', count: 3, when: second },
      { key: 'p-d', when: first },
    ];
    expect(rowsParams(set, tTypes, entities)).toEqual([
      '{"p-a","p-b","p-c","p-d"}', '{"1","2","3",NULL}',
      `{"${first.toISOString()}","${first.toISOString()}","${second.toISOString()}","${first.toISOString()}"}`, '[{"a":1},null,null,null]',
    ]);
    await client.query(insertRowsStatement(set, tTypes, 1), rowsParams(set, tTypes, entities));
    const { rows } = await client.query(`select id, n, at, doc from rowsets_t where id like 'p-%' order by id`);
    expect(rows).toEqual([
      { id: 'p-a', n: 1, at: first, doc: { a: 1 } }, { id: 'p-b', n: 2, at: first, doc: null },
      { id: 'p-c', n: 3, at: second, doc: null }, { id: 'p-d', n: null, at: first, doc: null },
    ]);
    expect(() => rowsParams({ table: 'rowsets_t', columns: ['at'] }, tTypes, [{ at: new Date(Number.NaN) }])).toThrow(RangeError);
  });

  it('arrayLiteral writes an array parameter PostgreSQL reads back as the same values', async () => {
    const at = new Date('2026-11-30T04:00:00.123Z');
    const texts = ['w:key:POST /v1/agents/{id}/chat', 'say "hi" \\ {a,b}', 'NULL', '', null, ' padded '];
    const { rows } = await client.query('select $1::text[] as t, $2::bigint[] as n, $3::timestamptz[] as d', [
      arrayLiteral(texts), arrayLiteral([1, -2, 1_764_000_000, null]), arrayLiteral([at, at, null, new Date(at.getTime() + 1)]),
    ]);
    expect(rows[0]).toEqual({ t: texts, n: ['1', '-2', '1764000000', null], d: [at, at, null, new Date(at.getTime() + 1)] });
    expect(arrayLiteral([])).toBe('{}');
  });

  it('withStatements runs every insert as one statement, ahead of a final statement with or without its own WITH', async () => {
    const set: RowSet = { table: 'rowsets_t', columns: ['id'] };
    const t = insertRowsStatement(set, tTypes, 1);
    const final = `with ins as (insert into rowsets_u (id, parent) select x->>'id', x->>'parent' from json_array_elements($2::json) x returning id) select count(*)::int as n from ins`;
    const { rows } = await client.query(withStatements([{ name: 'parents', sql: t }], final), [...rowsParams(set, tTypes, [{ id: 'p1' }]), JSON.stringify([{ id: 'c1', parent: 'p1' }])]);
    expect(rows).toEqual([{ n: 1 }]);
    expect((await client.query(`select id from rowsets_t where id = 'p1'`)).rowCount).toBe(1);
    // A failing part fails the whole statement: nothing of it is stored.
    await expect(client.query(withStatements([{ name: 'parents', sql: t }], final), [...rowsParams(set, tTypes, [{ id: 'p2' }]), JSON.stringify([{ id: 'c1', parent: 'p2' }])])).rejects.toThrow(/duplicate key/);
    expect((await client.query(`select id from rowsets_t where id = 'p2'`)).rowCount).toBe(0);
    // A plain final statement works too.
    await client.query(withStatements([{ name: 'parents', sql: t }], `select 1`), rowsParams(set, tTypes, [{ id: 'p3' }]));
    expect((await client.query(`select id from rowsets_t where id = 'p3'`)).rowCount).toBe(1);
    expect(() => withStatements([{ name: 'x', sql: t }], 'with recursive r as (select 1) select 1')).toThrow(/RECURSIVE/);
  });

  it('updateRowsStatement writes the non-key columns of each row found by its keys', async () => {
    const at = new Date('2026-11-27T08:00:00.456Z');
    await client.query(`insert into rowsets_t (id, n, note, doc) values ('u1', 1, 'one', '{"a":1}'), ('u2', 2, 'two', null), ('u3', 3, 'three', null)`);
    const set: RowSet = { table: 'rowsets_t', columns: ['id', 'n', 'at', 'doc', 'note'] };
    const sql = updateRowsStatement(set, tTypes, 1, ['id']);
    await client.query(sql, rowsParams(set, tTypes, [
      { id: 'u1', n: 10, at, doc: { b: ['x', '"q"'] }, note: null },
      { id: 'u3', n: 30, at: null, doc: null, note: 'three, "again" {}' },
      { id: 'missing', n: 99, at, doc: null, note: 'nothing' },
    ]));
    const { rows } = await client.query(`select id, n, at, doc, note from rowsets_t where id like 'u%' order by id`);
    expect(rows).toEqual([
      { id: 'u1', n: 10, at, doc: { b: ['x', '"q"'] }, note: null },
      { id: 'u2', n: 2, at: null, doc: null, note: 'two' },
      { id: 'u3', n: 30, at: null, doc: null, note: 'three, "again" {}' },
    ]);
    expect((await client.query(`select count(*)::int as n from rowsets_t where id = 'missing'`)).rows[0].n).toBe(0);
    expect(() => updateRowsStatement({ table: 'rowsets_t', columns: ['id'] }, tTypes, 1, ['id'])).toThrow(/no column/);
    expect(() => updateRowsStatement({ table: 'rowsets_t', columns: ['n', 'note'] }, tTypes, 1, ['id'])).toThrow(/key id/);
  });
});
