/**
 * Input validation of every operation, once for both surfaces (`parseInput` in operations.ts):
 *
 * - **Unknown fields are refused.** Operation schemas are plain zod objects (which would strip
 *   what they do not know); {@link unknownFields} walks the schema beside the input and names
 *   every key no object of the schema declares, at any depth (objects inside lists, unions, JSON
 *   values the schema describes), with the closest known name when one is a likely slip. Objects
 *   that declare a `catchall` (open maps, `z.record`) take any key.
 * - **Every problem in one answer**, each in plain words with the allowed values or an example
 *   ({@link problemsOf}), instead of zod's "expected record, received array"; a money field says
 *   its unit (`cents()` in inputs.ts registers it).
 * - **One error**: {@link validationError} — the first problem's code (MISSING_REQUIRED_FIELD,
 *   VALIDATION_ERROR or a schema's own spec code such as INVALID_PHONE_NUMBER), `details.field` of
 *   the first problem as before, and `details.errors`: every problem as `{ field, code, message,
 *   expected?, example?, unit?, did_you_mean?, value? }`.
 *
 * A refinement that runs only once an object's fields are valid (a transform's checks) is reported
 * once they are: zod does not run it on a failed object.
 */
import { z } from 'zod';
import { ServiceError, type ErrorCode } from './errors.ts';
import { closest } from './suggest.ts';

/** Codes a field problem may carry: the spec's field codes a schema raises through `params.code`. */
export const FIELD_CODES = [
  'VALIDATION_ERROR', 'MISSING_REQUIRED_FIELD', 'INVALID_PHONE_NUMBER', 'INVALID_EMAIL', 'INVALID_WEBHOOK_URL', 'MESSAGE_TOO_LONG',
  'MEDIA_TOO_LARGE', 'INVALID_TEMPLATE',
] as const satisfies readonly ErrorCode[];
export type FieldCode = (typeof FIELD_CODES)[number];

export type InputProblem = {
  /** Dotted path as the client sent it (`to`, `cards.2.title`). */
  field: string;
  code: FieldCode;
  /** Plain words, naming the field. */
  message: string;
  /** The allowed values, a type, or a bound (`>= 100`). */
  expected?: unknown;
  example?: unknown;
  unit?: string;
  did_you_mean?: string;
  /** The value sent, for a value outside an enum (short text only). */
  value?: unknown;
};

/** What a schema part tells a client beyond its type: its unit (money in cents) and an example. */
export type InputHint = { unit?: string; example?: unknown };
/** Schema parts with a hint (see `cents()` in inputs.ts). */
export const inputHints = z.registry<InputHint>();

// ---------------------------------------------------------------------------------------------
// Reading zod schemas
// ---------------------------------------------------------------------------------------------

type Schema = z.core.$ZodType;
type Def = { type: string } & Record<string, unknown>;
const defOf = (s: Schema): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

const WRAPPERS = new Set(['optional', 'nullable', 'default', 'prefault', 'catch', 'readonly', 'nonoptional', 'success']);

/** The schema a client's value meets first: through wrappers, lazies and the input side of pipes. */
function unwrap(s: Schema): Schema {
  for (let i = 0; i < 50; i++) {
    const def = defOf(s);
    if (WRAPPERS.has(def.type)) s = def.innerType as Schema;
    else if (def.type === 'lazy') s = (def.getter as () => Schema)();
    else if (def.type === 'pipe') s = defOf(def.in as Schema).type === 'transform' ? def.out as Schema : def.in as Schema;
    else return s;
  }
  return s;
}

/** An object's fields (an intersection's: both sides'); `open`: it takes keys it does not declare. */
type Shape = { fields: Map<string, Schema[]>; open: boolean };

function shapeOf(s: Schema): Shape | undefined {
  const u = unwrap(s);
  const def = defOf(u);
  if (def.type === 'object') {
    const fields = new Map<string, Schema[]>();
    for (const [k, v] of Object.entries(def.shape as Record<string, Schema>)) fields.set(k, [v]);
    // A catchall of `never` (strictObject) makes zod report unknown keys itself.
    return { fields, open: def.catchall !== undefined };
  }
  if (def.type === 'intersection') {
    const left = shapeOf(def.left as Schema);
    const right = shapeOf(def.right as Schema);
    if (!left || !right) return undefined;
    const fields = new Map(left.fields);
    for (const [k, v] of right.fields) fields.set(k, [...(fields.get(k) ?? []), ...v]);
    return { fields, open: left.open || right.open };
  }
  return undefined;
}

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The part of `schema` at `path` (undefined where the schema does not say). */
export function schemaAt(schema: Schema, path: readonly (string | number)[]): Schema | undefined {
  let s: Schema | undefined = schema;
  for (const key of path) {
    if (!s) return undefined;
    const u = unwrap(s);
    const def = defOf(u);
    const shape = shapeOf(u);
    if (shape) s = shape.fields.get(String(key))?.[0];
    else if (def.type === 'array') s = def.element as Schema;
    else if (def.type === 'record') s = def.valueType as Schema;
    else if (def.type === 'tuple') s = (def.items as Schema[])[Number(key)] ?? (def.rest as Schema | undefined);
    else if (def.type === 'union') s = (def.options as Schema[]).map((o) => schemaAt(o, [key])).find((x) => x !== undefined);
    else return undefined;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Unknown fields
// ---------------------------------------------------------------------------------------------

/** A key no object of the schema declares where it was sent, and the names known there. */
export type UnknownField = { path: string[]; known: string[] };

/** Every key of `value` that `schema` does not declare, at any depth. */
export function unknownFields(schema: Schema, value: unknown): UnknownField[] {
  const out: UnknownField[] = [];
  walk(schema, value, [], out, 0);
  return out;
}

function walk(schema: Schema, value: unknown, path: string[], out: UnknownField[], depth: number): void {
  if (value === undefined || value === null || depth > 64) return;
  const s = unwrap(schema);
  const def = defOf(s);
  const shape = shapeOf(s);
  if (shape) {
    if (!isRecord(value)) return;
    const known = [...shape.fields.keys()];
    for (const key of Object.keys(value)) {
      const fields = shape.fields.get(key);
      if (!fields) {
        if (!shape.open) out.push({ path: [...path, key], known });
        continue;
      }
      // A key both sides of an intersection declare is reported once.
      const seen = new Set<string>();
      for (const f of fields) {
        const found: UnknownField[] = [];
        walk(f, value[key], [...path, key], found, depth + 1);
        for (const u of found) {
          const id = u.path.join('\u0000');
          if (!seen.has(id)) out.push(u);
          seen.add(id);
        }
      }
    }
    return;
  }
  switch (def.type) {
    case 'array':
      if (Array.isArray(value)) value.forEach((v, i) => walk(def.element as Schema, v, [...path, String(i)], out, depth + 1));
      return;
    case 'tuple':
      if (Array.isArray(value)) {
        const items = def.items as Schema[];
        value.forEach((v, i) => {
          const item = items[i] ?? (def.rest as Schema | undefined);
          if (item) walk(item, v, [...path, String(i)], out, depth + 1);
        });
      }
      return;
    case 'record':
      if (isRecord(value)) for (const [k, v] of Object.entries(value)) walk(def.valueType as Schema, v, [...path, k], out, depth + 1);
      return;
    case 'union': {
      // The option the value is for: among those it passes (else all), the one it fits best.
      const options = def.options as Schema[];
      const passing = options.filter((o) => z.safeParse(o, value).success);
      let best: UnknownField[] | undefined;
      for (const o of passing.length ? passing : options) {
        const found: UnknownField[] = [];
        walk(o, value, path, found, depth + 1);
        if (!best || found.length < best.length) best = found;
      }
      out.push(...(best ?? []));
      return;
    }
    default:
  }
}

// ---------------------------------------------------------------------------------------------
// Problems in plain words
// ---------------------------------------------------------------------------------------------

/** Returned by the parse-level error map: zod had no message of the schema's own for the issue. */
export const NO_SCHEMA_MESSAGE = '\u0000default';

const TYPE_WORDS: Record<string, string> = {
  string: 'text', number: 'a number', int: 'a whole number', bigint: 'a whole number', boolean: 'true or false',
  object: 'an object', record: 'an object', map: 'an object', array: 'a list', tuple: 'a list', set: 'a list',
  date: 'a date', file: 'a file', null: 'null', nan: 'a number',
};
const TYPE_EXAMPLES: Record<string, unknown> = {
  number: 10, int: 10, bigint: 10, boolean: true, object: { key: 'value' }, record: { key: 'value' }, array: ['…'], tuple: ['…'], set: ['…'],
};

/** `a number`, or `a whole number` for a number schema that takes integers only. */
function typeWords(expected: string | undefined, at: Schema | undefined): string {
  const checks = at ? (defOf(unwrap(at)).checks as { _zod: { def: { check?: string; format?: string } } }[] | undefined) : undefined;
  if (expected === 'number' && checks?.some((c) => c._zod.def.check === 'number_format' && c._zod.def.format?.includes('int'))) return 'a whole number';
  return TYPE_WORDS[expected ?? ''] ?? expected ?? 'something else';
}

function kindOf(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return 'text';
  if (typeof v === 'number') return Number.isFinite(v) ? 'a number' : String(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'object') return 'an object';
  return typeof v;
}

const FORMATS: Record<string, { words: string; example?: string }> = {
  email: { words: 'an email address', example: 'ada@example.com' },
  url: { words: 'a URL', example: 'https://example.com/path' },
  datetime: { words: 'an ISO 8601 date-time', example: '2026-01-31T12:00:00Z' },
  date: { words: 'an ISO 8601 date', example: '2026-01-31' },
  time: { words: 'an ISO 8601 time', example: '12:00:00' },
  uuid: { words: 'a UUID' },
  e164: { words: 'an E.164 phone number', example: '+14155550123' },
  ipv4: { words: 'an IPv4 address', example: '203.0.113.7' },
  ipv6: { words: 'an IPv6 address', example: '2001:db8::1' },
};

const show = (v: unknown) => (typeof v === 'string' ? JSON.stringify(v) : String(v));
const quoteList = (values: readonly unknown[]) => values.map(show).join(', ');

type Issue = z.core.$ZodIssue & { input?: unknown; params?: { code?: string } };

/** The issues of a failed parse as problems, in the order zod found them; `prefix` is the path of a union the issues came from. */
export function problemsOf(issues: readonly Issue[], schema: Schema, prefix: readonly (string | number)[] = []): InputProblem[] {
  return issues.flatMap((issue) => problemOf(issue, schema, [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))]));
}

function problemOf(issue: Issue, schema: Schema, path: (string | number)[]): InputProblem[] {
  const field = path.map(String).join('.');
  const name = field || 'the input';
  const own = issue.message !== NO_SCHEMA_MESSAGE ? issue.message : undefined;
  const last = String(path[path.length - 1] ?? '');
  /** The schema's own words, with the field's name in front unless they start with it. */
  const ownNamed = own && (!field || own.startsWith(field) || (last !== '' && own.startsWith(`${last} `))) ? own : own ? `${name}: ${own}` : undefined;
  const hint = hintAt(schema, path);
  const unit = hint?.unit ? ` ${hint.unit}` : '';
  const withHint = (p: InputProblem): InputProblem => ({ ...p, ...(hint?.unit ? { unit: hint.unit } : {}), ...(hint?.example !== undefined && p.example === undefined ? { example: hint.example } : {}) });
  const code = issue.params?.code;
  if (code && (FIELD_CODES as readonly string[]).includes(code)) {
    return [{ field, code: code as FieldCode, message: ownNamed ?? `${name} is not valid` }];
  }
  switch (issue.code) {
    case 'invalid_type':
    case 'invalid_value': {
      const values = issue.code === 'invalid_value' ? issue.values : undefined;
      const expectedType = issue.code === 'invalid_type' ? issue.expected : undefined;
      if (issue.input === undefined && field) {
        const expected = values ?? (expectedType ? TYPE_WORDS[expectedType] ?? expectedType : undefined);
        const detail = values ? ` (one of: ${quoteList(values)})`
          : hint?.unit ? `: ${typeWords(expectedType, schemaAt(schema, path))} of${unit}${hint.example !== undefined ? `, for example ${JSON.stringify(hint.example)}` : ''}` : '';
        // A schema's own words for it when they name the field (`priceId is required (or price_id)`).
        const message = own?.startsWith(`${field} `) ? own : `${field} is required${detail}`;
        return [withHint({ field, code: 'MISSING_REQUIRED_FIELD', message, ...(expected !== undefined ? { expected } : {}) })];
      }
      if (values) {
        const near = typeof issue.input === 'string' && values.every((v) => typeof v === 'string') ? closest(issue.input, values as string[]) : undefined;
        const sent = typeof issue.input === 'string' && issue.input.length <= 64 ? { value: issue.input } : {};
        const message = own && !own.startsWith('Invalid') ? ownNamed!
          : values.length === 1 ? `${name} must be ${show(values[0])}` : `${name} must be one of: ${quoteList(values)}${near ? ` (did you mean ${show(near)}?)` : ''}`;
        return [{ field, code: 'VALIDATION_ERROR', message, expected: values, ...sent, ...(near ? { did_you_mean: near } : {}) }];
      }
      const words = `${typeWords(expectedType, schemaAt(schema, path))}${hint?.unit ? ` of${unit}` : ''}`;
      const example = hint?.example ?? TYPE_EXAMPLES[expectedType ?? ''];
      const got = typeof issue.input === 'number' && Number.isFinite(issue.input) ? `; it is ${issue.input}` : `, not ${kindOf(issue.input)}`;
      const message = ownNamed ?? `${name} must be ${words}${got}${example !== undefined ? `; for example ${JSON.stringify(example)}` : ''}`;
      return [withHint({ field, code: 'VALIDATION_ERROR', message, expected: words, ...(example !== undefined ? { example } : {}) })];
    }
    case 'too_small':
    case 'too_big': {
      const small = issue.code === 'too_small';
      const bound = Number(small ? (issue as { minimum: number | bigint }).minimum : (issue as { maximum: number | bigint }).maximum);
      const inclusive = (issue as { inclusive?: boolean }).inclusive !== false;
      const exact = (issue as { exact?: boolean }).exact === true;
      const origin = (issue as { origin?: string }).origin;
      const sized = origin === 'string' ? 'characters' : origin === 'array' || origin === 'set' ? (bound === 1 ? 'item' : 'items') : origin === 'file' ? 'bytes' : undefined;
      const sentSize = origin === 'string' && typeof issue.input === 'string' ? `; it has ${issue.input.length}`
        : Array.isArray(issue.input) ? `; it has ${issue.input.length}` : typeof issue.input === 'number' ? `; it is ${issue.input}` : '';
      let message: string;
      if (own && !own.startsWith('Too ')) message = ownNamed!;
      else if (sized === 'characters' && small && bound === 1) message = `${name} must not be empty`;
      else if (sized) message = `${name} must have ${exact ? 'exactly' : small ? 'at least' : 'at most'} ${bound.toLocaleString('en-US')} ${sized}${sentSize}`;
      else message = `${name} must be ${exact ? 'exactly' : small ? (inclusive ? 'at least' : 'greater than') : (inclusive ? 'at most' : 'less than')} ${bound}${unit}${sentSize}`;
      const expected = `${exact ? '=' : small ? (inclusive ? '>=' : '>') : (inclusive ? '<=' : '<')} ${bound}${sized ? ` ${sized}` : unit}`;
      return [withHint({ field, code: 'VALIDATION_ERROR', message, expected })];
    }
    case 'invalid_format': {
      const format = (issue as { format: string }).format;
      const known = FORMATS[format];
      if (own && !own.startsWith('Invalid')) return [{ field, code: 'VALIDATION_ERROR', message: ownNamed!, expected: known?.words ?? format }];
      if (format === 'starts_with') return [{ field, code: 'VALIDATION_ERROR', message: `${name} must start with ${show((issue as { prefix?: string }).prefix)}` }];
      if (format === 'regex') return [{ field, code: 'VALIDATION_ERROR', message: `${name} does not have the expected form (${String((issue as { pattern?: unknown }).pattern)})`, expected: String((issue as { pattern?: unknown }).pattern) }];
      return [{
        field, code: 'VALIDATION_ERROR', message: `${name} must be ${known?.words ?? `a valid ${format}`}${known?.example ? `, for example ${show(known.example)}` : ''}`,
        expected: known?.words ?? format, ...(known?.example ? { example: known.example } : {}),
      }];
    }
    case 'not_multiple_of':
      return [{ field, code: 'VALIDATION_ERROR', message: own && !own.startsWith('Invalid') ? ownNamed! : `${name} must be a multiple of ${String(issue.divisor)}`, expected: `multiple of ${String(issue.divisor)}` }];
    case 'unrecognized_keys': {
      const known = [...shapeOf(schemaAt(schema, path) ?? z.never())?.fields.keys() ?? []];
      return issue.keys.map((key, i) => unknownProblem([...path.map(String), key], known, i < MAX_LISTED_PROBLEMS));
    }
    case 'invalid_union': {
      const u = issue as z.core.$ZodIssueInvalidUnion & { note?: string; discriminator?: string; options?: unknown[] };
      if (u.note === 'No matching discriminator' && u.options) {
        const sent = (issue.input as Record<string, unknown> | undefined)?.[u.discriminator ?? ''];
        if (sent === undefined) return [{ field, code: 'MISSING_REQUIRED_FIELD', message: `${field || u.discriminator} is required (one of: ${quoteList(u.options)})`, expected: u.options }];
        const near = typeof sent === 'string' ? closest(sent, u.options.filter((o): o is string => typeof o === 'string')) : undefined;
        return [{ field, code: 'VALIDATION_ERROR', message: `${name} must be one of: ${quoteList(u.options)}${near ? ` (did you mean ${show(near)}?)` : ''}`, expected: u.options, ...(near ? { did_you_mean: near } : {}) }];
      }
      // The option the value was meant for: one whose type it has, with the fewest problems.
      const fits = u.errors.filter((errs) => !errs.some((e) => e.path.length === 0 && e.code === 'invalid_type'));
      if (fits.length > 0) {
        const best = fits.reduce((a, b) => (b.length < a.length ? b : a));
        return problemsOf(best as Issue[], schema, path);
      }
      const types = [...new Set(u.errors.flatMap((errs) => errs.filter((e) => e.path.length === 0 && e.code === 'invalid_type').map((e) => TYPE_WORDS[(e as { expected: string }).expected] ?? (e as { expected: string }).expected)))];
      return [{ field, code: 'VALIDATION_ERROR', message: `${name} must be ${types.join(' or ') || 'something else'}, not ${kindOf(issue.input)}`, expected: types.join(' or ') }];
    }
    case 'invalid_key':
    case 'invalid_element': {
      const inner = (issue as { issues?: Issue[] }).issues ?? [];
      if (inner.length) return problemsOf(inner, schema, issue.code === 'invalid_element' ? [...path, String((issue as { key?: unknown }).key)] : path);
      return [{ field, code: 'VALIDATION_ERROR', message: `${name} has an invalid ${issue.code === 'invalid_key' ? 'key' : 'value'}` }];
    }
    default:
      return [{ field, code: 'VALIDATION_ERROR', message: ownNamed ?? `${name} is not valid` }];
  }
}

function hintAt(schema: Schema, path: readonly (string | number)[]): InputHint | undefined {
  let s = schemaAt(schema, path);
  for (let i = 0; s && i < 10; i++) {
    const hint = inputHints.get(s);
    if (hint) return hint;
    const def = defOf(s);
    s = WRAPPERS.has(def.type) ? def.innerType as Schema : def.type === 'pipe' ? def.in as Schema : undefined;
  }
  return undefined;
}

/**
 * At most this many problems are listed in an error (its message and `details.errors`; past it,
 * `details.problem_count` says how many there were), and only these look for a "did you mean": an
 * input with tens of thousands of unknown keys costs no more than one with a few.
 */
export const MAX_LISTED_PROBLEMS = 20;

/** `Received unknown parameter: media_urls`, with the closest known name when one is a likely slip (and `suggest`). */
export function unknownProblem(path: readonly string[], known: readonly string[], suggest = true): InputProblem {
  const field = path.join('.');
  const near = suggest ? closest(path[path.length - 1]!, known) : undefined;
  return {
    field, code: 'VALIDATION_ERROR',
    message: `Received unknown parameter: ${field}${near ? ` (did you mean ${[...path.slice(0, -1), near].join('.')}?)` : ''}`,
    ...(near ? { did_you_mean: [...path.slice(0, -1), near].join('.') } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// The error
// ---------------------------------------------------------------------------------------------

/** One error for every problem of a request (see the file comment); `problems` must not be empty. */
export function validationError(problems: readonly InputProblem[]): ServiceError {
  const first = problems[0]!;
  const listed = problems.slice(0, MAX_LISTED_PROBLEMS);
  const more = problems.length - listed.length;
  const message = problems.length === 1 ? first.message : `${problems.length} problems: ${listed.map((p) => p.message).join('; ')}${more ? `; and ${more} more` : ''}`;
  const { field, expected, did_you_mean, value } = first;
  return new ServiceError(first.code, message, {
    ...(field ? { field } : {}),
    ...(expected !== undefined ? { expected } : {}),
    ...(did_you_mean !== undefined ? { did_you_mean } : {}),
    ...(value !== undefined ? { value } : {}),
    errors: listed,
    ...(more ? { problem_count: problems.length } : {}),
  });
}

/** The problems a `validationError` carries (empty for any other error). */
export function problemsIn(e: ServiceError): InputProblem[] {
  return Array.isArray(e.details.errors) ? e.details.errors as InputProblem[] : [];
}
