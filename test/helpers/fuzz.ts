/**
 * Generators for the fuzz harness (test/fuzz.test.ts): hostile values (unicode edge cases, huge
 * and deep values, wrong types), inputs shaped after an OpenAPI JSON Schema or a GraphQL input type
 * with hostile values mixed in, and a path-segment encoder that keeps lone surrogates hostile.
 */
import fc from 'fast-check';
import {
  getNullableType, isEnumType, isInputObjectType, isListType, isNonNullType, isScalarType,
  type GraphQLInputType,
} from 'graphql';

/** Strings a parser, a database or a log line may trip on. */
export const HOSTILE_STRINGS = [
  '', ' ', '\u0000', 'a\u0000b', '\uD800', 'x\uDC00y', '\uDBFF\uDFFF', '\u202Eevil\u202C', 'שלום عربى', '\u200B\u200C\u200D\uFEFF',
  '\u0301\u0301\u0301', '𝕏🏳️‍🌈', '\u2028\u2029', '\r\n\r\nX-Injected: 1', '../../../etc/passwd', '%00', '%2e%2e%2f', "' or 1=1 --", '"; drop table contacts; --',
  '<script>alert(1)</script>', '${jndi:ldap://x}', '{{7*7}}', '__proto__', 'constructor', 'prototype', 'null', 'undefined', 'NaN', '-1', '1e309',
  '9'.repeat(400), 'a'.repeat(70_000), '\uD83D'.repeat(5_000), 'http://127.0.0.1:1/', 'http://169.254.169.254/latest/meta-data/', 'sip:127.0.0.1:5060;transport=tcp',
  'file:///etc/passwd', '+', '+1', '+999999999999999999999', 'a@', '@@', 'é'.normalize('NFD'),
];

const deep = (levels: number): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = i % 2 ? [v] : { a: v };
  return v;
};

/** Any JSON value that is probably of the wrong type, size or shape for where it lands. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 2, arbitrary: fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, -0.0001, 2 ** 31, 2 ** 53 + 1, -(2 ** 63), 1e308, -1e308) },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.constantFrom<unknown>([], {}, [null], { '': '' }, { __proto__: { polluted: 1 } }, JSON.parse('{"__proto__":{"polluted":1}}'), deep(70), deep(400), new Array(2_000).fill('x')) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

export type IdPool = { ours: string[]; theirs: string[]; forged: string[] };

/** An id: one of ours, another tenant's real one, a well-formed unknown one of any prefix, or junk. */
export function idArb(pool: IdPool): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom(...pool.ours) },
    { weight: 3, arbitrary: fc.constantFrom(...pool.theirs) },
    { weight: 2, arbitrary: fc.constantFrom(...pool.forged) },
    { weight: 1, arbitrary: hostileValue },
  );
}

type JsonSchema = Record<string, any>;

/** A value shaped after `schema` (by field name for ids, phones, emails and URLs), with hostile values mixed in. */
export function fromSchema(schema: JsonSchema | undefined, resolve: (s: JsonSchema) => JsonSchema, pool: IdPool, name = '', depth = 0): fc.Arbitrary<unknown> {
  const s = schema ? resolve(schema) : {};
  const hostile = { weight: 1, arbitrary: hostileValue };
  const branches = s.anyOf ?? s.oneOf;
  if (branches && depth < 6) return fc.oneof(...(branches as JsonSchema[]).map((b) => fromSchema(b, resolve, pool, name, depth + 1)));
  if (s.enum) return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...(s.enum as unknown[])) }, hostile);
  if (s.const !== undefined) return fc.oneof({ weight: 3, arbitrary: fc.constant(s.const) }, hostile);
  if (/(^|_)ids?$|Id$|Ids$/.test(name)) {
    const one = idArb(pool);
    return s.type === 'array' ? fc.oneof(fc.array(one, { maxLength: 3 }), hostile) : one;
  }
  const type = Array.isArray(s.type) ? s.type.find((t: string) => t !== 'null') : s.type;
  switch (type) {
    case 'string': {
      const plausible = /phone|^to$|^from$|number|caller/i.test(name) ? fc.constantFrom('+14155550123', '+447700900123', '+15005550006')
        : /email/i.test(name) ? fc.constantFrom('fuzz@example.com', 'a@b.c')
        : /url|uri|webhook/i.test(name) ? fc.constantFrom('https://example.com/hook', 'http://127.0.0.1:1/', 'http://[::ffff:127.0.0.1]/', 'sip:127.0.0.1:5060')
        : s.format === 'date-time' ? fc.constantFrom('2026-01-01T00:00:00Z', '0000-00-00T00:00:00Z', '9999-12-31T23:59:59Z')
        : fc.string({ minLength: s.minLength ?? 0, maxLength: Math.min(s.maxLength ?? 20, 20) });
      const bounds: string[] = [];
      if (typeof s.maxLength === 'number') bounds.push('x'.repeat(s.maxLength), 'x'.repeat(s.maxLength + 1));
      if (typeof s.minLength === 'number' && s.minLength > 0) bounds.push('x'.repeat(s.minLength - 1));
      return fc.oneof({ weight: 3, arbitrary: plausible }, ...(bounds.length ? [{ weight: 1, arbitrary: fc.constantFrom(...bounds) }] : []), hostile);
    }
    case 'integer':
    case 'number': {
      const min = typeof s.minimum === 'number' ? s.minimum : undefined;
      const max = typeof s.maximum === 'number' ? s.maximum : undefined;
      const edges = [min, max, min !== undefined ? min - 1 : -1, max !== undefined ? max + 1 : 2 ** 53, 0, 0.5].filter((v): v is number => v !== undefined);
      return fc.oneof({ weight: 2, arbitrary: fc.integer({ min: Math.max(min ?? -1000, -1e9), max: Math.min(max ?? 1000, 1e9) }) }, { weight: 2, arbitrary: fc.constantFrom(...edges) }, hostile);
    }
    case 'boolean':
      return fc.oneof({ weight: 3, arbitrary: fc.boolean() }, hostile);
    case 'array':
      if (depth > 4) return hostileValue;
      return fc.oneof({ weight: 3, arbitrary: fc.array(fromSchema(s.items, resolve, pool, name, depth + 1), { maxLength: 3 }) }, hostile);
    case 'object':
    default: {
      if (!s.properties || depth > 4) return type === 'object' ? fc.oneof(fc.dictionary(fc.constantFrom(...HOSTILE_STRINGS.slice(0, 12), 'a', 'b'), hostileValue, { maxKeys: 3 }), hostile) : hostileValue;
      return objectFrom(s, resolve, pool, depth);
    }
  }
}

/** An object after `s`: each property present or not, sometimes an unknown extra one. */
function objectFrom(s: JsonSchema, resolve: (s: JsonSchema) => JsonSchema, pool: IdPool, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const props = Object.fromEntries(Object.entries(s.properties as Record<string, JsonSchema>).map(([k, v]) => [k, fromSchema(v, resolve, pool, k, depth + 1)]));
  const required = (s.required as string[] | undefined) ?? [];
  return fc.tuple(
    // Usually with the required fields (so the value reaches past the first check), sometimes without.
    fc.oneof({ weight: 3, arbitrary: fc.record(props, { requiredKeys: required.filter((k) => k in props) }) }, { weight: 1, arbitrary: fc.record(props, { requiredKeys: [] }) }),
    fc.option(fc.tuple(fc.constantFrom('__proto__', 'constructor', 'organization_id', 'id', 'x\u0000', 'extra'), hostileValue), { freq: 4 }),
  ).map(([obj, extra]) => {
    const out: Record<string, unknown> = { ...obj };
    if (extra) Object.defineProperty(out, extra[0], { value: extra[1], enumerable: true, writable: true, configurable: true });
    return out;
  });
}

/** A value for a GraphQL input type, with hostile values in every position. */
export function fromGraphqlType(type: GraphQLInputType, pool: IdPool, name = '', depth = 0): fc.Arbitrary<unknown> {
  const hostile = { weight: 1, arbitrary: hostileValue };
  if (isNonNullType(type)) return fromGraphqlType(type.ofType, pool, name, depth);
  const t = getNullableType(type);
  if (isListType(t)) return depth > 4 ? hostileValue : fc.oneof({ weight: 3, arbitrary: fc.array(fromGraphqlType(t.ofType, pool, name, depth + 1), { maxLength: 3 }) }, hostile);
  if (isEnumType(t)) return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...t.getValues().map((v) => v.name)) }, hostile);
  if (isInputObjectType(t)) {
    if (depth > 4) return hostileValue;
    const fields = t.getFields();
    const props = Object.fromEntries(Object.values(fields).map((f) => [f.name, fromGraphqlType(f.type, pool, f.name, depth + 1)]));
    return fc.oneof({ weight: 4, arbitrary: fc.record(props, { requiredKeys: [] }) }, hostile);
  }
  if (isScalarType(t)) {
    switch (t.name) {
      case 'ID': return idArb(pool);
      case 'Int': return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(0, 1, -1, 2 ** 31 - 1, 2 ** 31, 100) }, hostile);
      case 'Float': return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(0, -1, 0.5, 1e308) }, hostile);
      case 'Boolean': return fc.oneof({ weight: 3, arbitrary: fc.boolean() }, hostile);
      case 'String': return fromSchema({ type: 'string' }, (s) => s, pool, name, depth);
      default: return hostileValue;
    }
  }
  return hostileValue;
}

/** A path segment: encodeURIComponent, except that a lone surrogate goes out as its (invalid) UTF-8 bytes. */
export function encodeSegment(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v) ?? 'undefined';
  let out = '';
  for (const ch of s) {
    const c = ch.charCodeAt(0);
    if (ch.length === 1 && c >= 0xd800 && c <= 0xdfff) out += `%${(0xe0 | (c >> 12)).toString(16)}%${(0x80 | ((c >> 6) & 0x3f)).toString(16)}%${(0x80 | (c & 0x3f)).toString(16)}`.toUpperCase();
    else out += encodeURIComponent(ch);
  }
  return out || '%20';
}
