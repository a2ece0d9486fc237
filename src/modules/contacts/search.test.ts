import { describe, expect, it } from 'vitest';
import { decodeRankKey, encodeRankKey, FULL_TEXT_BASE, rankedSearchSql, searchTerms } from './search.ts';

const base = { tenant: { organizationId: 'org_x', mode: 'test' as const }, columns: 'c.id', where: ['c.country = ?'], params: ['US'] };

describe('searchTerms', () => {
  it('makes every word a required prefix, and the exact words a ranking bonus', () => {
    expect(searchTerms('  Jane  DOE ')).toEqual({ text: 'jane  doe', digits: null, prefix: "'jane':* & 'doe':*", exact: "'jane' | 'doe'" });
    expect(searchTerms("o'brien")).toMatchObject({ prefix: "'obrien':*" });
    expect(searchTerms('!!!')).toEqual({ text: '!!!', digits: null, prefix: null, exact: null });
  });
  it('reads a query of phone characters as digits', () => {
    expect(searchTerms('+1 (415) 555')).toEqual({ text: '+1 (415) 555', digits: '1415555', prefix: "'1415555':*", exact: "'1415555'" });
    expect(searchTerms('42').digits).toBeNull();
  });
});

describe('rank keys', () => {
  it('round-trip and refuse anything else', () => {
    expect(decodeRankKey(encodeRankKey({ score: 2060792, id: 'con_01abc' }))).toEqual({ score: 2060792, id: 'con_01abc' });
    expect(decodeRankKey('con_01abc')).toBeUndefined();
    expect(decodeRankKey('-1:con_01abc')).toBeUndefined();
  });
});

describe('rankedSearchSql', () => {
  const placeholders = (sql: string) => sql.split('?').length - 1;
  it('puts the full-text branch before the trigram branch, each with the filters, with one parameter per placeholder', () => {
    const { sql, params } = rankedSearchSql(searchTerms('jane'), base, undefined, 21);
    expect(sql.indexOf('ts_rank')).toBeLessThan(sql.indexOf('word_similarity'));
    expect(sql.match(/c\.country = \?/g)).toHaveLength(2);
    expect(placeholders(sql)).toBe(params.length);
    expect(params.at(-1)).toBe(21);
  });
  it('skips the full-text branch once the cursor is past it, and keeps the keyset in the trigram branch', () => {
    const past = rankedSearchSql(searchTerms('jane'), base, { score: FULL_TEXT_BASE - 1, id: 'con_1' }, 21);
    expect(past.sql).not.toContain('ts_rank');
    expect(past.sql).toContain('(s.score, s.id) < (?, ?)');
    expect(placeholders(past.sql)).toBe(past.params.length);
    const within = rankedSearchSql(searchTerms('jane'), base, { score: FULL_TEXT_BASE + 5, id: 'con_1' }, 21);
    expect(within.sql).toContain('ts_rank');
    expect(within.sql.match(/\(s\.score, s\.id\) < \(\?, \?\)/g)).toHaveLength(2);
  });
  it('matches phone digits as a substring when the prefix does not match', () => {
    const { sql, params } = rankedSearchSql(searchTerms('5554003'), base, undefined, 5);
    expect(sql).toContain('c.search_text like ?');
    expect(params).toContain('%5554003%');
    expect(sql).not.toContain('word_similarity');
  });
});
