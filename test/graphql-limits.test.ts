/**
 * What a GraphQL request may ask for, over HTTP against the real service (graphql/complexity.ts):
 * introspection counts in depth and cost (the 150 aliased `__schema` dumps are refused
 * before anything runs, for any role), `__schema` once per operation, aliases and repeated root
 * fields are capped, a query's answer is capped in size, and the standard introspection query that
 * GraphiQL and graphql-codegen send still answers the whole schema, the same on both HTTP paths and
 * every time (answered from the cache after the first).
 */
import { buildClientSchema, getIntrospectionQuery, printSchema, type IntrospectionQuery } from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../src/graphql/schema.ts';
import { parse } from 'graphql';
import { COST_LIMITS, INTROSPECTION_LIMITS, MAX_RESPONSE_BYTES, operationCost, SELECTION_LIMITS } from '../src/graphql/complexity.ts';
import { manualClockClient, startTestApp, useFileApp, type TestOrg } from './helpers/testApp.ts';

const app = useFileApp(() => startTestApp());
let org: TestOrg | undefined;
let viewerKey = '';
const { clock, call } = manualClockClient(app, () => org!);

async function setup() {
  if (org) return;
  org = await app().createOrg('enterprise', 'GraphQL limits');
  viewerKey = await app().createKey(org.orgId, 'viewer');
}

/** A POST /graphql with an Accept header of our choice (`application/json` takes the direct path, anything else Yoga's fetch). */
async function post(query: string, opts: { key?: string; accept?: string; variables?: Record<string, unknown> } = {}) {
  clock().advance(20);
  return app().rest('POST', '/graphql', {
    key: opts.key ?? org!.testKey, body: { query, variables: opts.variables ?? {} }, headers: { Accept: opts.accept ?? 'application/json' },
  });
}

const schemaDump = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `s${i}: __schema { types { fields { args { type { ofType { ofType { ofType { name } } } } } } } }`).join(' ')} }`;
const FULL = getIntrospectionQuery({ descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true, oneOf: true });

describe('introspection', () => {
  it('150 aliased __schema dumps with a viewer key: refused before execution (VALIDATION_ERROR), no data; four at once too', async () => {
    await setup();
    const refused = await Promise.all(Array.from({ length: 4 }, () => post(schemaDump(150), { key: viewerKey })));
    for (const r of refused) {
      expect(r.body.data ?? null, r.text.slice(0, 200)).toBeNull();
      expect(r.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400, details: { limit: 'schema_fields', value: 150, max: INTROSPECTION_LIMITS.schemaFields } });
      expect(r.text.length).toBeLessThan(2000);
    }
    expect((await post(schemaDump(2), { key: viewerKey })).body.errors[0].extensions.details).toMatchObject({ limit: 'schema_fields', value: 2 });
    // One dump is fine.
    const one = await post(schemaDump(1), { key: viewerKey });
    expect(one.body.errors, one.text.slice(0, 200)).toBeUndefined();
    expect(one.body.data.s0.types.length).toBeGreaterThan(100);
  });

  it('the standard introspection query (GraphiQL\'s, graphql-codegen\'s) answers the whole schema on both paths, the same every time', async () => {
    await setup();
    const direct = await post(FULL, { key: viewerKey });
    expect(direct.status).toBe(200);
    expect(direct.body.errors, direct.text.slice(0, 300)).toBeUndefined();
    expect(printSchema(buildClientSchema(direct.body.data as IntrospectionQuery))).toBe(printSchema(schema));
    const viaYoga = await post(FULL, { key: viewerKey, accept: 'application/graphql-response+json, application/json;q=0.9' });
    expect(viaYoga.status).toBe(200);
    expect(viaYoga.body.data).toEqual(direct.body.data);
    // The same answer for another caller (only extensions.rateLimit, the caller's own budget, may differ).
    const again = await post(FULL, { key: org!.testKey });
    expect(again.body.data).toEqual(direct.body.data);
    expect(again.body.extensions.cost).toEqual(direct.body.extensions.cost);
    // GraphiQL itself still loads (browser GET, no credentials).
    const page = await app().rest('GET', '/graphql', { headers: { Accept: 'text/html' } });
    expect(page.status, page.text.slice(0, 300)).toBe(200);
    expect(page.text.toLowerCase()).toContain('graphiql');
  });

  it('introspection past its own depth is refused', async () => {
    await setup();
    const levels = INTROSPECTION_LIMITS.depth;
    const r = await post(`{ __type(name: "Query") { fields { type { ${'ofType { '.repeat(levels)}name${' }'.repeat(levels)} } } } }`);
    expect(r.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { limit: 'introspection_depth', max: INTROSPECTION_LIMITS.depth } });
  });
});

describe('aliases and repeated root fields', () => {
  it('more aliases than the limit, or a root field selected too often, is VALIDATION_ERROR before anything runs', async () => {
    await setup();
    const roles = (n: number) => `{ viewer { ${Array.from({ length: n }, (_, i) => `r${i}: role`).join(' ')} } }`;
    expect((await post(roles(SELECTION_LIMITS.aliases))).body.errors).toBeUndefined();
    expect((await post(roles(SELECTION_LIMITS.aliases + 1))).body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { limit: 'aliases', max: SELECTION_LIMITS.aliases } });
    const keys = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `k${i}: apiKeys(first: 1) { edges { cursor } }`).join(' ')} }`;
    expect((await post(keys(SELECTION_LIMITS.rootFieldRepeats))).body.errors).toBeUndefined();
    const r = await post(keys(SELECTION_LIMITS.rootFieldRepeats + 1));
    expect(r.body.data ?? null).toBeNull();
    expect(r.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { limit: 'root_field_repeats', field: 'apiKeys', max: SELECTION_LIMITS.rootFieldRepeats } });
  });
});

describe('answer size', () => {
  it('a query whose answer is over the cap is 400 VALIDATION_ERROR (details.limit response_bytes); smaller pages answer', async () => {
    await setup();
    // 100 contacts with 15 KB of metadata each: three pages of them are over 4 MiB.
    const blob = 'x'.repeat(15_000);
    for (let i = 0; i < 100; i += 10) {
      const batch = await Promise.all(Array.from({ length: 10 }, (_, j) => call('POST', '/v1/contacts', { body: { email: `big${i + j}@example.com`, metadata: { blob } } })));
      for (const c of batch) expect(c.status, c.text).toBe(201);
    }
    const page = (alias: string) => `${alias}: contacts(first: 100) { edges { node { id metadata } } }`;
    const big = await post(`{ ${page('a')} ${page('b')} ${page('c')} }`);
    expect(big.status).toBe(400);
    expect(big.body.data ?? null).toBeNull();
    expect(big.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400, details: { limit: 'response_bytes', max: MAX_RESPONSE_BYTES } });
    expect(big.text.length).toBeLessThan(2000);
    const small = await post(`{ ${page('a')} }`);
    expect(small.body.errors, small.text.slice(0, 200)).toBeUndefined();
    expect(small.body.data.a.edges).toHaveLength(100);
  });
});

describe('cost you can see', () => {
  it('every answer says what it cost and what is left of the window, on both HTTP paths, as the headers do', async () => {
    await setup();
    const query = '{ apiKeys(first: 5) { edges { node { id role } } } }';
    const expected = operationCost(parse(query), undefined, schema, {}, {})!.complexity;
    for (const accept of ['application/json', 'application/graphql-response+json']) {
      const first = await post(query, { accept });
      const second = await post(query, { accept });
      for (const r of [first, second]) {
        expect(r.body.errors, r.text.slice(0, 200)).toBeUndefined();
        expect(r.body.extensions.cost).toEqual({ requested: expected, limit: COST_LIMITS.enterprise });
        expect(r.body.extensions.rateLimit).toEqual({
          limit: Number(r.headers.get('x-ratelimit-limit')), remaining: Number(r.headers.get('x-ratelimit-remaining')),
          resetAt: new Date(Number(r.headers.get('x-ratelimit-reset')) * 1000).toISOString(),
        });
      }
      expect(second.body.extensions.rateLimit.remaining).toBe(first.body.extensions.rateLimit.remaining - 1);
    }
    // An error answer carries them too; a document refused before it ran was not measured.
    const missing = await post('query($id: ID!) { node(id: $id) { id } }', { variables: { id: 'msg_01jd0000000000000000000000' } });
    expect(missing.body.errors[0].extensions.code).toMatch(/NOT_FOUND/);
    expect(missing.body.extensions.cost.requested).toBeGreaterThan(0);
    const invalid = await post('{ viewer { nope } }');
    expect(invalid.body.extensions?.cost).toBeUndefined();
    expect(invalid.body.extensions.rateLimit.limit).toBeGreaterThan(0);
  });

  it('the cost limit is the plan\'s, and a refusal names the root field that weighs most', async () => {
    await setup();
    // A campaign list with every variant's counters: about 2,000 a copy; four copies cost more than starter's 5,000 and less than growth's 10,000.
    const counters = 'recipients sent delivered failed read replied optedOut skipped pending cancelled segments cost';
    const copy = (alias: string, first: number) => `${alias}: campaigns(first: ${first}) { edges { node { id name stats { sent delivered variants { ${counters} } } } } }`;
    const query = `{ small: campaigns(first: 1) { edges { node { id } } } ${copy('a', 10)} ${copy('b', 10)} ${copy('c', 10)} ${copy('d', 10)} }`;
    const cost = operationCost(parse(query), undefined, schema, {}, {})!.complexity;
    expect(cost).toBeGreaterThan(COST_LIMITS.starter);
    expect(cost).toBeLessThanOrEqual(COST_LIMITS.growth);
    const starter = await app().createOrg('starter', 'Cost starter');
    const growth = await app().createOrg('growth', 'Cost growth');
    clock().advance(1000);
    const refused: { body: any } = await app().gql<any>(query, {}, { key: starter.testKey });
    expect(refused.body.data ?? null).toBeNull();
    expect(refused.body.errors[0].extensions).toMatchObject({
      code: 'VALIDATION_ERROR', status: 400, details: { limit: 'complexity', value: cost, max: COST_LIMITS.starter, plan: 'starter', field: 'a: campaigns' },
    });
    expect(refused.body.errors[0].message).toContain('a: campaigns costs');
    const answered: { body: any; text: string } = await app().gql<any>(query, {}, { key: growth.testKey });
    expect(answered.body.errors, answered.text.slice(0, 300)).toBeUndefined();
    expect(answered.body.extensions.cost).toEqual({ requested: cost, limit: COST_LIMITS.growth });
  });

  it('rateLimit answers the budget without spending it', async () => {
    await setup();
    const budget = async () => (await post('{ rateLimit(fields: ["Query.apiKeys", "Mutation.createApiKey"]) { plan costLimit burstPerSecond windows { field limit remaining resetAt } } }')).body;
    const before = await budget();
    expect(before.errors).toBeUndefined();
    expect(before.data.rateLimit).toMatchObject({ plan: 'enterprise', costLimit: COST_LIMITS.enterprise });
    const [keysBefore, createBefore] = before.data.rateLimit.windows;
    expect(keysBefore.field).toBe('Query.apiKeys');
    expect(createBefore.field).toBe('Mutation.createApiKey');
    // Asking again counts nothing in those windows.
    expect((await budget()).data.rateLimit.windows).toEqual(before.data.rateLimit.windows);
    // Spending one apiKeys read shows as one less there, and matches that answer's own extensions.
    const spent = await post('{ apiKeys(first: 1) { edges { cursor } } }');
    const after = (await budget()).data.rateLimit.windows;
    expect(after[0].remaining).toBe(keysBefore.remaining - 1);
    expect(after[0].remaining).toBe(spent.body.extensions.rateLimit.remaining);
    expect(after[1]).toEqual(createBefore);
    const bad = await post('{ rateLimit(fields: ["Query.nope"]) { plan } }');
    expect(bad.body.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'fields', value: ['Query.nope'] } });
  });
});
