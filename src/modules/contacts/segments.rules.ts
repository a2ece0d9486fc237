/**
 * The segment rules language and its compiler. A rule is a group `{ "all": [...] }` or
 * `{ "any": [...] }` whose items are groups or conditions `{ "field", "op", "value" }`; it compiles
 * to one parameterized SQL predicate over `contacts c` (placeholders `?`, values in `params`), so a
 * segment is counted and paged by one query. Anything unknown is VALIDATION_ERROR with
 * `details.field` pointing into the rules (`rules.all.1.op`).
 *
 * Fields and operators:
 * - `first_name`, `last_name`, `email`, `phone`: eq, neq, in, not_in, contains, starts_with, ends_with, exists, not_exists
 * - `country`, `lifecycle_stage`: eq, neq, in, not_in, exists, not_exists
 * - `tags`: contains, not_contains, contains_any, contains_all, is_empty, is_not_empty
 * - `metadata.<path>` (dot-separated keys): eq, neq, in, not_in, gt, gte, lt, lte, contains, exists, not_exists;
 *   in HIPAA mode a path whose first key is a PHI key (sealed, see contacts.phi.ts) is refused:
 *   VALIDATION_ERROR with `details.reason: "phi_metadata"` (the database cannot match ciphertext)
 * - `consent.<channel>`: eq, neq, in, not_in (opted_in, opted_out, unknown; no record counts as unknown)
 * - `created_at`, `updated_at`: before, after (ISO 8601), within_days, not_within_days (integer days)
 * - `activity`: within_days, not_within_days (a message to or from the contact's phone or email in
 *   the last N days), with optional `channel` and `direction` (inbound, outbound) on the condition
 */
import { ServiceError } from '../../platform/errors.ts';
import { CHANNELS } from '../../providers/messaging/types.ts';
import { CONSENT_CHANNELS, CONSENT_STATUSES, LIFECYCLE_STAGES } from './contacts.entities.ts';

export type CompiledRules = { sql: string; params: unknown[] };

export const MAX_RULE_DEPTH = 5;
export const MAX_RULE_CONDITIONS = 100;
const DAY_MS = 86_400_000;

const TEXT_OPS = ['eq', 'neq', 'in', 'not_in', 'contains', 'starts_with', 'ends_with', 'exists', 'not_exists'] as const;
const ENUM_OPS = ['eq', 'neq', 'in', 'not_in', 'exists', 'not_exists'] as const;
const TAG_OPS = ['contains', 'not_contains', 'contains_any', 'contains_all', 'is_empty', 'is_not_empty'] as const;
const META_OPS = ['eq', 'neq', 'in', 'not_in', 'gt', 'gte', 'lt', 'lte', 'contains', 'exists', 'not_exists'] as const;
const CONSENT_OPS = ['eq', 'neq', 'in', 'not_in'] as const;
const DATE_OPS = ['before', 'after', 'within_days', 'not_within_days'] as const;
const ACTIVITY_OPS = ['within_days', 'not_within_days'] as const;
/** Activity is messages: the messaging channels. */
const ACTIVITY_CHANNELS = CHANNELS;

const COLUMNS: Record<string, string> = {
  first_name: 'c.first_name', last_name: 'c.last_name', email: 'c.email', phone: 'c.phone',
  country: 'c.country', lifecycle_stage: 'c.lifecycle_stage', created_at: 'c.created_at', updated_at: 'c.updated_at',
};
const METADATA_KEY = /^[A-Za-z0-9_-]{1,64}$/;

function invalid(field: string, message: string, expected?: unknown): never {
  throw new ServiceError('VALIDATION_ERROR', `${field}: ${message}`, { field, ...(expected !== undefined ? { expected } : {}) });
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/** What a condition on a metadata key may not test: the PHI keys of an organization in HIPAA mode. */
export type RuleOptions = { isPhiKey?: ((key: string) => boolean) | null };
type State = { conditions: number; isPhiKey: ((key: string) => boolean) | null };

/** Compiles rules to a predicate over `contacts c`; `now` anchors the relative-date operators. */
export function compileRules(rules: unknown, now: Date, path = 'rules', options: RuleOptions = {}): CompiledRules {
  const params: unknown[] = [];
  const state: State = { conditions: 0, isPhiKey: options.isPhiKey ?? null };
  const sql = compileNode(rules, path, 1, params, state, now, true);
  return { sql, params };
}

function compileNode(node: unknown, path: string, depth: number, params: unknown[], state: State, now: Date, root = false): string {
  if (!isObject(node)) invalid(path, 'must be an object: a group { all: [...] } / { any: [...] } or a condition { field, op, value }');
  if ('all' in node || 'any' in node) return compileGroup(node, path, depth, params, state, now);
  if (root) invalid(path, 'must be a group: { all: [...] } or { any: [...] }', ['all', 'any']);
  return compileCondition(node, path, params, state, now);
}

function compileGroup(node: Record<string, unknown>, path: string, depth: number, params: unknown[], state: State, now: Date): string {
  const keys = Object.keys(node);
  if (keys.length !== 1) invalid(`${path}.${keys.find((k) => k !== 'all' && k !== 'any') ?? keys[0]}`, 'a group has exactly one key, all or any', ['all', 'any']);
  if (depth > MAX_RULE_DEPTH) invalid(path, `groups nest at most ${MAX_RULE_DEPTH} deep`);
  const kind = keys[0] as 'all' | 'any';
  const items = node[kind];
  if (!Array.isArray(items)) invalid(`${path}.${kind}`, 'must be an array of groups and conditions');
  if (items.length === 0) {
    if (kind === 'any') invalid(`${path}.${kind}`, 'must not be empty');
    return 'true';
  }
  const parts = items.map((item, i) => compileNode(item, `${path}.${kind}.${i}`, depth + 1, params, state, now));
  return `(${parts.join(kind === 'all' ? ' and ' : ' or ')})`;
}

function compileCondition(node: Record<string, unknown>, path: string, params: unknown[], state: State, now: Date): string {
  if (++state.conditions > MAX_RULE_CONDITIONS) invalid(path, `rules have at most ${MAX_RULE_CONDITIONS} conditions`);
  for (const key of Object.keys(node)) {
    if (!['field', 'op', 'value', 'channel', 'direction'].includes(key)) invalid(`${path}.${key}`, 'unknown key in a condition', ['field', 'op', 'value']);
  }
  const field = node.field;
  if (typeof field !== 'string' || field === '') invalid(`${path}.field`, 'is required: the contact field the condition tests');
  const op = node.op;
  if (typeof op !== 'string') invalid(`${path}.op`, 'is required: the operator');
  if (field !== 'activity' && (node.channel !== undefined || node.direction !== undefined)) {
    invalid(`${path}.${node.channel !== undefined ? 'channel' : 'direction'}`, 'only activity conditions take channel and direction');
  }
  const value = node.value;
  const at = { path, op, value, params };

  if (field === 'first_name' || field === 'last_name' || field === 'email' || field === 'phone') {
    checkOp(at, TEXT_OPS);
    return textCondition(COLUMNS[field]!, at, (v) => (field === 'email' ? v.toLowerCase() : v));
  }
  if (field === 'country') {
    checkOp(at, ENUM_OPS);
    return textCondition(COLUMNS[field]!, at, (v, p) => {
      const code = v.toUpperCase();
      if (!/^[A-Z]{2}$/.test(code)) invalid(p, 'must be an ISO 3166-1 alpha-2 country code');
      return code;
    });
  }
  if (field === 'lifecycle_stage') {
    checkOp(at, ENUM_OPS);
    return textCondition(COLUMNS[field]!, at, (v, p) => {
      if (!(LIFECYCLE_STAGES as readonly string[]).includes(v)) invalid(p, 'is not a lifecycle stage', LIFECYCLE_STAGES);
      return v;
    });
  }
  if (field === 'tags') {
    checkOp(at, TAG_OPS);
    switch (op) {
      case 'is_empty': noValue(at); return `c.tags = '[]'::jsonb`;
      case 'is_not_empty': noValue(at); return `c.tags <> '[]'::jsonb`;
      case 'contains': params.push(JSON.stringify([tagValue(value, `${path}.value`)])); return 'c.tags @> ?::jsonb';
      case 'not_contains': params.push(JSON.stringify([tagValue(value, `${path}.value`)])); return 'not (c.tags @> ?::jsonb)';
      default: {
        const tags = stringList(value, `${path}.value`).map((t, i) => tagValue(t, `${path}.value.${i}`));
        const parts = tags.map((t) => { params.push(JSON.stringify([t])); return 'c.tags @> ?::jsonb'; });
        return `(${parts.join(op === 'contains_any' ? ' or ' : ' and ')})`;
      }
    }
  }
  if (field.startsWith('metadata.')) {
    checkOp(at, META_OPS);
    const keys = field.slice('metadata.'.length).split('.');
    if (keys.length > 8 || !keys.every((k) => METADATA_KEY.test(k))) invalid(`${path}.field`, 'metadata paths are dot-separated keys of letters, digits, _ and -');
    if (state.isPhiKey?.(keys[0]!)) {
      throw new ServiceError('VALIDATION_ERROR', `${path}.field: metadata.${keys[0]} holds PHI and is stored encrypted in HIPAA mode; segments cannot filter on it`, {
        field: `${path}.field`, reason: 'phi_metadata', metadata_key: keys[0],
      });
    }
    const holes = keys.map(() => '?').join(', ');
    const json = () => { params.push(...keys); return `jsonb_extract_path(c.metadata, ${holes})`; };
    const text = () => { params.push(...keys); return `jsonb_extract_path_text(c.metadata, ${holes})`; };
    switch (op) {
      case 'exists': noValue(at); return `${json()} is not null`;
      case 'not_exists': noValue(at); return `${json()} is null`;
      case 'eq': case 'neq': {
        const lhs = json();
        params.push(JSON.stringify(scalar(value, `${path}.value`)));
        return op === 'eq' ? `${lhs} = ?::jsonb` : `${lhs} is distinct from ?::jsonb`;
      }
      case 'in': case 'not_in': {
        const values = list(value, `${path}.value`).map((v, i) => scalar(v, `${path}.value.${i}`));
        const lhs = json();
        params.push(JSON.stringify(values));
        // Containment of [v] in the value array compares the element as JSON (types included).
        return op === 'in' ? `coalesce(jsonb_build_array(${lhs}) <@ ?::jsonb, false)` : `not coalesce(jsonb_build_array(${lhs}) <@ ?::jsonb, false)`;
      }
      case 'contains': {
        if (typeof value !== 'string' || value === '') invalid(`${path}.value`, 'must be a non-empty string');
        const lhs = text();
        params.push(`%${escapeLike(value.toLowerCase())}%`);
        return `lower(${lhs}) like ?`;
      }
      default: {
        if (typeof value !== 'number' || !Number.isFinite(value)) invalid(`${path}.value`, 'must be a number');
        const typed = json();
        const lhs = text();
        params.push(value);
        const sign = { gt: '>', gte: '>=', lt: '<', lte: '<=' }[op as 'gt' | 'gte' | 'lt' | 'lte'];
        return `(jsonb_typeof(${typed}) = 'number' and (${lhs})::numeric ${sign} ?)`;
      }
    }
  }
  if (field.startsWith('consent.')) {
    const channel = field.slice('consent.'.length);
    if (!(CONSENT_CHANNELS as readonly string[]).includes(channel)) invalid(`${path}.field`, 'is not a consent channel', CONSENT_CHANNELS.map((c) => `consent.${c}`));
    checkOp(at, CONSENT_OPS);
    const status = (v: unknown, p: string) => {
      if (typeof v !== 'string' || !(CONSENT_STATUSES as readonly string[]).includes(v)) invalid(p, 'is not a consent status', CONSENT_STATUSES);
      return v;
    };
    const values = op === 'in' || op === 'not_in' ? list(value, `${path}.value`).map((v, i) => status(v, `${path}.value.${i}`)) : [status(value, `${path}.value`)];
    params.push(channel, values);
    return `${op === 'neq' || op === 'not_in' ? 'not ' : ''}(coalesce(c.consent -> ? ->> 'status', 'unknown') = any(?::text[]))`;
  }
  if (field === 'created_at' || field === 'updated_at') {
    checkOp(at, DATE_OPS);
    const column = COLUMNS[field]!;
    if (op === 'before' || op === 'after') {
      const d = typeof value === 'string' && /^\d{4}-\d{2}-\d{2}/.test(value) ? new Date(value) : undefined;
      if (!d || Number.isNaN(d.getTime())) invalid(`${path}.value`, 'must be an ISO 8601 date or date-time');
      params.push(d);
      return `${column} ${op === 'before' ? '<' : '>='} ?`;
    }
    params.push(new Date(now.getTime() - days(value, `${path}.value`) * DAY_MS));
    return `${column} ${op === 'within_days' ? '>=' : '<'} ?`;
  }
  if (field === 'activity') {
    checkOp(at, ACTIVITY_OPS);
    params.push(new Date(now.getTime() - days(value, `${path}.value`) * DAY_MS));
    let extra = '';
    if (node.channel !== undefined) {
      if (typeof node.channel !== 'string' || !(ACTIVITY_CHANNELS as readonly string[]).includes(node.channel)) invalid(`${path}.channel`, 'is not a messaging channel', ACTIVITY_CHANNELS);
      params.push(node.channel);
      extra += ' and m.channel = ?';
    }
    if (node.direction !== undefined) {
      if (node.direction !== 'inbound' && node.direction !== 'outbound') invalid(`${path}.direction`, 'must be inbound or outbound', ['inbound', 'outbound']);
      params.push(node.direction);
      extra += ' and m.direction = ?';
    }
    const exists = `exists (select 1 from messages m where m.organization_id = c.organization_id and m.mode = c.mode and m.created_at >= ?${extra}`
      + ` and (m."from" in (c.phone, c.email) or m."to" in (c.phone, c.email)))`;
    return op === 'within_days' ? exists : `not ${exists}`;
  }
  return invalid(`${path}.field`, `unknown field ${field}`, [...Object.keys(COLUMNS), 'tags', 'metadata.<path>', 'consent.<channel>', 'activity']);
}

type At = { path: string; op: string; value: unknown; params: unknown[] };

function checkOp(at: At, ops: readonly string[]): void {
  if (!ops.includes(at.op)) invalid(`${at.path}.op`, `unknown operator ${at.op} for this field`, ops);
}

function noValue(at: At): void {
  if (at.value !== undefined && at.value !== null) invalid(`${at.path}.value`, `${at.op} takes no value`);
}

function textCondition(column: string, at: At, normalize: (v: string, path: string) => string): string {
  const { op, value, path, params } = at;
  const str = (v: unknown, p: string) => {
    if (typeof v !== 'string' || v === '') invalid(p, 'must be a non-empty string');
    return normalize(v, p);
  };
  switch (op) {
    case 'exists': noValue(at); return `${column} is not null`;
    case 'not_exists': noValue(at); return `${column} is null`;
    case 'eq': params.push(str(value, `${path}.value`)); return `${column} = ?`;
    case 'neq': params.push(str(value, `${path}.value`)); return `${column} is distinct from ?`;
    case 'in': case 'not_in': {
      params.push(list(value, `${path}.value`).map((v, i) => str(v, `${path}.value.${i}`)));
      return op === 'in' ? `${column} = any(?::text[])` : `(${column} is null or not (${column} = any(?::text[])))`;
    }
    default: {
      const v = escapeLike(str(value, `${path}.value`).toLowerCase());
      params.push(op === 'contains' ? `%${v}%` : op === 'starts_with' ? `${v}%` : `%${v}`);
      return `lower(${column}) like ?`;
    }
  }
}

function list(value: unknown, path: string): unknown[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 100) invalid(path, 'must be an array of 1 to 100 values');
  return value;
}

function stringList(value: unknown, path: string): string[] {
  return list(value, path).map((v, i) => {
    if (typeof v !== 'string') invalid(`${path}.${i}`, 'must be a string');
    return v;
  });
}

function tagValue(value: unknown, path: string): string {
  if (typeof value !== 'string' || value.trim() === '') invalid(path, 'must be a non-empty tag');
  return value.trim();
}

function scalar(value: unknown, path: string): string | number | boolean {
  if (typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) return value;
  return invalid(path, 'must be a string, number or boolean');
}

function days(value: unknown, path: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 3650) invalid(path, 'must be a whole number of days from 1 to 3650');
  return value;
}
