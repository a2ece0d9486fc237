/**
 * Multi-row inserts for group commits. A set of rows travels as one PostgreSQL array parameter per
 * column and becomes `INSERT … SELECT * FROM unnest($n::<type>[], $n+1::<type>[], …)`, each array
 * cast to its column's own type (read once from the catalog, `columnTypes`). Several such inserts
 * join one statement as data-modifying CTEs (`withStatements`): one statement is one implicit
 * transaction and one round trip, and as a named prepared statement it is parsed and planned once
 * per connection.
 *
 * Typed arrays rather than one JSON array of row objects (`json_populate_recordset`, used before):
 * PostgreSQL parses each value once with its type's input function and matches no keys. For the
 * messaging group commit (message, event, usage entry and pg-boss job per message) database CPU
 * went from ~200-207 to ~184-187 µs per message (scratch measurement, 25 messages per batch).
 */
export type RowSet = {
  table: string;
  /** Column names (snake_case, as in the table); every row supplies a value (or null) for each. */
  columns: readonly string[];
  /** Appended after the SELECT, e.g. `on conflict (idempotency_key) do nothing`. */
  onConflict?: string;
  /**
   * Where each column's value is in the rows given to rowsParams, in `columns`' order (default:
   * under the column's own name): entity-shaped objects then go in as they are, with no row object
   * made per entity (`entityColumns(…).map((c) => c.property)`).
   */
  properties?: readonly string[];
};

/**
 * Column name → SQL type without modifiers (`text`, `jsonb`, `character varying`): the arrays are
 * cast to the base type and the INSERT then applies the column's own length or precision, as any
 * INSERT does (an explicit cast to `varchar(8)` would silently truncate).
 */
export type ColumnTypes = ReadonlyMap<string, string>;

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

function identifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a plain SQL identifier: ${name}`);
  return `"${name}"`;
}

/** The SQL types of `table`'s columns, from the catalog (through `query`, any pg-style client). */
export async function columnTypes(query: (text: string, values: unknown[]) => Promise<{ rows: { name: string; type: string }[] }>, table: string): Promise<ColumnTypes> {
  const { rows } = await query(
    'select a.attname as name, format_type(a.atttypid, null) as type from pg_attribute a where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped',
    [identifier(table)],
  );
  if (rows.length === 0) throw new Error(`table ${table} has no columns`);
  return new Map(rows.map((r) => [r.name, r.type]));
}

function typeOf(set: RowSet, types: ColumnTypes, column: string): string {
  const type = types.get(column);
  if (!type) throw new Error(`${set.table}.${column} is not a column`);
  if (type.endsWith(']')) throw new Error(`${set.table}.${column}: array columns cannot travel in a row set`);
  return type;
}

/**
 * Parameter `param` as an array of `column`'s type: an array literal (`$n::<type>[]`), or for a
 * json/jsonb column one JSON array of the values (rowsParams), its JSON nulls as SQL NULL: the
 * values need no quoting as array elements (that escaping cost the service more than
 * serializing them).
 */
function columnArray(set: RowSet, types: ColumnTypes, column: string, param: number): string {
  const type = typeOf(set, types, column);
  if (type !== 'json' && type !== 'jsonb') return `$${param}::${type}[]`;
  return `(select array_agg(case when ${type}_typeof(x.v) = 'null' then null else x.v end order by x.n) from ${type}_array_elements($${param}::${type}) with ordinality as x(v, n))`;
}

/**
 * The INSERT of a row set whose column arrays are parameters `$firstParam`, `$firstParam + 1`, … (see rowsParams).
 * With `only`, each row also has an item number (`$itemParam`, an int[] beside the columns) and only
 * the rows whose number `only.items` (a SELECT of one int column) yields are inserted: a group
 * commit's gate (groupInsert.ts).
 */
export function insertRowsStatement(set: RowSet, types: ColumnTypes, firstParam: number, only?: { itemParam: number; items: string }): string {
  const table = identifier(set.table);
  const columns = set.columns.map(identifier).join(', ');
  const arrays = set.columns.map((c, i) => columnArray(set, types, c, firstParam + i)).join(', ');
  const conflict = set.onConflict ? ` ${set.onConflict}` : '';
  if (!only) return `insert into ${table} (${columns}) select * from unnest(${arrays})${conflict}`;
  const names = set.columns.map((_, i) => `c${i}`);
  return `insert into ${table} (${columns}) select ${names.map((n) => `u.${n}`).join(', ')} from unnest(${arrays}, $${only.itemParam}::int[]) as u(${names.join(', ')}, item)
    where u.item in (${only.items})${conflict}`;
}

/**
 * The UPDATE of a row set: each row's `keys` columns find its table row, the other columns of the
 * set are written (parameters as insertRowsStatement's, the keys first in `set.columns`). Rows that
 * match nothing change nothing. `appended` columns (jsonb arrays) get the row's value appended
 * (`col = t.col || r.col`) instead of replaced.
 */
export function updateRowsStatement(set: RowSet, types: ColumnTypes, firstParam: number, keys: readonly string[], appended: readonly string[] = []): string {
  const table = identifier(set.table);
  const arrays = set.columns.map((c, i) => columnArray(set, types, c, firstParam + i)).join(', ');
  const names = set.columns.map(identifier).join(', ');
  const assignments = set.columns.filter((c) => !keys.includes(c)).map((c) => `${identifier(c)} = ${appended.includes(c) ? `t.${identifier(c)} || ` : ''}r.${identifier(c)}`);
  if (assignments.length === 0) throw new Error(`update of ${set.table}: no column besides the keys`);
  for (const k of keys) if (!set.columns.includes(k)) throw new Error(`update of ${set.table}: key ${k} is not a column of the set`);
  const match = keys.map((k) => `t.${identifier(k)} = r.${identifier(k)}`).join(' and ');
  return `update ${table} as t set ${assignments.join(', ')} from unnest(${arrays}) as r(${names}) where ${match}`;
}

/**
 * The parameters of insertRowsStatement (and updateRowsStatement) for `rows`: one per column, in
 * order (absent values are null): an array literal, or for a json/jsonb column (any JSON value)
 * a JSON array of the values. Other columns take strings, numbers, booleans or Dates (sent as
 * ISO 8601).
 */
export function rowsParams(set: RowSet, types: ColumnTypes, rows: readonly object[]): string[] {
  // The rows of a group commit share their timestamps (one `now` per turn or batch): each Date is
  // written out once per run of equal ones.
  const dates: DateMemo = { time: NaN, text: '' };
  const params: string[] = [];
  for (let c = 0; c < set.columns.length; c++) {
    const column = set.columns[c]!;
    const key = set.properties?.[c] ?? column;
    const type = typeOf(set, types, column);
    if (type === 'json' || type === 'jsonb') {
      const values: unknown[] = [];
      for (const row of rows) values.push((row as Record<string, unknown>)[key] ?? null);
      params.push(JSON.stringify(values));
      continue;
    }
    let literal = '{';
    for (let i = 0; i < rows.length; i++) {
      if (i > 0) literal += ',';
      literal += arrayElement((rows[i] as Record<string, unknown>)[key], set, column, dates);
    }
    params.push(`${literal}}`);
  }
  return params;
}

type DateMemo = { time: number; text: string };

/**
 * `values` as one PostgreSQL array literal (`{"a","b",NULL}`), as rowsParams writes a column: for a
 * parameter of an array type, instead of handing pg the JavaScript array (its encoder escapes each
 * element with two regular expressions and formats each Date with the local offset).
 */
export function arrayLiteral(values: readonly (string | number | Date | null | undefined)[]): string {
  const dates: DateMemo = { time: NaN, text: '' };
  const set: RowSet = { table: 'array', columns: [] };
  let literal = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) literal += ',';
    literal += arrayElement(values[i], set, 'element', dates);
  }
  return `${literal}}`;
}

function arrayElement(value: unknown, set: RowSet, column: string, dates: DateMemo): string {
  if (value === null || value === undefined) return 'NULL';
  let text: string;
  if (typeof value === 'string') text = value;
  else if (value instanceof Date) {
    const time = value.getTime();
    if (time !== dates.time) {
      dates.time = time;
      dates.text = value.toISOString();
    }
    text = dates.text;
  } else if (typeof value === 'object') throw new Error(`${set.table}.${column}: an object for a non-JSON column`);
  else text = String(value);
  // Quoted, with backslash and double quote escaped: any text (braces, commas, "NULL") stays a value.
  return text.includes('"') || text.includes('\\') ? `"${text.replace(/[\\"]/g, '\\$&')}"` : `"${text}"`;
}

/**
 * One statement: `ctes` as data-modifying CTEs ahead of `final` (which may start with its own
 * WITH). PostgreSQL runs every data-modifying CTE exactly once, to completion, whether or not the
 * final statement reads it, and the whole statement commits or fails as one.
 */
export function withStatements(ctes: readonly { name: string; sql: string }[], final: string): string {
  const head = ctes.map((c) => `${identifier(c.name)} as (${c.sql})`).join(',\n');
  const rest = final.trimStart();
  if (/^with\s+recursive\b/i.test(rest)) throw new Error('cannot join a WITH RECURSIVE statement');
  return /^with\s/i.test(rest) ? `with ${head},\n${rest.slice(4).trimStart()}` : `with ${head}\n${rest}`;
}
