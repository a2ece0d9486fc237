/**
 * Generated access tests: the role matrix for every REST route and GraphQL root field, and
 * cross-tenant access to every id-taking operation. The lists come from the route table and the
 * schema registry, so a new route or field without a sample input or fixture fails here. Each
 * module gives its fixtures, sample bodies and sample documents in its own test/access/<module>.ts
 * (see test/access/kit.ts); this file finds them all.
 */
/// <reference types="vite/client" />
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getNamedType, isNonNullType, type GraphQLField } from 'graphql';
import { schema } from '../src/graphql/schema.ts';
import { FIELD_ROLES } from '../src/graphql/operationField.ts';
import { ROLES, type Role } from '../src/platform/auth/roles.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { fillPath, loadAccessFixtures, type AccessContext, type AccessFixturesFactory, type Fixture, type GqlSample } from './access/kit.ts';

/** Every module's access fixtures, keyed by file (the kit is no module's). */
const MODULE_FIXTURES = import.meta.glob<AccessFixturesFactory>(['./access/*.ts', '!./access/kit.ts'], { eager: true, import: 'default' });

let t: TestApp;
let a: TestOrg;
let b: TestOrg;
const keys = new Map<Role, string>();
/** All modules' fixtures, sample bodies, sub-resource fixtures and sample documents, merged. */
let fixtures: Record<string, Fixture>;
let restBodies: Record<string, unknown>;
let subFixtures: Record<string, (parent: string) => Promise<string>>;
let gqlSamples: Record<string, GqlSample>;
let tick: AccessContext['tick'];
let makeFixture: AccessContext['makeFixture'];

beforeAll(async () => {
  t = await startTestApp({ env: { WEBHOOKS_ALLOW_LOOPBACK: '1', SANDBOX_LLM_FIRST_TOKEN_MS: '0', SANDBOX_LLM_CHUNK_MS: '0' } });
  // Enterprise: 100 requests/s burst, so the matrix never queues on the manual clock.
  a = await t.createOrg('enterprise', 'Tenant A');
  b = await t.createOrg('enterprise', 'Tenant B');
  for (const role of ROLES) keys.set(role, await t.createKey(a.orgId, role));
  const loaded = loadAccessFixtures(t, a, MODULE_FIXTURES);
  ({ fixtures, restBodies, subFixtures, gqlSamples } = loaded);
  ({ tick, makeFixture } = loaded.ctx);
  // Each module's own setup, e.g. the voice number that calls and their fixtures place calls from.
  for (const hook of loaded.beforeAll) await hook();
});
afterAll(async () => { await t?.close(); });

/** The matrices walk every route and field for every role: minutes on a loaded machine, not the default 30 s. */
const MATRIX_TIMEOUT_MS = 180_000;

const bodyFor = (endpoint: string): unknown => {
  const b = restBodies[endpoint];
  return typeof b === 'function' ? (b as () => unknown)() : b;
};

async function sampleVars(sample: { resource?: string; vars?: () => Record<string, unknown> }): Promise<Record<string, unknown>> {
  tick();
  const vars = sample.vars?.() ?? {};
  if (!sample.resource) return vars;
  if (!fixtures[sample.resource]) throw new Error(`no fixture for resource ${sample.resource}`);
  return { ...vars, id: await makeFixture(sample.resource) };
}

// Every module adds routes and fields: the matrix grows with the service (and the machine may be busy).
describe('role matrix', { timeout: 180_000 }, () => {
  it('every REST route allows exactly the roles its operation declares', async () => {
    const failures: string[] = [];
    for (const route of t.app.rest.routes) {
      const endpoint = route.operation.endpoint;
      if (['POST', 'PUT', 'PATCH'].includes(route.method) && !(endpoint in restBodies)) failures.push(`${endpoint}: add a sample body`);
      for (const role of ROLES) {
        let path = route.path;
        if (route.path.includes('{')) {
          if (!route.resource || !fixtures[route.resource]) { failures.push(`${endpoint}: no fixture for its {id}`); break; }
          path = fillPath(path, await makeFixture(route.resource));
        }
        tick();
        const r = await t.rest(route.method, path, { key: keys.get(role)!, body: bodyFor(endpoint) });
        const denied = r.status === 403 && r.body?.error?.code === 'INSUFFICIENT_PERMISSIONS';
        const allowed = route.operation.roles.includes(role);
        if (allowed === denied) failures.push(`${endpoint} as ${role}: expected ${allowed ? 'allowed' : 'denied'}, got ${r.status} ${r.text.slice(0, 120)}`);
      }
    }
    expect(failures).toEqual([]);
  }, MATRIX_TIMEOUT_MS);

  it('every GraphQL root field declares roles and allows exactly them', async () => {
    const failures: string[] = [];
    for (const type of [schema.getQueryType()!, schema.getMutationType()!]) {
      for (const field of Object.values(type.getFields())) {
        const key = `${type.name}.${field.name}`;
        if (field.name === 'node' || field.name === 'nodes') continue; // checked through each type's get operation
        const roles = FIELD_ROLES.get(key);
        const sample = gqlSamples[key];
        if (!roles) { failures.push(`${key}: no roles registered (use guard())`); continue; }
        if (!sample) { failures.push(`${key}: add a sample document`); continue; }
        for (const role of ROLES) {
          const r = await t.gql(sample.doc, await sampleVars(sample), { key: keys.get(role)! });
          const denied = (r.body.errors ?? []).some((e: any) => e.extensions?.code === 'INSUFFICIENT_PERMISSIONS');
          const allowed = roles.includes(role);
          if (allowed === denied) failures.push(`${key} as ${role}: expected ${allowed ? 'allowed' : 'denied'}, got ${r.text.slice(0, 160)}`);
        }
      }
    }
    expect(failures).toEqual([]);
  }, MATRIX_TIMEOUT_MS);
});

/** NOT_FOUND, or a resource's own not-found code (CALL_NOT_FOUND). */
const isNotFound = (code: unknown) => code === 'NOT_FOUND' || code === 'CALL_NOT_FOUND';

describe('cross-tenant access', () => {
  it('every REST route that takes an id answers 404 for another tenant\'s resource', async () => {
    const failures: string[] = [];
    const idRoutes = t.app.rest.routes.filter((r) => r.path.includes('{'));
    expect(idRoutes.length).toBeGreaterThan(0);
    for (const route of idRoutes) {
      if (!route.resource || !fixtures[route.resource]) { failures.push(`${route.operation.endpoint}: declare resource and a fixture`); continue; }
      const id = await makeFixture(route.resource);
      for (const key of [b.testKey, b.liveKey]) {
        tick();
        const r = await t.rest(route.method, fillPath(route.path, id), { key, body: bodyFor(route.operation.endpoint) });
        if (r.status !== 404 || !isNotFound(r.body?.error?.code)) failures.push(`${route.operation.endpoint}: ${r.status} ${r.text.slice(0, 120)}`);
      }
      // The owner still reaches it: the 404 above is tenancy, not a bad id (a 409 for a state rule is fine).
      tick();
      const sub = subFixtures[route.operation.endpoint];
      const ownPath = sub ? route.path.replace(/\{\w+\}/, id).replace(/\{\w+\}/, await sub(id)) : fillPath(route.path, id);
      const own = await t.rest(route.method, ownPath, { key: a.testKey, body: bodyFor(route.operation.endpoint) });
      if (own.status === 404 || own.status >= 500) failures.push(`${route.operation.endpoint}: owner got ${own.status} ${own.text.slice(0, 120)}`);
    }
    expect(failures).toEqual([]);
  }, MATRIX_TIMEOUT_MS);

  it('every GraphQL root field with an ID argument, and node(id), hide other tenants\' resources', async () => {
    const failures: string[] = [];
    const takesId = (f: GraphQLField<unknown, unknown>) => f.args.some((arg) => getNamedType(arg.type).name === 'ID' && isNonNullType(arg.type));
    for (const type of [schema.getQueryType()!, schema.getMutationType()!]) {
      for (const field of Object.values(type.getFields()).filter(takesId)) {
        if (field.name === 'node' || field.name === 'nodes') continue;
        const key = `${type.name}.${field.name}`;
        const sample = gqlSamples[key];
        if (!sample?.resource) { failures.push(`${key}: add a sample with a resource`); continue; }
        const r = await t.gql(sample.doc, await sampleVars(sample), { key: b.testKey });
        if (!isNotFound(r.body.errors?.[0]?.extensions?.code)) failures.push(`${key}: ${r.text.slice(0, 160)}`);
      }
    }
    // `rec` is a recording link of a call, `gqd` a trusted GraphQL document's id (the client's own)
    // and `a+b` fixtures are id pairs, not node ids.
    for (const prefix of Object.keys(fixtures).filter((p) => p !== 'rec' && p !== 'gqd' && !p.includes('+'))) {
      const id = await makeFixture(prefix);
      const other = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id }, { key: b.testKey });
      if (!isNotFound(other.body.errors?.[0]?.extensions?.code)) failures.push(`node(${prefix}): ${other.text.slice(0, 160)}`);
      const own = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id }, { key: a.testKey });
      if (own.body.data?.node?.id !== id) failures.push(`node(${prefix}) as owner: ${own.text.slice(0, 160)}`);
    }
    const org = await t.gql('query($id: ID!) { node(id: $id) { id } }', { id: a.orgId }, { key: b.testKey });
    if (org.body.errors?.[0]?.extensions?.code !== 'NOT_FOUND') failures.push(`node(org): ${org.text.slice(0, 160)}`);
    expect(failures).toEqual([]);
  }, MATRIX_TIMEOUT_MS);

  it('the same id string is the REST id and the Relay global id', async () => {
    const id = await makeFixture('key');
    const rest = await t.rest('GET', `/v1/settings/api-keys/${id}`, { key: a.testKey });
    const gql = await t.gql('query($id: ID!) { node(id: $id) { id __typename ... on ApiKey { last4 } } }', { id }, { key: a.testKey });
    expect(gql.body.data.node).toEqual({ id, __typename: 'ApiKey', last4: rest.body.data.last4 });
  });
});
