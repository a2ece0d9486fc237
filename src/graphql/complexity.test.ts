import { describe, expect, it } from 'vitest';
import { getIntrospectionQuery, parse } from 'graphql';
import { INTROSPECTION_LIMITS, operationCost, overLimit, SELECTION_LIMITS } from './complexity.ts';
import { schema } from './schema.ts';

const cost = (query: string, operationName?: string, variables: Record<string, unknown> = {}) => operationCost(parse(query), operationName, schema, variables, {})!;
const refusal = (query: string, operationName?: string) => overLimit(cost(query, operationName));

/** The query: `__schema { types { fields { args { type { ofType … } } } } }` under `n` aliases. */
const schemaDump = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `s${i}: __schema { types { fields { args { type { ofType { ofType { name } } } } } } }`).join(' ')} }`;

describe('introspection', () => {
  it('the standard introspection query (GraphiQL, graphql-codegen, every option on) fits its limits', () => {
    for (const options of [{}, { descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true, oneOf: true }]) {
      const c = cost(getIntrospectionQuery(options));
      expect(c.introspection.depth).toBe(15);
      expect(c.introspection.complexity).toBeGreaterThan(40_000);
      expect(c.introspection.complexity).toBeLessThanOrEqual(INTROSPECTION_LIMITS.complexity);
      expect(c.introspectionOnly).toBe(true);
      expect(overLimit(c)).toBeUndefined();
    }
  });

  it('counts what sits below __schema and __type (Pothos counts each as one leaf)', () => {
    const one = cost(schemaDump(1));
    expect(one.complexity).toBe(1);
    expect(one.introspection.depth).toBe(8);
    // __schema 1 + types (list: ×10) of fields (×10) of args (×10) of type → ofType → ofType → name (4).
    expect(one.introspection.complexity).toBe(1 + 1 + 10 * (1 + 10 * (1 + 10 * 4)));
    expect(cost('{ __type(name: "Query") { fields { name } } }').introspection).toEqual({ complexity: 1 + 1 + 10, depth: 3, schemaFields: 0 });
    // A deeper chain of ofType than the standard query's.
    const chain = `{ __type(name: "Query") { fields { type { ${'ofType { '.repeat(INTROSPECTION_LIMITS.depth)}name${' }'.repeat(INTROSPECTION_LIMITS.depth)} } } } }`;
    expect(refusal(chain)?.details).toMatchObject({ limit: 'introspection_depth', max: INTROSPECTION_LIMITS.depth });
  });

  it('refuses the issue\'s 150 aliased __schema dumps, and any second __schema', () => {
    expect(refusal(schemaDump(150))?.details).toMatchObject({ limit: 'schema_fields', value: 150, max: 1 });
    expect(refusal(schemaDump(2))?.details).toMatchObject({ limit: 'schema_fields', value: 2 });
    expect(refusal(schemaDump(1))).toBeUndefined();
    // Through fragments too.
    expect(refusal('{ ...A ...B } fragment A on Query { a: __schema { queryType { name } } } fragment B on Query { b: __schema { queryType { name } } }')?.details)
      .toMatchObject({ limit: 'schema_fields', value: 2 });
  });

  it('__type counts as a root field: ten walks of the Query type pass, the eleventh is refused', () => {
    const dumpType = (i: number) => `t${i}: __type(name: "Query") { fields { args { type { ofType { ofType { name } } } } type { ofType { ofType { name } } } } }`;
    const dumps = (n: number) => `{ ${Array.from({ length: n }, (_, i) => dumpType(i)).join(' ')} }`;
    expect(refusal(dumps(SELECTION_LIMITS.rootFieldRepeats))).toBeUndefined();
    expect(refusal(dumps(SELECTION_LIMITS.rootFieldRepeats + 1))?.details).toMatchObject({ limit: 'root_field_repeats', field: '__type' });
  });
});

describe('aliases and repeated root fields', () => {
  it('counts aliases at every level, a fragment as often as it is spread', () => {
    expect(cost('{ a: viewer { r: role } b: viewer { role } }').aliases).toBe(3);
    expect(cost('{ ...F ...F } fragment F on Query { x: viewer { y: role } }').aliases).toBe(4);
    // Nested spreads multiply without walking the expansion: 2^12 spreads, counted at once.
    const fragments = Array.from({ length: 12 }, (_, i) => `fragment F${i} on Query { ...F${i + 1} ...F${i + 1} }`).join(' ');
    expect(cost(`{ ...F0 } ${fragments} fragment F12 on Query { v: viewer { role } }`).aliases).toBe(4096);
  });

  it('refuses more aliases than the limit, and a root field selected more often than allowed', () => {
    const viewers = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `v${i}: viewer { role }`).join(' ')} }`;
    expect(refusal(viewers(SELECTION_LIMITS.rootFieldRepeats))).toBeUndefined();
    expect(refusal(viewers(SELECTION_LIMITS.rootFieldRepeats + 1))?.details).toMatchObject({ limit: 'root_field_repeats', field: 'viewer', value: SELECTION_LIMITS.rootFieldRepeats + 1 });
    const nested = (n: number) => `{ viewer { ${Array.from({ length: n }, (_, i) => `r${i}: role`).join(' ')} } }`;
    expect(refusal(nested(SELECTION_LIMITS.aliases))).toBeUndefined();
    expect(refusal(nested(SELECTION_LIMITS.aliases + 1))?.details).toMatchObject({ limit: 'aliases', value: SELECTION_LIMITS.aliases + 1, max: SELECTION_LIMITS.aliases });
  });
});

describe('the operation that runs', () => {
  it('is the one operationName selects, not the document\'s first', () => {
    const doc = `query Cheap { viewer { role } } query Costly ${schemaDump(3).slice(0)}`;
    expect(refusal(doc, 'Cheap')).toBeUndefined();
    expect(refusal(doc, 'Costly')?.details).toMatchObject({ limit: 'schema_fields' });
    expect(operationCost(parse(doc), 'Missing', schema, {}, {})).toBeNull();
  });
});
