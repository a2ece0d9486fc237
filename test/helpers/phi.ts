/** Shared by the HIPAA tests: the every-table scan for PHI markers, and callers on a ticking clock. */
import { expect } from 'vitest';
import type { ManualClock } from '../../src/platform/clock.ts';
import type { CallOptions, TestApp } from './testApp.ts';

/** The compliance officer every HIPAA test names. */
export const OFFICER = { name: 'Dana Privacy', email: 'privacy@clinic.test' };

/**
 * Every row of every table of the database (pg-boss's included) as text, searched for each needle;
 * answers `schema.table (needle): rows` for each hit (the test expects none). Bytea columns read as
 * hex: only text and JSON would show a clear marker.
 */
export async function tablesHolding(t: TestApp, needles: readonly string[]): Promise<string[]> {
  const tables = (await t.db.query<{ s: string; n: string }>(
    `select table_schema as s, table_name as n from information_schema.tables
      where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`)).rows;
  expect(tables.length).toBeGreaterThan(40);
  const hits: string[] = [];
  for (const { s, n } of tables) {
    for (const needle of needles) {
      const { rows } = await t.db.query(`select count(*)::int as c from "${s}"."${n}" x where x::text like $1`, [`%${needle}%`]);
      if (rows[0].c > 0) hits.push(`${s}.${n} (${needle}): ${rows[0].c}`);
    }
  }
  return hits;
}

/**
 * REST and GraphQL callers that move the manual clock a second on first (a frozen clock would hold
 * a burst of calls in the rate limiter), with `key()` as the default credential.
 */
export function tickingCallers(t: () => TestApp, clock: ManualClock, key: () => string) {
  return {
    rest: (method: string, path: string, opts: CallOptions = {}) => {
      clock.advance(1000);
      return t().rest(method, path, { key: key(), ...opts });
    },
    gql: (query: string, variables: Record<string, unknown> = {}, opts: CallOptions = {}) => {
      clock.advance(1000);
      return t().gql(query, variables, { key: key(), ...opts });
    },
  };
}
