/**
 * Conditions and templates over an execution's context, without eval. Conditions use the segment
 * rule language of contacts: a group `{ "all": [...] }` / `{ "any": [...] }` of groups and
 * conditions `{ "field", "op", "value" }`, where `field` is a dot path into the context
 * (`input.status`, `steps.check.output.status`, `trigger.type`). Templates write `{{path}}`.
 */
import { ServiceError } from '../../platform/errors.ts';

export const CONDITION_OPS = [
  'eq', 'neq', 'in', 'not_in', 'gt', 'gte', 'lt', 'lte', 'contains', 'not_contains', 'starts_with', 'ends_with', 'exists', 'not_exists',
] as const;
export type ConditionOp = (typeof CONDITION_OPS)[number];
export type Rule = { all: Rule[] } | { any: Rule[] } | { field: string; op: ConditionOp; value?: unknown };

export const MAX_RULE_DEPTH = 5;
export const MAX_RULE_CONDITIONS = 50;
const PATH = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const NO_VALUE: readonly string[] = ['exists', 'not_exists'];
const LIST_VALUE: readonly string[] = ['in', 'not_in'];

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Where a rule error is reported: the node and the JSON path of the offending field. */
export type RuleErrorAt = { node?: string; field: string };

function invalid(at: RuleErrorAt, message: string, expected?: unknown): never {
  throw new ServiceError('VALIDATION_ERROR', `${at.field}: ${message}`, { ...(at.node ? { node: at.node } : {}), field: at.field, ...(expected !== undefined ? { expected } : {}) });
}

/** Validates a rule tree; errors name the exact path (`definition.nodes.2.config.rules.all.0.op`). */
export function checkRules(rules: unknown, field: string, node?: string): Rule {
  const state = { conditions: 0 };
  checkNode(rules, field, node, 1, state, true);
  return rules as Rule;
}

function checkNode(rule: unknown, field: string, node: string | undefined, depth: number, state: { conditions: number }, root = false): void {
  const at = { node, field };
  if (!isObject(rule)) invalid(at, 'must be an object: a group { all: [...] } / { any: [...] } or a condition { field, op, value }');
  if ('all' in rule || 'any' in rule) {
    const keys = Object.keys(rule);
    if (keys.length !== 1) invalid({ node, field: `${field}.${keys.find((k) => k !== 'all' && k !== 'any') ?? keys[0]}` }, 'a group has exactly one key, all or any', ['all', 'any']);
    if (depth > MAX_RULE_DEPTH) invalid(at, `groups nest at most ${MAX_RULE_DEPTH} deep`);
    const kind = keys[0] as 'all' | 'any';
    const items = rule[kind];
    if (!Array.isArray(items) || items.length === 0) invalid({ node, field: `${field}.${kind}` }, 'must be a non-empty array of groups and conditions');
    items.forEach((item, i) => checkNode(item, `${field}.${kind}.${i}`, node, depth + 1, state));
    return;
  }
  if (root && !('field' in rule)) invalid(at, 'must be a group { all: [...] } / { any: [...] } or a condition { field, op, value }');
  if (++state.conditions > MAX_RULE_CONDITIONS) invalid(at, `rules have at most ${MAX_RULE_CONDITIONS} conditions`);
  for (const key of Object.keys(rule)) if (!['field', 'op', 'value'].includes(key)) invalid({ node, field: `${field}.${key}` }, 'unknown key in a condition', ['field', 'op', 'value']);
  if (typeof rule.field !== 'string' || !PATH.test(rule.field)) invalid({ node, field: `${field}.field` }, 'must be a dot path into the execution context, such as input.status');
  if (typeof rule.op !== 'string' || !(CONDITION_OPS as readonly string[]).includes(rule.op)) invalid({ node, field: `${field}.op` }, 'is not a known operator', CONDITION_OPS);
  const valueAt = { node, field: `${field}.value` };
  if (NO_VALUE.includes(rule.op)) {
    if (rule.value !== undefined) invalid(valueAt, `${rule.op} takes no value`);
  } else if (LIST_VALUE.includes(rule.op)) {
    if (!Array.isArray(rule.value) || rule.value.length === 0 || rule.value.length > 100) invalid(valueAt, `${rule.op} takes a non-empty array of up to 100 values`);
  } else if (rule.value === undefined || (rule.value !== null && typeof rule.value === 'object')) {
    invalid(valueAt, `${rule.op} takes a string, number, boolean or null`);
  }
}

/** The value at a dot path (undefined when any part is missing). */
export function lookup(context: unknown, path: string): unknown {
  let value: unknown = context;
  for (const key of path.split('.')) {
    if (Array.isArray(value) && /^\d+$/.test(key)) value = value[Number(key)];
    else if (isObject(value)) value = Object.hasOwn(value, key) ? value[key] : undefined;
    else return undefined;
  }
  return value;
}

const comparable = (a: unknown, b: unknown): [number, number] | [string, string] | undefined => {
  if (typeof a === 'number' && typeof b === 'number') return [a, b];
  if (typeof a === 'string' && typeof b === 'number' && a.trim() !== '' && Number.isFinite(Number(a))) return [Number(a), b];
  if (typeof a === 'string' && typeof b === 'string') return [a, b];
  return undefined;
};

/** Loose equality for context values: numbers given as strings compare as numbers. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'string' && typeof b === 'number') return a.trim() !== '' && Number(a) === b;
  if (typeof a === 'number' && typeof b === 'string') return b.trim() !== '' && Number(b) === a;
  return false;
}

/** Evaluates a checked rule tree against the context. */
export function evaluate(rule: Rule, context: unknown): boolean {
  if ('all' in rule) return rule.all.every((r) => evaluate(r, context));
  if ('any' in rule) return rule.any.some((r) => evaluate(r, context));
  const actual = lookup(context, rule.field);
  const value = rule.value;
  switch (rule.op) {
    case 'exists': return actual !== undefined && actual !== null;
    case 'not_exists': return actual === undefined || actual === null;
    case 'eq': return same(actual, value);
    case 'neq': return !same(actual, value);
    case 'in': return (value as unknown[]).some((v) => same(actual, v));
    case 'not_in': return !(value as unknown[]).some((v) => same(actual, v));
    case 'gt': case 'gte': case 'lt': case 'lte': {
      const pair = comparable(actual, value);
      if (!pair) return false;
      const [a, b] = pair;
      return rule.op === 'gt' ? a > b : rule.op === 'gte' ? a >= b : rule.op === 'lt' ? a < b : a <= b;
    }
    case 'contains': case 'not_contains': {
      const has = Array.isArray(actual) ? actual.some((v) => same(v, value)) : typeof actual === 'string' && typeof value === 'string' && actual.toLowerCase().includes(value.toLowerCase());
      return rule.op === 'contains' ? has : !has;
    }
    case 'starts_with': return typeof actual === 'string' && typeof value === 'string' && actual.toLowerCase().startsWith(value.toLowerCase());
    case 'ends_with': return typeof actual === 'string' && typeof value === 'string' && actual.toLowerCase().endsWith(value.toLowerCase());
  }
}

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

/** `{{path}}` placeholders replaced by context values (objects as JSON, missing values as ''). */
export function render(template: string, context: unknown): string {
  return template.replace(PLACEHOLDER, (_m, path: string) => {
    const v = lookup(context, path);
    if (v === undefined || v === null) return '';
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  });
}

/** Renders every string inside a JSON value; a string that is exactly one placeholder keeps the value's type. */
export function renderDeep(value: unknown, context: unknown): unknown {
  if (typeof value === 'string') {
    const whole = /^\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}$/.exec(value);
    if (whole) return lookup(context, whole[1]!) ?? null;
    return render(value, context);
  }
  if (Array.isArray(value)) return value.map((v) => renderDeep(v, context));
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderDeep(v, context)]));
  return value;
}

/** Whether a string holds at least one placeholder. */
export const hasPlaceholder = (s: string) => /\{\{\s*[A-Za-z0-9_.-]+\s*\}\}/.test(s);
