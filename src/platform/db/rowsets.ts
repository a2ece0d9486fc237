/**
 * Multi-row inserts for group commits: a set of rows becomes one `INSERT … SELECT … FROM
 * json_populate_recordset(null::<table>, '<json>')` statement whose rows take the table's own column
 * types. The JSON travels as an escaped literal so several statements can go to PostgreSQL as one
 * simple-protocol query, which runs them as a single implicit transaction in one round trip.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export type RowSet = {
  table: string;
  /** Column names (snake_case, as in the table); every row supplies a value (or null) for each. */
  columns: readonly string[];
  rows: readonly Record<string, unknown>[];
  /** Appended after the SELECT, e.g. `on conflict (idempotency_key) do nothing`. */
  onConflict?: string;
};

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

function identifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a plain SQL identifier: ${name}`);
  return `"${name}"`;
}

/**
 * A SQL string literal for any text: dollar-quoted with a tag the text does not contain (found with
 * native string search, so long JSON costs no per-character escaping).
 */
export function sqlLiteral(text: string): string {
  for (let n = 0; n < 8; n++) {
    const tag = `$v${n === 0 ? '' : randomBytes(6).toString('hex')}$`;
    if (!text.includes(tag) && !text.endsWith(tag.slice(0, -1))) return `${tag}${text}${tag}`;
  }
  return pg.escapeLiteral(text);
}

/** One INSERT statement for all rows of the set (empty string when there are none). */
export function insertRowsSql(set: RowSet): string {
  if (set.rows.length === 0) return '';
  const table = identifier(set.table);
  const columns = set.columns.map(identifier).join(', ');
  const picked = set.rows.map((row) => Object.fromEntries(set.columns.map((c) => [c, row[c] ?? null])));
  return `insert into ${table} (${columns}) select ${columns} from json_populate_recordset(null::${table}, ${sqlLiteral(JSON.stringify(picked))})${set.onConflict ? ` ${set.onConflict}` : ''}`;
}

/** Inlines `$1` of a parameterized statement (single use, text parameter) as a literal. */
export function inlineFirstParameter(sql: string, value: string): string {
  const at = sql.indexOf('$1');
  if (at < 0 || sql.indexOf('$1', at + 2) >= 0 || /\$[2-9]/.test(sql)) throw new Error('expected exactly one $1 parameter');
  return sql.slice(0, at) + sqlLiteral(value) + sql.slice(at + 2);
}
