/**
 * Contact search with relevance ordering, over two GIN-indexed generated columns of `contacts`:
 *
 * - `search_vector` (full-text, `simple` configuration, weighted): names (A); the email, its local
 *   part, its domain and their words, and the phone with and without `+` (B); metadata string and
 *   number values at any depth (C). Every query word matches as a lexeme prefix (`jan doe`,
 *   `+1415`, `acme.io`, `garcia12`).
 * - `search_text` (trigram): lower-cased names, email and phone, for fragments and typos
 *   (`word_similarity` ≥ 0.6), or, for a query of phone characters only, its digits as a substring.
 *
 * Ranking: full-text matches first, by `ts_rank` of the prefix query plus `ts_rank` of the exact
 * words (an exact word beats a longer word it prefixes; names beat email and phone, which beat
 * metadata); then matches found only by the trigram index, by similarity (phone-digit substrings
 * all score 0). Scores are integers (millionths; full-text ones offset by FULL_TEXT_BASE, above
 * any trigram score); ties go newest first. Pages are keyset over (score, id): the cursor carries
 * both.
 *
 * The query is a `union all` of the two groups, each sorted and limited, under an outer limit: the
 * trigram group is only executed when the full-text group does not fill the page (PostgreSQL's
 * Append runs its branches in order and stops when the limit is reached), so the common search,
 * whose words match, never pays for the trigram rechecks.
 */
import type { TenantRef } from '../../platform/db/tenant.ts';

/** Every full-text score is above every trigram score (those are at most 1,000,000). */
export const FULL_TEXT_BASE = 2_000_000;

export type SearchTerms = {
  /** The query, trimmed and lower-cased (trigram similarity). */
  text: string;
  /** Phone characters only: its digits (a substring of the phone, through the trigram index). */
  digits: string | null;
  /** `to_tsquery` text: every word as a prefix, all required; null when no word is left. */
  prefix: string | null;
  /** `to_tsquery` text: the exact words, any of them (ranking only). */
  exact: string | null;
};

export function searchTerms(q: string): SearchTerms {
  const text = q.trim().toLowerCase();
  const digits = text.replace(/[\s()+.-]/g, '');
  if (/^\d{3,15}$/.test(digits)) return { text, digits, prefix: `'${digits}':*`, exact: `'${digits}'` };
  const terms = text.split(/\s+/).map((t) => t.replace(/[^\p{L}\p{N}@._+-]/gu, '')).filter(Boolean).slice(0, 8);
  if (!terms.length) return { text, digits: null, prefix: null, exact: null };
  return { text, digits: null, prefix: terms.map((t) => `'${t}':*`).join(' & '), exact: terms.map((t) => `'${t}'`).join(' | ') };
}

/** Where a ranked page continues: after this score and id. */
export type RankKey = { score: number; id: string };

export const encodeRankKey = (k: RankKey): string => `${k.score}:${k.id}`;

/** The key of a cursor's payload, or undefined when it is no rank key. */
export function decodeRankKey(raw: string): RankKey | undefined {
  const m = /^(\d{1,10}):(.+)$/.exec(raw);
  return m ? { score: Number(m[1]), id: m[2]! } : undefined;
}

export type SearchBase = {
  tenant: TenantRef;
  /** The selected columns of `contacts c`. */
  columns: string;
  /** A join after `contacts c` (with `?` placeholders), and its parameters. */
  join?: string;
  joinParams?: unknown[];
  /** More predicates on `c` (with `?` placeholders), and their parameters. */
  where: string[];
  params: unknown[];
};

/**
 * One ranked page as SQL with `?` placeholders: the rows of `base.columns` plus `score`, best first,
 * after `after`, at most `limit` rows.
 */
export function rankedSearchSql(terms: SearchTerms, base: SearchBase, after: RankKey | undefined, limit: number): { sql: string; params: unknown[] } {
  const branches: string[] = [];
  const params: unknown[] = [];
  const branch = (score: string, scoreParams: unknown[], match: string, matchParams: unknown[]) => {
    const conditions = ['c.organization_id = ?', 'c.mode = ?', match, ...base.where];
    params.push(...scoreParams, ...(base.joinParams ?? []), base.tenant.organizationId, base.tenant.mode, ...matchParams, ...base.params);
    let keyset = '';
    if (after) { keyset = 'where (s.score, s.id) < (?, ?)'; params.push(after.score, after.id); }
    params.push(limit);
    branches.push(`(select * from (select ${base.columns}, ${score} as score from contacts c ${base.join ?? ''} where ${conditions.join(' and ')}) s ${keyset} order by s.score desc, s.id desc limit ?)`);
  };
  if (terms.prefix && !(after && after.score < FULL_TEXT_BASE)) {
    branch(
      `(${FULL_TEXT_BASE} + round((ts_rank(c.search_vector, to_tsquery('simple', ?)) + ts_rank(c.search_vector, to_tsquery('simple', ?))) * 1000000))::int`,
      [terms.prefix, terms.exact], `c.search_vector @@ to_tsquery('simple', ?)`, [terms.prefix],
    );
  }
  const notFullText = terms.prefix ? ` and not (c.search_vector @@ to_tsquery('simple', ?))` : '';
  const notFullTextParams = terms.prefix ? [terms.prefix] : [];
  if (terms.digits) branch('0', [], `(c.search_text like ?${notFullText})`, [`%${terms.digits}%`, ...notFullTextParams]);
  else branch('round(word_similarity(?, c.search_text) * 1000000)::int', [terms.text], `(c.search_text %> ?${notFullText})`, [terms.text, ...notFullTextParams]);
  params.push(limit);
  return { sql: `select * from (${branches.join(' union all ')}) r limit ?`, params };
}
