/**
 * Multi-row inserts for group commits. A set of rows travels as one JSON array parameter and
 * becomes `INSERT … SELECT … FROM json_populate_recordset(null::<table>, $n::json)`, whose rows take
 * the table's own column types. Several such inserts join one statement as data-modifying CTEs
 * (`withStatements`): one statement is one implicit transaction and one round trip, and as a named
 * prepared statement it is parsed and planned once per connection.
 */
export type RowSet = {
  table: string;
  /** Column names (snake_case, as in the table); every row supplies a value (or null) for each. */
  columns: readonly string[];
  /** Appended after the SELECT, e.g. `on conflict (idempotency_key) do nothing`. */
  onConflict?: string;
};

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

function identifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a plain SQL identifier: ${name}`);
  return `"${name}"`;
}

/** The INSERT of a row set whose rows come as a JSON array in parameter `$param` (see rowsJson). */
export function insertRowsStatement(set: RowSet, param: number): string {
  const table = identifier(set.table);
  const columns = set.columns.map(identifier).join(', ');
  return `insert into ${table} (${columns}) select ${columns} from json_populate_recordset(null::${table}, $${param}::json)${set.onConflict ? ` ${set.onConflict}` : ''}`;
}

/**
 * The JSON parameter for `rows`: each row reduced to the set's columns (null when absent). Dates
 * become ISO 8601 strings here rather than through Date#toJSON: an object with toJSON sends
 * V8's JSON.stringify down its slow path for the whole array (about twice the cost per message row).
 */
export function rowsJson(columns: readonly string[], rows: readonly Record<string, unknown>[]): string {
  return JSON.stringify(rows.map((row) => {
    const picked: Record<string, unknown> = {};
    for (const c of columns) {
      const v = row[c];
      picked[c] = v instanceof Date ? v.toISOString() : (v ?? null);
    }
    return picked;
  }));
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
