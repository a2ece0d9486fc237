/**
 * The error contract over HTTP: malformed requests, validation, unknown routes, limits and
 * unexpected failures give the spec's error envelope (REST) or `extensions` (GraphQL), and none of
 * them changes anything.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { COMPLEXITY_LIMITS } from '../src/graphql/builder.ts';
import { SELECTION_LIMITS } from '../src/graphql/complexity.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let ownerKey: string;
let viewerKey: string;

beforeAll(async () => {
  t = await startTestApp();
  // Enterprise: a burst allowance large enough that a test never queues on the frozen clock.
  org = await t.createOrg('enterprise', 'Errors org');
  other = await t.createOrg('enterprise', 'Other org');
  ownerKey = org.testKey;
  viewerKey = await t.createKey(org.orgId, 'viewer');
});
afterAll(async () => { await t?.close(); });
// A fresh second (and burst allowance) for every test.
beforeEach(() => { (t.clock as ManualClock).advance(1000); });

const API_KEYS = '/v1/settings/api-keys';

async function countKeys(orgId?: string): Promise<number> {
  const { rows } = orgId
    ? await t.db.query('select count(*)::int as n from api_keys where organization_id = $1', [orgId])
    : await t.db.query('select count(*)::int as n from api_keys');
  return rows[0].n as number;
}

/** The spec's error envelope, with meta.request_id equal to X-Request-Id and a docs_url. */
function expectError(r: HttpResponse, status: number, code: string) {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  expect(r.body, r.text).toBeTypeOf('object');
  expect(r.body.error).toMatchObject({ code, status });
  expect(typeof r.body.error.message).toBe('string');
  expect(r.body.error.message.length).toBeGreaterThan(0);
  expect(r.body.error.details).toBeTypeOf('object');
  expect(r.body.data).toBeUndefined();
  const requestId = r.headers.get('x-request-id');
  expect(requestId).toMatch(/^req_[0-9a-z]{26}$/);
  expect(r.body.meta.request_id).toBe(requestId);
  expect(r.body.meta.docs_url).toMatch(/^https?:\/\/\S+$/);
  expect(r.body.meta.docs_url.toLowerCase()).toContain(code.toLowerCase());
  expect(Number.isNaN(Date.parse(r.body.meta.timestamp))).toBe(false);
  return r.body.error as { code: string; message: string; status: number; details: Record<string, unknown> };
}

/** Runs a POST that must fail and checks that it created no key anywhere. */
async function postFails(opts: Parameters<TestApp['rest']>[2], status: number, code: string) {
  const before = await countKeys();
  const r = await t.rest('POST', API_KEYS, { key: ownerKey, ...opts });
  const error = expectError(r, status, code);
  expect(await countKeys()).toBe(before);
  return error;
}

describe('REST: malformed requests', () => {
  it('malformed JSON → 400 VALIDATION_ERROR', async () => {
    await postFails({ rawBody: '{"role": "developer"', headers: { 'Content-Type': 'application/json' } }, 400, 'VALIDATION_ERROR');
    await postFails({ rawBody: "{'role': 'developer'}", headers: { 'Content-Type': 'application/json' } }, 400, 'VALIDATION_ERROR');
  });

  it('a body that is not a JSON object → 400', async () => {
    await postFails({ body: [{ role: 'developer' }] }, 400, 'VALIDATION_ERROR');
    await postFails({ body: 'developer' }, 400, 'VALIDATION_ERROR');
    await postFails({ body: 42 }, 400, 'VALIDATION_ERROR');
    await postFails({ rawBody: 'null', headers: { 'Content-Type': 'application/json' } }, 400, 'VALIDATION_ERROR');
  });

  it('a non-JSON Content-Type → 400', async () => {
    await postFails({ rawBody: '{"role":"developer"}', headers: { 'Content-Type': 'text/plain' } }, 400, 'VALIDATION_ERROR');
    await postFails({ rawBody: 'role=developer', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } }, 400, 'VALIDATION_ERROR');
  });

  it('a body over maxBodyBytes → 400, nothing created', async () => {
    expect(t.config.maxBodyBytes).toBe(1024 * 1024);
    const big = JSON.stringify({ role: 'developer', name: 'x', padding: 'a'.repeat(t.config.maxBodyBytes + 10) });
    const error = await postFails({ rawBody: big, headers: { 'Content-Type': 'application/json' } }, 400, 'VALIDATION_ERROR');
    expect(error.details.max_bytes).toBe(t.config.maxBodyBytes);
  });

  it('a chunked body (no Content-Length) over maxBodyBytes → 400, nothing created', async () => {
    const before = await countKeys();
    const chunk = new TextEncoder().encode(`{"role":"developer","padding":"${'a'.repeat(64 * 1024)}`);
    const chunks = Math.ceil(t.config.maxBodyBytes / chunk.length) + 2;
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < chunks) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const res = await fetch(`${t.baseUrl}${API_KEYS}`, {
      method: 'POST', headers: { 'X-API-Key': ownerKey, 'Content-Type': 'application/json' }, body, duplex: 'half',
    } as RequestInit & { duplex: 'half' });
    const text = await res.text();
    expectError({ status: res.status, headers: res.headers, text, body: JSON.parse(text) }, 400, 'VALIDATION_ERROR');
    // The rest of the body is not read: the connection is closed after the answer.
    expect(res.headers.get('connection')).toBe('close');
    expect(await countKeys()).toBe(before);
  });

  it('GraphQL: a body over maxBodyBytes → 400 VALIDATION_ERROR, nothing created', async () => {
    const before = await countKeys();
    const r = await t.gql(`mutation { createApiKey(input: { role: developer }) { key } } # ${'x'.repeat(t.config.maxBodyBytes)}`, {}, { key: ownerKey });
    expect(r.status).toBe(400);
    expect(r.body.errors![0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    expect(await countKeys()).toBe(before);
  });

  it('offset pagination (page, offset) → 400', async () => {
    for (const q of ['page=2', 'offset=20', 'limit=3&page=1']) {
      const r = await t.rest('GET', `${API_KEYS}?${q}`, { key: ownerKey });
      expectError(r, 400, 'VALIDATION_ERROR');
    }
  });

  it('an unknown query parameter → 400', async () => {
    const r = await t.rest('GET', `${API_KEYS}?sort=asc`, { key: ownerKey });
    const error = expectError(r, 400, 'VALIDATION_ERROR');
    expect(error.details.field).toBe('sort');
    expectError(await t.rest('GET', `/v1/settings/organization?limit=5`, { key: ownerKey }), 400, 'VALIDATION_ERROR');
  });

  it('a repeated query parameter → 400', async () => {
    expectError(await t.rest('GET', `${API_KEYS}?limit=2&limit=3`, { key: ownerKey }), 400, 'VALIDATION_ERROR');
  });

  it('limit outside 1-100 or not an integer → 400 VALIDATION_ERROR on field limit', async () => {
    for (const limit of ['0', '101', 'abc', '-1', '1.5', '', '1e2', '99999999']) {
      const r = await t.rest('GET', `${API_KEYS}?limit=${encodeURIComponent(limit)}`, { key: ownerKey });
      const error = expectError(r, 400, 'VALIDATION_ERROR');
      expect(error.details.field, `limit=${limit}`).toBe('limit');
    }
    for (const limit of ['1', '100']) {
      expect((await t.rest('GET', `${API_KEYS}?limit=${limit}`, { key: ownerKey })).status).toBe(200);
    }
  });
});

describe('REST: validation', () => {
  it('a field of the wrong type → 422 VALIDATION_ERROR on that field', async () => {
    const error = await postFails({ body: { role: 5 } }, 422, 'VALIDATION_ERROR');
    expect(error.details.field).toBe('role');
    const e2 = await postFails({ body: { role: 'superuser' } }, 422, 'VALIDATION_ERROR');
    expect(e2.details.field).toBe('role');
    const e3 = await postFails({ body: { role: 'developer', mode: 'staging' } }, 422, 'VALIDATION_ERROR');
    expect(e3.details.field).toBe('mode');
    const e4 = await postFails({ body: { role: 'developer', name: ['x'] } }, 422, 'VALIDATION_ERROR');
    expect(e4.details.field).toBe('name');
  });

  it('a missing required field → 422 MISSING_REQUIRED_FIELD with details.field', async () => {
    const error = await postFails({ body: {} }, 422, 'MISSING_REQUIRED_FIELD');
    expect(error.details.field).toBe('role');
    const e2 = await postFails({ body: { name: 'no role' } }, 422, 'MISSING_REQUIRED_FIELD');
    expect(e2.details.field).toBe('role');
  });

  it('an empty body counts as {} → MISSING_REQUIRED_FIELD', async () => {
    const error = await postFails({ rawBody: '', headers: { 'Content-Type': 'application/json' } }, 422, 'MISSING_REQUIRED_FIELD');
    expect(error.details.field).toBe('role');
  });

  it('a role the caller may not grant → 403 INSUFFICIENT_PERMISSIONS, nothing created', async () => {
    const adminKey = await t.createKey(org.orgId, 'admin');
    const before = await countKeys();
    const r = await t.rest('POST', API_KEYS, { key: adminKey, body: { role: 'owner' } });
    expectError(r, 403, 'INSUFFICIENT_PERMISSIONS');
    const r2 = await t.rest('POST', API_KEYS, { key: viewerKey, body: { role: 'viewer' } });
    expectError(r2, 403, 'INSUFFICIENT_PERMISSIONS');
    expect(await countKeys()).toBe(before);
  });
});

describe('REST: routes', () => {
  it('an unknown route → 404 NOT_FOUND', async () => {
    for (const p of ['/v1/nope', '/v1/settings/api-keys/key_x/extra', '/v1', '/v1/settings']) {
      expectError(await t.rest('GET', p, { key: ownerKey }), 404, 'NOT_FOUND');
    }
    expectError(await t.rest('GET', '/nope', { key: ownerKey }), 404, 'NOT_FOUND');
  });

  it('a wrong method on an existing path → 405 METHOD_NOT_ALLOWED with an Allow header', async () => {
    const r = await t.rest('PATCH', '/v1/settings/team', { key: ownerKey, body: {} });
    const error = expectError(r, 405, 'METHOD_NOT_ALLOWED');
    expect(r.headers.get('allow')).toBe('GET');
    expect(error.details.allowed_methods).toEqual(['GET']);

    const before = await countKeys();
    const r2 = await t.rest('PUT', API_KEYS, { key: ownerKey, body: { role: 'developer' } });
    expectError(r2, 405, 'METHOD_NOT_ALLOWED');
    expect(r2.headers.get('allow')).toBe('GET, POST');
    expect(await countKeys()).toBe(before);

    const r3 = await t.rest('DELETE', '/v1/settings/team', { key: ownerKey });
    expectError(r3, 405, 'METHOD_NOT_ALLOWED');
    expect(r3.headers.get('allow')).toBe('GET');
  });

  it('a name the method does not have where it has fixed names → 404 unknown route, with the closest suggested', async () => {
    // POST /v1/messages/mms matches no POST route; GET /v1/messages/{id} takes message ids, not channel names.
    const r = await t.rest('POST', '/v1/messages/mms', { key: ownerKey, body: { to: '+15005550006', body: 'hi' } });
    const error = expectError(r, 404, 'NOT_FOUND');
    expect(error.message).toBe('Unknown route: POST /v1/messages/mms; did you mean POST /v1/messages/sms?');
    expect(error.details).toMatchObject({ method: 'POST', path: '/v1/messages/mms', did_you_mean: 'POST /v1/messages/sms' });
    expect(r.headers.get('allow')).toBeNull();
    // A message id there is the message: 405, it is read with GET.
    const r2 = await t.rest('POST', '/v1/messages/msg_01aaaaaaaaaaaaaaaaaaaaaaaa', { key: ownerKey, body: {} });
    expectError(r2, 405, 'METHOD_NOT_ALLOWED');
    expect(r2.headers.get('allow')).toBe('GET');
  });

  it('a missing resource → 404 NOT_FOUND', async () => {
    expectError(await t.rest('GET', `${API_KEYS}/key_01aaaaaaaaaaaaaaaaaaaaaaaa`, { key: ownerKey }), 404, 'NOT_FOUND');
  });

  it('no credentials → 401 with the same envelope', async () => {
    expectError(await t.rest('GET', API_KEYS), 401, 'UNAUTHORIZED');
    expectError(await t.rest('GET', API_KEYS, { key: 'svc_test_sk_nope' }), 401, 'INVALID_API_KEY');
  });
});

describe('REST: tenant fields in input', () => {
  it('organization_id in the body is an unknown parameter: refused, nothing created in either organization', async () => {
    const beforeOther = await countKeys(other.orgId);
    const beforeOwn = await countKeys(org.orgId);
    const r = await t.rest('POST', API_KEYS, {
      key: ownerKey,
      body: { role: 'developer', name: 'smuggled', organization_id: other.orgId, organizationId: other.orgId, org_id: other.orgId },
    });
    const error = expectError(r, 422, 'VALIDATION_ERROR');
    expect((error.details.errors as { field: string }[]).map((e) => e.field)).toEqual(['organization_id', 'organizationId', 'org_id']);
    expect(error.message).toBe('3 problems: Received unknown parameter: organization_id; Received unknown parameter: organizationId; Received unknown parameter: org_id');
    expect(await countKeys(other.orgId)).toBe(beforeOther);
    expect(await countKeys(org.orgId)).toBe(beforeOwn);
    expect(r.text).not.toContain(other.orgId);
    // The tenant is always the credential's: without them the key is created in the caller organization.
    const ok = await t.rest('POST', API_KEYS, { key: ownerKey, body: { role: 'developer', name: 'plain' } });
    expect(ok.status, ok.text).toBe(201);
    const { rows } = await t.db.query('select organization_id from api_keys where id = $1', [ok.body.data.id]);
    expect(rows).toEqual([{ organization_id: org.orgId }]);
    expectError(await t.rest('GET', `${API_KEYS}/${ok.body.data.id}`, { key: other.testKey }), 404, 'NOT_FOUND');
  });

  it('organization_id in the query string is an unknown parameter', async () => {
    expectError(await t.rest('GET', `${API_KEYS}?organization_id=${other.orgId}`, { key: ownerKey }), 400, 'VALIDATION_ERROR');
  });
});

describe('unexpected failures', () => {
  const LEAKS = [/audit_log_entries/i, /\bselect\b/i, /\bfrom\b\s+"?\w/i, /relation/i, /postgres/i, /\bsql\b/i, /\n\s+at\s/, /\.ts:\d+/, /node_modules/];

  async function withBrokenAuditTable<T>(fn: () => Promise<T>): Promise<T> {
    await t.db.query('alter table audit_log_entries rename to audit_log_entries_x');
    try {
      return await fn();
    } finally {
      await t.db.query('alter table audit_log_entries_x rename to audit_log_entries');
    }
  }

  it('REST: a database failure → 500 INTERNAL_ERROR without SQL, table names or stack', async () => {
    const r = await withBrokenAuditTable(() => t.rest('GET', '/v1/settings/audit-logs', { key: ownerKey }));
    const error = expectError(r, 500, 'INTERNAL_ERROR');
    expect(error.details).toEqual({});
    for (const leak of LEAKS) expect(r.text).not.toMatch(leak);
    // And the service is fine afterwards.
    expect((await t.rest('GET', '/v1/settings/audit-logs', { key: ownerKey })).status).toBe(200);
  });

  it('GraphQL: a database failure → INTERNAL_ERROR without SQL, table names or stack', async () => {
    const r = await withBrokenAuditTable(() => t.gql('{ auditLogs(first: 5) { edges { node { id action } } } }', {}, { key: ownerKey }));
    expect(r.body.errors?.length, r.text).toBeGreaterThan(0);
    expect(r.body.data ?? null).toBeNull();
    expect(r.body.errors![0].extensions).toMatchObject({ code: 'INTERNAL_ERROR', status: 500 });
    for (const leak of LEAKS) expect(r.text).not.toMatch(leak);
  });
});

describe('GraphQL errors', () => {
  type GqlError = { message: string; extensions: { code: string; status: number; details?: Record<string, unknown> } };

  function gqlError(r: HttpResponse<{ data?: unknown; errors?: GqlError[] }>, code: string, status: number): GqlError {
    expect(r.body?.errors, r.text).toBeDefined();
    expect(r.body.errors!.length).toBeGreaterThan(0);
    const e = r.body.errors![0]!;
    expect(e.extensions, r.text).toMatchObject({ code, status });
    expect(typeof e.message).toBe('string');
    expect(e.extensions.details).toBeTypeOf('object');
    return e;
  }

  it('a role the caller lacks → INSUFFICIENT_PERMISSIONS, nothing created', async () => {
    const before = await countKeys();
    const r = await t.gql('mutation { createApiKey(input: { role: viewer }) { key apiKey { id } } }', {}, { key: viewerKey });
    gqlError(r, 'INSUFFICIENT_PERMISSIONS', 403);
    expect(r.body.data ?? null).toBeNull();
    expect(await countKeys()).toBe(before);
  });

  it('a role above the caller’s → INSUFFICIENT_PERMISSIONS with details.field', async () => {
    const adminKey = await t.createKey(org.orgId, 'admin');
    const r = await t.gql('mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) { key } }', { input: { role: 'owner' } }, { key: adminKey });
    const e = gqlError(r, 'INSUFFICIENT_PERMISSIONS', 403);
    expect(e.extensions.details).toMatchObject({ field: 'role' });
  });

  it('first over 100 → VALIDATION_ERROR on limit', async () => {
    const r = await t.gql('{ apiKeys(first: 500) { edges { node { id } } } }', {}, { key: ownerKey });
    const e = gqlError(r, 'VALIDATION_ERROR', 400);
    expect(e.extensions.details).toMatchObject({ field: 'limit' });
    expect(r.body.data ?? null).toBeNull();
  });

  it('first: 0 → VALIDATION_ERROR', async () => {
    const r = await t.gql('{ apiKeys(first: 0) { edges { node { id } } } }', {}, { key: ownerKey });
    gqlError(r, 'VALIDATION_ERROR', 400);
  });

  it('a page both ways (first with before, or after with last) → VALIDATION_ERROR', async () => {
    const r = await t.gql('{ apiKeys(first: 2, before: "x") { edges { node { id } } } }', {}, { key: ownerKey });
    const e = gqlError(r, 'VALIDATION_ERROR', 400);
    expect(e.extensions.details).toMatchObject({ field: 'first' });
    const r2 = await t.gql('{ apiKeys(last: 2, after: "x") { edges { node { id } } } }', {}, { key: ownerKey });
    gqlError(r2, 'VALIDATION_ERROR', 400);
  });

  it('an altered cursor → INVALID_CURSOR', async () => {
    const r = await t.gql('{ apiKeys(first: 2, after: "bm90LWEtY3Vyc29y.c2lnbmF0dXJl") { edges { node { id } } } }', {}, { key: ownerKey });
    gqlError(r, 'INVALID_CURSOR', 400);
  });

  it('an unknown role value in input → an error, no data, nothing created', async () => {
    const before = await countKeys();
    const r = await t.gql('mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) { key } }', { input: { role: 'superuser' } }, { key: ownerKey });
    expect(r.body.errors?.length, r.text).toBeGreaterThan(0);
    expect(r.body.data ?? null).toBeNull();
    expect(r.body.errors![0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    expect(r.body.errors![0].message).toMatch(/superuser/);
    const r2 = await t.gql('mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) { key } }', { input: { role: 5 } }, { key: ownerKey });
    expect(r2.body.errors![0].extensions, r2.text).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    const r3 = await t.gql('mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) { key } }', { input: {} }, { key: ownerKey });
    expect(r3.body.errors![0].extensions, r3.text).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    expect(await countKeys()).toBe(before);
  });

  // Breadth counts every selected field, a repeated one each time it is written (repeats merge into one
  // execution, so neither the alias nor the root-field limit refuses them first).
  const breadthOf = (n: number) => `{ viewer { ${'role '.repeat(n - 1)}} }`;

  it('a query over the breadth limit is rejected with VALIDATION_ERROR, not data', async () => {
    const r = await t.gql(breadthOf(COMPLEXITY_LIMITS.breadth + 1), {}, { key: ownerKey });
    expect(r.body.errors?.length, r.text).toBeGreaterThan(0);
    expect(r.body.data ?? null).toBeNull();
    const e = r.body.errors![0];
    expect(e.extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    expect(e.message).toMatch(/breadth/i);
    expect(e.extensions.details).toMatchObject({ limit: 'breadth', max: COMPLEXITY_LIMITS.breadth });
  });

  it('a query refused for its size consumes no rate-limit quota', async () => {
    const aliasesOf = (n: number) => Array.from({ length: n }, (_, i) => `k${i}: apiKeys(first: 1) { edges { node { id } } }`).join('\n');
    const before = await t.rest('GET', '/v1/settings/api-keys', { key: ownerKey });
    const refused = await t.gql(`{ ${aliasesOf(SELECTION_LIMITS.rootFieldRepeats + 1)} }`, {}, { key: ownerKey });
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
    const after = await t.rest('GET', '/v1/settings/api-keys', { key: ownerKey });
    expect(Number(after.headers.get('x-ratelimit-remaining'))).toBe(Number(before.headers.get('x-ratelimit-remaining')) - 1);
  });

  it('a query at the breadth limit runs', async () => {
    const r = await t.gql(breadthOf(COMPLEXITY_LIMITS.breadth), {}, { key: ownerKey });
    expect(r.body.errors, r.text).toBeUndefined();
    expect(r.body.data).toEqual({ viewer: { role: 'owner' } });
  });

  it('a syntax error → an error, no data', async () => {
    const r = await t.gql('{ viewer { role ', {}, { key: ownerKey });
    expect(r.status).toBeLessThan(500);
    expect(r.body.errors?.length, r.text).toBeGreaterThan(0);
    expect(r.body.data ?? null).toBeNull();
    expect(r.body.errors![0].message).toMatch(/syntax/i);
    expect(r.body.errors![0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
  });

  it('an unknown field → an error, no data', async () => {
    const r = await t.gql('{ viewer { nope } }', {}, { key: ownerKey });
    expect(r.status).toBeLessThan(500);
    expect(r.body.errors?.length, r.text).toBeGreaterThan(0);
    expect(r.body.data ?? null).toBeNull();
    expect(r.body.errors![0].message).toMatch(/nope/);
    expect(r.body.errors![0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
  });

  it('no credentials → UNAUTHORIZED in extensions', async () => {
    const r = await t.gql('{ viewer { role } }');
    expect(r.status).toBe(401);
    gqlError(r, 'UNAUTHORIZED', 401);
  });
});

describe('GraphQL: the direct path answers exactly as Yoga does', () => {
  // `Accept: application/json` (or none) takes server.ts's direct path; an Accept list Yoga must
  // negotiate goes through yoga.fetch. Both must give the same status, content type and body.
  const both = async (query: string, variables?: Record<string, unknown>) => {
    const direct = await t.gql(query, variables, { key: ownerKey, headers: { Accept: 'application/json' } });
    (t.clock as ManualClock).advance(1000);
    const viaYoga = await t.gql(query, variables, { key: ownerKey, headers: { Accept: 'application/json, text/plain;q=0.5' } });
    // extensions.rateLimit is the caller's window, one request apart.
    const strip = (text: string) => text.replace(/"responseCache":\{"hit":true\},/, '').replace(/req_[0-9a-z]+/g, 'req').replace(/"(timestamp|created_at|updated_at)":"[^"]+"/g, '"$1":"t"').replace(/"rateLimit":\{[^}]*\}/, '"rateLimit":{}');
    expect(direct.status).toBe(viaYoga.status);
    expect(direct.headers.get('content-type')).toBe(viaYoga.headers.get('content-type'));
    expect(strip(direct.text)).toBe(strip(viaYoga.text));
    return direct;
  };

  it('a mutation over GET is refused every time, also once its document is cached', async () => {
    const before = await countKeys();
    const mutation = 'mutation { createApiKey(input: { role: developer }) { key } }';
    expect((await t.gql(mutation, {}, { key: ownerKey })).body.errors).toBeUndefined(); // parsed and cached by a POST
    for (let i = 0; i < 2; i++) {
      (t.clock as ManualClock).advance(1000);
      const r = await t.rest('GET', `/graphql?query=${encodeURIComponent(mutation)}`, { key: ownerKey, headers: { Accept: 'application/json' } });
      expect(r.status).toBe(405);
      expect(r.text).toContain('errors');
    }
    expect(await countKeys()).toBe(before + 1);
  });

  it('success, a validation error, a service error and a complexity refusal', async () => {
    expect((await both('{ viewer { role mode organization { id name } } }')).status).toBe(200);
    expect((await both('{ viewer { nope } }')).text).toContain('VALIDATION_ERROR');
    await both('query($id: ID!) { node(id: $id) { id } }', { id: 'msg_01jd0000000000000000000000' });
    const tooBroad = `{ viewer { ${'role '.repeat(COMPLEXITY_LIMITS.breadth)}} }`;
    expect((await both(tooBroad)).text).toContain('VALIDATION_ERROR');
  });

  it('variables that do not coerce: 400 VALIDATION_ERROR on both paths, nothing created, no window quota used', async () => {
    const mutation = 'mutation Create($input: CreateApiKeyInput!) { createApiKey(input: $input) { key } }';
    const before = await countKeys();
    const r = await both(mutation, { input: { role: 42 } });
    expect(r.status).toBe(400);
    expect(r.body.errors?.[0]?.message).toMatch(/\$input/);
    expect(r.body.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    expect(await countKeys()).toBe(before);
    // Refused before execution: the window unit taken at admission is given back.
    (t.clock as ManualClock).advance(1000);
    const remaining = async (variables: Record<string, unknown>) => {
      const res = await t.gql(mutation, variables, { key: ownerKey });
      return { errors: res.body.errors, remaining: Number(res.headers.get('x-ratelimit-remaining')) };
    };
    const first = await remaining({ input: { role: 'developer' } });
    expect(first.errors).toBeUndefined();
    expect((await remaining({ input: { role: 42 } })).errors).toHaveLength(1);
    const second = await remaining({ input: { role: 'developer' } });
    expect(second).toEqual({ errors: undefined, remaining: first.remaining - 1 });
  });

  it('bodies Yoga refuses before running anything are answered the same way', async () => {
    const bodies = [
      { query: '{ viewer { role } }', unexpected: 1 },
      { query: '' },
      { query: '{ viewer { role } }', variables: 'not an object' },
      { query: '{ viewer { role } }', operationName: 'Missing' },
    ];
    for (const body of bodies) {
      const raw = JSON.stringify(body);
      const send = (accept: string) => t.rest('POST', '/graphql', { key: ownerKey, rawBody: raw, headers: { 'Content-Type': 'application/json', Accept: accept } });
      (t.clock as ManualClock).advance(1000);
      const direct = await send('application/json');
      (t.clock as ManualClock).advance(1000);
      const viaYoga = await send('application/json, text/plain;q=0.5');
      expect(direct.status, raw).toBeLessThan(500);
      expect(direct.status, raw).toBe(viaYoga.status);
      const same = (text: string) => text.replace(/req_[0-9a-z]+/g, 'req').replace(/"rateLimit":\{[^}]*\}/, '"rateLimit":{}');
      expect(same(direct.text), raw).toBe(same(viaYoga.text));
      expect(direct.text, raw).toContain('"errors"');
    }
  });
});
