import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import pg from 'pg';
import { inlineFirstParameter, insertRowsSql, sqlLiteral } from './rowsets.ts';

describe('rowsets against PostgreSQL', () => {
  let client: pg.Client;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
  });

  it('sqlLiteral reads back every text unchanged, including quote, backslash and dollar-tag look-alikes', async () => {
    const texts = ["plain", "it's", 'back\\slash \\n', '$v$', 'ends with $v', 'ends with $', '$$', '$v$$v$ and $vabc$', "emoji 😀 and 'quotes' \"double\"", '{"json": "\\u00e9"}', ''];
    for (const text of texts) {
      const { rows } = await client.query(`select ${sqlLiteral(text)} as v`);
      expect(rows[0].v).toBe(text);
    }
  });

  it('insertRowsSql writes typed rows from JSON, skips conflicts, and inserts nothing for no rows', async () => {
    await client.query('create temporary table rowsets_t (id text primary key, n integer, at timestamptz, doc jsonb, note text)');
    const at = new Date('2026-11-22T10:00:00.123Z');
    const sql = insertRowsSql({
      table: 'rowsets_t', columns: ['id', 'n', 'at', 'doc', 'note'], onConflict: 'on conflict (id) do nothing',
      rows: [{ id: 'a', n: 1, at, doc: { k: ['x', 2] }, note: "o'clock $v$" }, { id: 'b', n: null, at, doc: {}, extra: 'ignored' }],
    });
    await client.query(sql);
    await client.query(sql); // conflicts: nothing doubles
    const { rows } = await client.query('select id, n, at, doc, note from rowsets_t order by id');
    expect(rows).toEqual([
      { id: 'a', n: 1, at, doc: { k: ['x', 2] }, note: "o'clock $v$" },
      { id: 'b', n: null, at, doc: {}, note: null },
    ]);
    expect(insertRowsSql({ table: 'rowsets_t', columns: ['id'], rows: [] })).toBe('');
    expect(() => insertRowsSql({ table: 'rowsets_t; drop table x', columns: ['id'], rows: [{ id: 'c' }] })).toThrow(/identifier/);
  });

  it('inlineFirstParameter replaces exactly one $1', async () => {
    const { rows } = await client.query(inlineFirstParameter('select $1::text::json as v', '{"a":"b\'c"}'));
    expect(rows[0].v).toEqual({ a: "b'c" });
    expect(() => inlineFirstParameter('select $1, $2', 'x')).toThrow();
    expect(() => inlineFirstParameter('select 1', 'x')).toThrow();
  });
});
