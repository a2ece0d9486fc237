/**
 * Authentication, IP allowlist and audit log, end to end over HTTP: API keys (creation, listing,
 * revocation on both surfaces, role escalation), bearer JWTs (membership roles, expiry, forged and
 * unsigned tokens, unknown tenants, non-members), the IP allowlist (IPv4/IPv6/mapped forms,
 * X-Forwarded-For only behind a trusted proxy) and the audit trail with its exports.
 */
import { createHash } from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, TEST_JWT_SECRET, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { expectError, expectGqlError, eventually, type ErrorBody } from './helpers/assertions.ts';

type ApiKeyView = {
  id: string; name: string | null; role: string; mode: string; prefix: string; last4: string;
  created_at: string; last_used_at: string | null; revoked_at: string | null; key?: string;
};
type AuditEntry = {
  id: string; actor_type: string; actor_id: string | null; action: string; resource_type: string | null;
  resource_id: string | null; ip: string | null; request_id: string | null; details: Record<string, unknown>; created_at: string;
};

let t: TestApp;
let clock: ManualClock;

beforeAll(async () => {
  t = await startTestApp();
  clock = t.clock as ManualClock;
});
afterAll(async () => { await t?.close(); });
// Requests are rate limited per second of the (manual) clock; give each test a fresh second.
beforeEach(() => { clock.advance(1_000); });

// ---------------------------------------------------------------------------------------------
// helpers

const UNKNOWN_KEY = `svc_test_sk_${'A'.repeat(40)}`;

function newOrg(app: TestApp = t): Promise<TestOrg> {
  return app.createOrg('enterprise');
}




async function auditLogs(key: string, app: TestApp = t, headers: Record<string, string> = {}): Promise<AuditEntry[]> {
  const res = await app.rest<{ data: AuditEntry[] }>('GET', '/v1/settings/audit-logs?limit=100', { key, headers });
  expect(res.status).toBe(200);
  return res.body.data;
}

function findAudit(key: string, what: string, pred: (e: AuditEntry) => boolean, app: TestApp = t, headers: Record<string, string> = {}): Promise<AuditEntry> {
  return eventually(what, async () => (await auditLogs(key, app, headers)).find(pred));
}

async function whoAmI(cred: { key?: string; token?: string }): Promise<{ role: string; mode: string; actor: { type: string; id: string }; organization: { id: string } }> {
  const res = await t.rest('GET', '/v1/settings/organization', cred);
  expect(res.status).toBe(200);
  return res.body.data;
}

async function createKey(key: string, body: Record<string, unknown>): Promise<HttpResponse> {
  return t.rest('POST', '/v1/settings/api-keys', { key, body });
}

/** A bearer token signed by hand (the helper's mintToken upserts a membership, which some cases must avoid). */
async function signToken(claims: Record<string, unknown>, o: { ttlSeconds?: number; secret?: string } = {}): Promise<string> {
  const now = Math.floor(t.clock.now().getTime() / 1000);
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt(now).setExpirationTime(now + (o.ttlSeconds ?? 3600))
    .sign(new TextEncoder().encode(o.secret ?? TEST_JWT_SECRET));
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

// ---------------------------------------------------------------------------------------------

describe('X-API-Key authentication', () => {
  let org: TestOrg;
  beforeAll(async () => { org = await newOrg(); });

  it('accepts a valid key and identifies the key as the actor', async () => {
    const me = await whoAmI({ key: org.liveKey });
    expect(me.organization.id).toBe(org.orgId);
    expect(me.role).toBe('owner');
    expect(me.mode).toBe('live');
    expect(me.actor.type).toBe('api_key');
    expect(me.actor.id).toMatch(/^key_/);
    const test = await whoAmI({ key: org.testKey });
    expect(test.mode).toBe('test');
  });

  it('missing credentials → 401 UNAUTHORIZED with the full error envelope', async () => {
    const res = await t.rest('GET', '/v1/settings/organization');
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = res.body as ErrorBody;
    expect(Object.keys(body).sort()).toEqual(['error', 'meta']);
    expect(Object.keys(body.error).sort()).toEqual(['code', 'details', 'message', 'status']);
    expect(Object.keys(body.meta).sort()).toEqual(['docs_url', 'request_id', 'timestamp']);
    expect(body.error.code).toBe('UNAUTHORIZED');
    expect(body.error.status).toBe(401);
    expect(body.error.details).toEqual({});
    expect(body.meta.request_id).toMatch(/^req_/);
    expect(res.headers.get('x-request-id')).toBe(body.meta.request_id);
    expect(body.meta.timestamp).toBe(t.clock.now().toISOString());
    expect(body.meta.docs_url).toMatch(/^https?:\/\/\S+#unauthorized$/);

    const gql = await t.gql('{ viewer { role } }');
    expect(gql.status).toBe(401);
    expectGqlError(gql, 'UNAUTHORIZED');
  });

  it('malformed keys → 401 INVALID_API_KEY', async () => {
    for (const bad of ['not-a-key', 'svc_live_sk_short', `svc_prod_sk_${'a'.repeat(40)}`, `svc_live_sk_${'a'.repeat(39)}!`]) {
      const body = await expectError(await t.rest('GET', '/v1/settings/organization', { key: bad }), 401, 'INVALID_API_KEY');
      expect(body.meta.docs_url).toMatch(/#invalid_api_key$/);
    }
  });

  it('well-formed but unknown key → 401 INVALID_API_KEY (REST and GraphQL)', async () => {
    await expectError(await t.rest('GET', '/v1/settings/organization', { key: UNKNOWN_KEY }), 401, 'INVALID_API_KEY');
    const gql = await t.gql('{ viewer { role } }', {}, { key: UNKNOWN_KEY });
    expect(gql.status).toBe(401);
    expectGqlError(gql, 'INVALID_API_KEY');
  });

  it('a key revoked with DELETE /v1/settings/api-keys/{id} is rejected on the very next request', async () => {
    const created = await createKey(org.liveKey, { name: 'to revoke (REST)', role: 'developer' });
    expect(created.status).toBe(201);
    const { id, key } = created.body.data as ApiKeyView & { key: string };
    expect((await whoAmI({ key })).actor.id).toBe(id);

    const del = await t.rest('DELETE', `/v1/settings/api-keys/${id}`, { key: org.liveKey });
    expect(del.status).toBe(200);
    expect(del.body.data.id).toBe(id);
    expect(del.body.data.revoked_at).toBe(t.clock.now().toISOString());
    expect(del.body.data.key).toBeUndefined();

    await expectError(await t.rest('GET', '/v1/settings/organization', { key }), 401, 'INVALID_API_KEY');
    const gql = await t.gql('{ viewer { role } }', {}, { key });
    expect(gql.status).toBe(401);
    expectGqlError(gql, 'INVALID_API_KEY');
    // Revoking again is a no-op that keeps the original revocation time.
    const again = await t.rest('DELETE', `/v1/settings/api-keys/${id}`, { key: org.liveKey });
    expect(again.status).toBe(200);
    expect(again.body.data.revoked_at).toBe(del.body.data.revoked_at);
  });

  it('a key revoked with the GraphQL revokeApiKey mutation is rejected on the very next request', async () => {
    const created = await createKey(org.liveKey, { name: 'to revoke (GraphQL)', role: 'viewer' });
    expect(created.status).toBe(201);
    const { id, key } = created.body.data as ApiKeyView & { key: string };
    expect((await whoAmI({ key })).role).toBe('viewer');

    const res = await t.gql<{ revokeApiKey: { id: string; revokedAt: string | null } }>(
      'mutation Revoke($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }', { id }, { key: org.liveKey },
    );
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data?.revokeApiKey.id).toBe(id);
    expect(res.body.data?.revokeApiKey.revokedAt).toBe(t.clock.now().toISOString());

    await expectError(await t.rest('GET', '/v1/settings/organization', { key }), 401, 'INVALID_API_KEY');
    const row = await t.db.query('select revoked_at from api_keys where id = $1', [id]);
    expect(row.rows[0].revoked_at).not.toBeNull();
  });

  it('unknown key ids → 404 NOT_FOUND on revoke', async () => {
    await expectError(await t.rest('DELETE', '/v1/settings/api-keys/key_doesnotexist', { key: org.liveKey }), 404, 'NOT_FOUND');
  });
});

describe('API key creation and listing', () => {
  let org: TestOrg;
  beforeAll(async () => { org = await newOrg(); });

  it('returns the full key once; listings show only prefix and last 4; the database keeps a keyed hash', async () => {
    const created = await createKey(org.liveKey, { name: 'build server', role: 'developer' });
    expect(created.status).toBe(201);
    const data = created.body.data as ApiKeyView & { key: string };
    expect(data.key).toMatch(/^svc_live_sk_[0-9A-Za-z]{40}$/);
    expect(data).toMatchObject({ name: 'build server', role: 'developer', mode: 'live', prefix: 'svc_live_sk_', last4: data.key.slice(-4), last_used_at: null, revoked_at: null });
    expect(data.id).toMatch(/^key_/);
    expect(Object.keys(data)).not.toContain('key_hash');
    const { id, key } = data;
    const secretPart = key.slice('svc_live_sk_'.length);

    // The new key works, with its own role.
    const me = await whoAmI({ key });
    expect(me).toMatchObject({ role: 'developer', mode: 'live', actor: { type: 'api_key', id } });

    // Listing (REST): prefix + last4 only, never the key or its hash.
    const list = await t.rest('GET', '/v1/settings/api-keys?limit=100', { key: org.liveKey });
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(secretPart);
    expect(list.text).not.toContain('key_hash');
    const items = list.body.data as ApiKeyView[];
    const item = items.find((k) => k.id === id);
    expect(item).toBeDefined();
    expect(Object.keys(item!).sort()).toEqual(['created_at', 'id', 'last4', 'last_used_at', 'mode', 'name', 'prefix', 'revoked_at', 'role']);
    expect(item).toMatchObject({ prefix: 'svc_live_sk_', last4: key.slice(-4) });
    for (const k of items) expect(k.key).toBeUndefined();

    const one = await t.rest('GET', `/v1/settings/api-keys/${id}`, { key: org.liveKey });
    expect(one.status).toBe(200);
    expect(one.text).not.toContain(secretPart);

    // GraphQL has no field that could leak it either.
    const gql = await t.gql<{ apiKeys: { edges: { node: Record<string, unknown> }[] } }>(
      '{ apiKeys(first: 100) { edges { node { id prefix last4 } } } }', {}, { key: org.liveKey },
    );
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data?.apiKeys.edges.map((e) => e.node)).toContainEqual({ id, prefix: 'svc_live_sk_', last4: key.slice(-4) });
    expect(gql.text).not.toContain(secretPart);

    // The stored hash is keyed (HMAC), not the key and not a plain digest of it.
    const { rows } = await t.db.query('select key_hash, prefix, last4 from api_keys where id = $1', [id]);
    expect(rows[0].key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0].key_hash).not.toBe(key);
    expect(rows[0].key_hash).not.toContain(secretPart);
    expect(rows[0].key_hash).not.toBe(createHash('sha256').update(key).digest('hex'));
    expect(rows[0]).toMatchObject({ prefix: 'svc_live_sk_', last4: key.slice(-4) });
  });

  it('sets last_used_at when the key is used', async () => {
    const created = await createKey(org.liveKey, { name: 'usage', role: 'viewer' });
    expect(created.status).toBe(201);
    const { id, key } = created.body.data as ApiKeyView & { key: string };
    const before = await t.db.query('select last_used_at from api_keys where id = $1', [id]);
    expect(before.rows[0].last_used_at).toBeNull();

    const usedAt = t.clock.now().toISOString();
    await whoAmI({ key });
    const stamped = await eventually('last_used_at', async () => {
      const { rows } = await t.db.query('select last_used_at from api_keys where id = $1', [id]);
      return rows[0].last_used_at ? (rows[0].last_used_at as Date) : undefined;
    });
    expect(stamped.toISOString()).toBe(usedAt);
    const one = await t.rest('GET', `/v1/settings/api-keys/${id}`, { key: org.liveKey });
    expect(one.body.data.last_used_at).toBe(usedAt);
  });

  it('the mode defaults to the caller\'s mode', async () => {
    const created = await createKey(org.testKey, { role: 'viewer' });
    expect(created.status).toBe(201);
    expect(created.body.data.mode).toBe('test');
    expect(created.body.data.key).toMatch(/^svc_test_sk_/);
  });

  it('an admin cannot create an owner key (403 INSUFFICIENT_PERMISSIONS) but can create admin and lower keys', async () => {
    const adminKey = await t.createKey(org.orgId, 'admin', 'live');
    const res = await createKey(adminKey, { role: 'owner' });
    const body = await expectError(res, 403, 'INSUFFICIENT_PERMISSIONS');
    expect(body.error.details.field).toBe('role');
    expect((await createKey(adminKey, { role: 'admin' })).status).toBe(201);
    expect((await createKey(adminKey, { role: 'developer' })).status).toBe(201);
  });

  it('an admin cannot revoke an owner key', async () => {
    const adminKey = await t.createKey(org.orgId, 'admin', 'live');
    const ownerKeyId = (await whoAmI({ key: org.liveKey })).actor.id;
    await expectError(await t.rest('DELETE', `/v1/settings/api-keys/${ownerKeyId}`, { key: adminKey }), 403, 'INSUFFICIENT_PERMISSIONS');
    expect((await whoAmI({ key: org.liveKey })).role).toBe('owner');
  });

  it('a developer key may not create keys at all', async () => {
    const devKey = await t.createKey(org.orgId, 'developer', 'live');
    await expectError(await createKey(devKey, { role: 'viewer' }), 403, 'INSUFFICIENT_PERMISSIONS');
  });

  it('a test-mode API key cannot create or revoke live keys (403 FORBIDDEN); a user in test mode can create one', async () => {
    const res = await createKey(org.testKey, { role: 'developer', mode: 'live' });
    const body = await expectError(res, 403, 'FORBIDDEN');
    expect(body.error.details.field).toBe('mode');
    const { rows } = await t.db.query(`select count(*)::int as n from api_keys where organization_id = $1 and mode = 'live' and created_by <> 'system'`, [org.orgId]);
    const liveBefore = rows[0].n as number;

    const live = await createKey(org.liveKey, { role: 'viewer' });
    expect(live.status).toBe(201);
    await expectError(await t.rest('DELETE', `/v1/settings/api-keys/${live.body.data.id}`, { key: org.testKey }), 403, 'FORBIDDEN');
    expect((await whoAmI({ key: live.body.data.key })).role).toBe('viewer');

    const token = await t.mintToken(org.orgId, 'owner-user@example.com', 'owner', { mode: 'test' });
    const byUser = await t.rest('POST', '/v1/settings/api-keys', { token, body: { role: 'developer', mode: 'live' } });
    expect(byUser.status).toBe(201);
    expect(byUser.body.data.mode).toBe('live');
    const after = await t.db.query(`select count(*)::int as n from api_keys where organization_id = $1 and mode = 'live' and created_by <> 'system'`, [org.orgId]);
    expect(after.rows[0].n).toBe(liveBefore + 2);
  });

  it('GraphQL createApiKey returns the key once and enforces the same role rule', async () => {
    const adminKey = await t.createKey(org.orgId, 'admin', 'test');
    const mutation = 'mutation Create($input: CreateApiKeyInput!) { createApiKey(input: $input) { key apiKey { id role mode prefix last4 } } }';
    const ok = await t.gql<{ createApiKey: { key: string; apiKey: { id: string; role: string; mode: string; prefix: string; last4: string } } }>(
      mutation, { input: { role: 'viewer', name: 'gql' } }, { key: adminKey },
    );
    expect(ok.body.errors).toBeUndefined();
    const payload = ok.body.data!.createApiKey;
    expect(payload.key).toMatch(/^svc_test_sk_[0-9A-Za-z]{40}$/);
    expect(payload.apiKey).toMatchObject({ role: 'viewer', mode: 'test', prefix: 'svc_test_sk_', last4: payload.key.slice(-4) });
    const denied = await t.gql(mutation, { input: { role: 'owner' } }, { key: adminKey });
    expectGqlError(denied, 'INSUFFICIENT_PERMISSIONS');
  });
});

describe('Bearer JWT authentication', () => {
  let org: TestOrg;
  beforeAll(async () => { org = await newOrg(); });

  it('a valid token works; the role comes from team membership', async () => {
    const token = await t.mintToken(org.orgId, 'Dev.One@Example.com', 'developer');
    const me = await whoAmI({ token });
    expect(me.organization.id).toBe(org.orgId);
    expect(me.role).toBe('developer');
    expect(me.mode).toBe('test');
    expect(me.actor.type).toBe('user');
    const { rows } = await t.db.query('select id from users where email = $1', ['dev.one@example.com']);
    expect(me.actor.id).toBe(rows[0].id);

    const gql = await t.gql('{ viewer { role mode actorType organization { id } } }', {}, { token });
    expect(gql.body.data).toEqual({ viewer: { role: 'developer', mode: 'test', actorType: 'user', organization: { id: org.orgId } } });
  });

  it('changing the membership role changes permissions without a new token', async () => {
    const email = 'promoted@example.com';
    const token = await t.mintToken(org.orgId, email, 'viewer');
    expect((await whoAmI({ token })).role).toBe('viewer');
    await expectError(await t.rest('POST', '/v1/settings/api-keys', { token, body: { role: 'viewer' } }), 403, 'INSUFFICIENT_PERMISSIONS');

    await t.mintToken(org.orgId, email, 'admin'); // upserts the membership; the new token is not used
    expect((await whoAmI({ token })).role).toBe('admin');
    const created = await t.rest('POST', '/v1/settings/api-keys', { token, body: { role: 'viewer' } });
    expect(created.status).toBe(201);

    await t.mintToken(org.orgId, email, 'viewer');
    await expectError(await t.rest('POST', '/v1/settings/api-keys', { token, body: { role: 'viewer' } }), 403, 'INSUFFICIENT_PERMISSIONS');
  });

  it('an expired token → 401 EXPIRED_TOKEN', async () => {
    const token = await t.mintToken(org.orgId, 'short@example.com', 'developer', { ttlSeconds: 60 });
    expect((await whoAmI({ token })).role).toBe('developer');
    clock.advance(61_000);
    const body = await expectError(await t.rest('GET', '/v1/settings/organization', { token }), 401, 'EXPIRED_TOKEN');
    expect(body.meta.docs_url).toMatch(/#expired_token$/);
    const gql = await t.gql('{ viewer { role } }', {}, { token });
    expect(gql.status).toBe(401);
    expectGqlError(gql, 'EXPIRED_TOKEN');
  });

  it('a token signed with the wrong secret → 401 UNAUTHORIZED', async () => {
    await t.mintToken(org.orgId, 'forger@example.com', 'owner'); // a real member, so only the signature is wrong
    const token = await t.mintToken(org.orgId, 'forger@example.com', 'owner', { secret: 'not-the-server-secret-0123456789ab' });
    await expectError(await t.rest('GET', '/v1/settings/organization', { token }), 401, 'UNAUTHORIZED');
  });

  it('an unsigned alg:none token → 401 UNAUTHORIZED', async () => {
    const email = 'nosig@example.com';
    const good = await t.mintToken(org.orgId, email, 'owner');
    expect((await whoAmI({ token: good })).role).toBe('owner');
    const now = Math.floor(t.clock.now().getTime() / 1000);
    const claims = { org_id: org.orgId, email, sub: email, mode: 'test', iat: now, exp: now + 3600 };
    for (const header of [{ alg: 'none' }, { alg: 'none', typ: 'JWT' }, { alg: 'NONE' }]) {
      const unsigned = `${b64url(header)}.${b64url(claims)}.`;
      await expectError(await t.rest('GET', '/v1/settings/organization', { token: unsigned }), 401, 'UNAUTHORIZED');
    }
    // The real token's payload with its signature stripped is rejected too.
    const [h, p] = good.split('.');
    await expectError(await t.rest('GET', '/v1/settings/organization', { token: `${h}.${p}.` }), 401, 'UNAUTHORIZED');
  });

  it('garbage and non-bearer authorization headers → 401 UNAUTHORIZED', async () => {
    await expectError(await t.rest('GET', '/v1/settings/organization', { token: 'abc.def.ghi' }), 401, 'UNAUTHORIZED');
    await expectError(await t.rest('GET', '/v1/settings/organization', { headers: { Authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } }), 401, 'UNAUTHORIZED');
  });

  it('a token for an organization that does not exist → 404 TENANT_NOT_FOUND', async () => {
    await t.mintToken(org.orgId, 'wanderer@example.com', 'owner');
    const token = await signToken({ org_id: 'org_01doesnotexist0000000000', email: 'wanderer@example.com', sub: 'wanderer@example.com', mode: 'test' });
    await expectError(await t.rest('GET', '/v1/settings/organization', { token }), 404, 'TENANT_NOT_FOUND');
  });

  it('a token for a user who is not a member of the organization → 403 FORBIDDEN', async () => {
    const other = await newOrg();
    await t.mintToken(other.orgId, 'outsider@example.com', 'owner'); // a member elsewhere
    const token = await signToken({ org_id: org.orgId, email: 'outsider@example.com', sub: 'outsider@example.com', mode: 'test' });
    await expectError(await t.rest('GET', '/v1/settings/organization', { token }), 403, 'FORBIDDEN');
    // A user who exists nowhere is no different.
    const stranger = await signToken({ org_id: org.orgId, email: 'nobody-at-all@example.com', mode: 'test' });
    await expectError(await t.rest('GET', '/v1/settings/organization', { token: stranger }), 403, 'FORBIDDEN');
    // The same person's token for the organization they belong to works.
    const theirs = await signToken({ org_id: other.orgId, email: 'outsider@example.com', mode: 'test' });
    expect((await whoAmI({ token: theirs })).organization.id).toBe(other.orgId);
  });
});

describe('IP allowlist', () => {
  /** A fresh organization (so lock-outs stay local) with the allowlist set through the API. */
  async function orgWithAllowlist(entries: string[]): Promise<{ org: TestOrg; res: HttpResponse }> {
    const org = await newOrg();
    const res = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries } });
    return { org, res };
  }

  it.each([
    ['127.0.0.1', ['127.0.0.1']],
    ['127.0.0.0/8', ['127.0.0.0/8']],
    ['::ffff:127.0.0.1 (IPv4-mapped)', ['::ffff:127.0.0.1']],
    ['a list that also holds other ranges', ['10.0.0.0/8', '2001:db8::/32', '127.0.0.1']],
  ])('allows 127.0.0.1 when the list holds %s', async (_label, entries) => {
    const { org, res } = await orgWithAllowlist(entries);
    expect(res.status).toBe(200);
    expect(res.body.data.entries).toHaveLength(entries.length);
    const get = await t.rest('GET', '/v1/settings/ip-allowlist', { key: org.liveKey });
    expect(get.status).toBe(200);
    expect(get.body.data.entries).toEqual(res.body.data.entries);
    expect((await whoAmI({ key: org.testKey })).organization.id).toBe(org.orgId);
    const token = await t.mintToken(org.orgId, `allowed-${org.orgId}@example.com`, 'viewer');
    expect((await whoAmI({ token })).role).toBe('viewer');
  });

  it('denies requests from 127.0.0.1 with 403 FORBIDDEN when the list only holds 10.0.0.0/8 (keys, tokens, GraphQL)', async () => {
    const { org, res } = await orgWithAllowlist(['10.0.0.0/8']);
    expect(res.status).toBe(200);
    expect(res.body.data.entries).toEqual(['10.0.0.0/8']);

    const body = await expectError(await t.rest('GET', '/v1/settings/organization', { key: org.liveKey }), 403, 'FORBIDDEN');
    expect(body.error.details.ip).toBe('127.0.0.1');
    const token = await t.mintToken(org.orgId, 'blocked@example.com', 'owner');
    await expectError(await t.rest('GET', '/v1/settings/organization', { token }), 403, 'FORBIDDEN');
    const gql = await t.gql('{ viewer { role } }', {}, { key: org.testKey });
    expect(gql.status).toBe(403);
    expectGqlError(gql, 'FORBIDDEN');
    // Even the owner cannot lift it from the wrong address.
    await expectError(await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: [] } }), 403, 'FORBIDDEN');
    const { rows } = await t.db.query('select ip_allowlist from organizations where id = $1', [org.orgId]);
    expect(rows[0].ip_allowlist).toEqual(['10.0.0.0/8']);

    // The denial is audited (fire-and-forget, so poll the table).
    const denied = await eventually('auth.ip_denied audit', async () => {
      const r = await t.db.query(`select * from audit_log_entries where organization_id = $1 and action = 'auth.ip_denied'`, [org.orgId]);
      return r.rows.length > 0 ? r.rows : undefined;
    });
    expect(denied[0].ip).toBe('127.0.0.1');
    expect(denied[0].details).toMatchObject({ ip: '127.0.0.1', denied: true });
  });

  it('an IPv6-only list accepts IPv6 CIDRs and denies an IPv4 client', async () => {
    const { org, res } = await orgWithAllowlist(['2001:DB8::/32', 'fd00::1']);
    expect(res.status).toBe(200);
    expect(res.body.data.entries).toEqual(['2001:db8::/32', 'fd00::1']);
    await expectError(await t.rest('GET', '/v1/settings/organization', { key: org.liveKey }), 403, 'FORBIDDEN');
  });

  it('an empty list lifts the restriction', async () => {
    const org = await newOrg();
    expect((await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: ['127.0.0.1'] } })).status).toBe(200);
    const cleared = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: [] } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.data.entries).toEqual([]);
    const { rows } = await t.db.query('select ip_allowlist from organizations where id = $1', [org.orgId]);
    expect(rows[0].ip_allowlist).toEqual([]);
  });

  it('rejects invalid entries with 422 VALIDATION_ERROR and leaves the list unchanged', async () => {
    const { org, res } = await orgWithAllowlist(['127.0.0.1']);
    expect(res.status).toBe(200);
    for (const bad of ['not-an-ip', '10.0.0.0/33', '300.1.2.3', '10.0.0.0/8/1', '2001:db8::/129', '10.0.0.0/-1', '']) {
      const r = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: ['10.0.0.0/8', bad] } });
      const body = await expectError(r, 422, 'VALIDATION_ERROR');
      expect(String(body.error.details.field)).toMatch(/^entries/);
    }
    const get = await t.rest('GET', '/v1/settings/ip-allowlist', { key: org.liveKey });
    expect(get.body.data.entries).toEqual(['127.0.0.1']);
    // GraphQL twin validates the same way.
    const gql = await t.gql('mutation { setIpAllowlist(entries: ["999.0.0.1"]) }', {}, { key: org.liveKey });
    expectGqlError(gql, 'VALIDATION_ERROR');
  });

  it('only admins may change the allowlist', async () => {
    const org = await newOrg();
    const devKey = await t.createKey(org.orgId, 'developer');
    await expectError(await t.rest('PUT', '/v1/settings/ip-allowlist', { key: devKey, body: { entries: ['10.0.0.0/8'] } }), 403, 'INSUFFICIENT_PERMISSIONS');
    expect((await whoAmI({ key: org.liveKey })).role).toBe('owner');
  });

  it('ignores X-Forwarded-For when the peer is not a trusted proxy', async () => {
    const { org, res } = await orgWithAllowlist(['203.0.113.0/24']);
    expect(res.status).toBe(200);
    const body = await expectError(
      await t.rest('GET', '/v1/settings/organization', { key: org.liveKey, headers: { 'X-Forwarded-For': '203.0.113.7' } }), 403, 'FORBIDDEN',
    );
    expect(body.error.details.ip).toBe('127.0.0.1');
  });

  describe('behind a trusted proxy', () => {
    let tp: TestApp;
    beforeAll(async () => { tp = await startTestApp({ env: { TRUSTED_PROXIES: '127.0.0.1' } }); });
    afterAll(async () => { await tp?.close(); });
    beforeEach(() => { (tp.clock as ManualClock).advance(1_000); });

    const get = (key: string, xff?: string) =>
      tp.rest('GET', '/v1/settings/organization', { key, ...(xff ? { headers: { 'X-Forwarded-For': xff } } : {}) });

    it('honours X-Forwarded-For (right-most untrusted hop) from a trusted peer', async () => {
      const org = await tp.createOrg('enterprise');
      const put = await tp.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: ['203.0.113.0/24'] } });
      expect(put.status).toBe(200);

      const ok = await get(org.liveKey, '203.0.113.7');
      expect(ok.status).toBe(200);
      expect(ok.body.data.organization.id).toBe(org.orgId);
      // Trusted hops on the right are skipped; a spoofed left-most entry does not matter.
      expect((await get(org.liveKey, '198.51.100.9, 203.0.113.7')).status).toBe(200);
      expect((await get(org.liveKey, '203.0.113.7, 127.0.0.1')).status).toBe(200);

      // Without the header the peer itself (127.0.0.1) is the client: denied.
      const direct = await expectError(await get(org.liveKey), 403, 'FORBIDDEN');
      expect(direct.error.details.ip).toBe('127.0.0.1');
      // A client cannot smuggle an allowed address in front of its own.
      const smuggled = await expectError(await get(org.liveKey, '203.0.113.7, 198.51.100.9'), 403, 'FORBIDDEN');
      expect(smuggled.error.details.ip).toBe('198.51.100.9');

      // The audit log records the forwarded client address.
      const created = await tp.rest('POST', '/v1/settings/api-keys', { key: org.liveKey, body: { role: 'viewer' }, headers: { 'X-Forwarded-For': '203.0.113.7' } });
      expect(created.status).toBe(201);
      const entry = await findAudit(org.liveKey, 'api_key.created via proxy', (e) => e.action === 'api_key.created' && e.resource_id === created.body.data.id,
        tp, { 'X-Forwarded-For': '203.0.113.7' });
      expect(entry.ip).toBe('203.0.113.7');
    });
  });
});

describe('audit log', () => {
  let org: TestOrg;
  let adminKey: string;
  let adminKeyId: string;
  beforeAll(async () => {
    org = await newOrg();
    adminKey = await t.createKey(org.orgId, 'admin', 'live');
    adminKeyId = (await whoAmI({ key: adminKey })).actor.id;
  });

  it('records key creation and revocation with actor, action, resource and ip', async () => {
    const created = await createKey(adminKey, { name: 'audited', role: 'developer' });
    expect(created.status).toBe(201);
    const keyId = created.body.data.id as string;
    const revoked = await t.rest('DELETE', `/v1/settings/api-keys/${keyId}`, { key: adminKey });
    expect(revoked.status).toBe(200);

    const entries = await auditLogs(org.liveKey);
    const creation = entries.find((e) => e.action === 'api_key.created' && e.resource_id === keyId);
    expect(creation).toMatchObject({
      actor_type: 'api_key', actor_id: adminKeyId, resource_type: 'api_key', resource_id: keyId, ip: '127.0.0.1',
      request_id: created.body.meta.request_id, details: { role: 'developer', mode: 'live' },
    });
    const revocation = entries.find((e) => e.action === 'api_key.revoked' && e.resource_id === keyId);
    expect(revocation).toMatchObject({
      actor_type: 'api_key', actor_id: adminKeyId, resource_type: 'api_key', resource_id: keyId, ip: '127.0.0.1',
      request_id: revoked.body.meta.request_id,
    });
    // The key never appears in the audit log.
    expect(JSON.stringify(entries)).not.toContain(created.body.data.key.slice(12));

    // Using the revoked key is audited as a denial.
    await expectError(await t.rest('GET', '/v1/settings/organization', { key: created.body.data.key }), 401, 'INVALID_API_KEY');
    const used = await findAudit(org.liveKey, 'auth.api_key_revoked_used', (e) => e.action === 'auth.api_key_revoked_used' && e.actor_id === keyId);
    expect(used).toMatchObject({ actor_type: 'api_key', ip: '127.0.0.1', details: { denied: true } });

    // A single entry is readable by id.
    const one = await t.rest('GET', `/v1/settings/audit-logs/${creation!.id}`, { key: org.liveKey });
    expect(one.status).toBe(200);
    expect(one.body.data).toEqual(creation);
  });

  it('records IP allowlist changes with before and after', async () => {
    const set = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: adminKey, body: { entries: ['127.0.0.0/8', '2001:db8::/32'] } });
    expect(set.status).toBe(200);
    const reset = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: adminKey, body: { entries: [] } });
    expect(reset.status).toBe(200);

    const entries = (await auditLogs(org.liveKey)).filter((e) => e.action === 'settings.ip_allowlist_updated');
    const first = entries.find((e) => e.request_id === set.body.meta.request_id);
    expect(first).toMatchObject({
      actor_type: 'api_key', actor_id: adminKeyId, resource_type: 'organization', resource_id: org.orgId, ip: '127.0.0.1',
      details: { before: [], after: ['127.0.0.0/8', '2001:db8::/32'] },
    });
    const second = entries.find((e) => e.request_id === reset.body.meta.request_id);
    expect(second?.details).toEqual({ before: ['127.0.0.0/8', '2001:db8::/32'], after: [] });
  });

  it('records a permission-denied request', async () => {
    const viewerKey = await t.createKey(org.orgId, 'viewer', 'live');
    const viewerId = (await whoAmI({ key: viewerKey })).actor.id;
    const res = await createKey(viewerKey, { role: 'owner' });
    await expectError(res, 403, 'INSUFFICIENT_PERMISSIONS');
    const entry = await findAudit(org.liveKey, 'auth.permission_denied', (e) => e.action === 'auth.permission_denied' && e.actor_id === viewerId);
    expect(entry).toMatchObject({
      actor_type: 'api_key', actor_id: viewerId, ip: '127.0.0.1', request_id: res.body.meta.request_id,
      details: { operation: 'settings.createApiKey', role: 'viewer', denied: true },
    });
    // The denied request created nothing.
    const { rows } = await t.db.query(`select count(*)::int as n from api_keys where organization_id = $1 and created_by = $2`, [org.orgId, viewerId]);
    expect(rows[0].n).toBe(0);
  });

  it('records a permission-denied GraphQL operation the same way', async () => {
    const viewerKey = await t.createKey(org.orgId, 'viewer', 'live');
    const viewerId = (await whoAmI({ key: viewerKey })).actor.id;
    const res = await t.gql('mutation { setIpAllowlist(entries: ["10.0.0.0/8"]) }', {}, { key: viewerKey });
    expectGqlError(res, 'INSUFFICIENT_PERMISSIONS');
    const entry = await findAudit(org.liveKey, 'auth.permission_denied (GraphQL)', (e) => e.action === 'auth.permission_denied' && e.actor_id === viewerId);
    expect(entry).toMatchObject({ actor_type: 'api_key', ip: '127.0.0.1', details: { field: 'Mutation.setIpAllowlist', role: 'viewer', denied: true } });
    const { rows } = await t.db.query('select ip_allowlist from organizations where id = $1', [org.orgId]);
    expect(rows[0].ip_allowlist).toEqual([]);
  });

  it('records the first use of a bearer token session once', async () => {
    const email = 'session-user@example.com';
    const token = await t.mintToken(org.orgId, email, 'developer', { sid: 'sess-audit-1' });
    const [a, b] = await Promise.all([
      t.rest('GET', '/v1/settings/organization', { token }),
      t.rest('GET', '/v1/settings/organization', { token }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect((await whoAmI({ token })).role).toBe('developer');
    const userId = a.body.data.actor.id as string;
    expect(userId).toMatch(/^usr_/);

    const started = (await auditLogs(org.liveKey)).filter((e) => e.action === 'auth.token_session_started');
    expect(started).toHaveLength(1);
    expect(started[0]).toMatchObject({ actor_type: 'user', actor_id: userId, ip: '127.0.0.1', details: { session_id: 'sess-audit-1' } });
    expect([a.body.meta.request_id, b.body.meta.request_id]).toContain(started[0]!.request_id);

    // A new token for the same session is still the same session; a new sid is a new one.
    const sameSession = await t.mintToken(org.orgId, email, 'developer', { sid: 'sess-audit-1' });
    expect((await whoAmI({ token: sameSession })).actor.id).toBe(userId);
    const otherSession = await t.mintToken(org.orgId, email, 'developer', { sid: 'sess-audit-2' });
    expect((await whoAmI({ token: otherSession })).actor.id).toBe(userId);
    const after = (await auditLogs(org.liveKey)).filter((e) => e.action === 'auth.token_session_started');
    expect(after.map((e) => e.details.session_id).sort()).toEqual(['sess-audit-1', 'sess-audit-2']);
    const { rows } = await t.db.query('select session_id, user_id from token_sessions where organization_id = $1 order by session_id', [org.orgId]);
    expect(rows).toEqual([{ session_id: 'sess-audit-1', user_id: userId }, { session_id: 'sess-audit-2', user_id: userId }]);
  });

  it('only admins read the audit log', async () => {
    const devKey = await t.createKey(org.orgId, 'developer', 'live');
    await expectError(await t.rest('GET', '/v1/settings/audit-logs', { key: devKey }), 403, 'INSUFFICIENT_PERMISSIONS');
    await expectError(await t.rest('GET', '/v1/settings/audit-logs/export?format=csv', { key: devKey }), 403, 'INSUFFICIENT_PERMISSIONS');
  });

  describe('export', () => {
    it('CSV: text/csv with a header row and the entries', async () => {
      const created = await createKey(adminKey, { name: 'for export', role: 'viewer' });
      expect(created.status).toBe(201);
      const res = await t.rest('GET', '/v1/settings/audit-logs/export?format=csv&date_range=90d', { key: org.liveKey });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
      expect(res.headers.get('content-disposition')).toMatch(/^attachment/);
      const lines = res.text.split('\r\n').filter(Boolean);
      expect(lines[0]).toBe('id,created_at,actor_type,actor_id,action,resource_type,resource_id,ip,request_id,details');
      const row = lines.find((l) => l.includes(`"${created.body.data.id}"`) && l.includes('"api_key.created"'));
      expect(row).toBeDefined();
      expect(row).toContain('"127.0.0.1"');
      expect(row).toContain(`"${adminKeyId}"`);
      expect(lines.length).toBeGreaterThan(3);
    });

    it('JSON: the envelope with an array of entries', async () => {
      const res = await t.rest('GET', '/v1/settings/audit-logs/export?format=json&date_range=90d', { key: org.liveKey });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Array.isArray(res.body.data)).toBe(true);
      const entries = res.body.data as AuditEntry[];
      expect(entries.length).toBeGreaterThan(3);
      expect(entries.some((e) => e.action === 'api_key.created' && e.actor_id === adminKeyId)).toBe(true);
      expect(entries.every((e) => typeof e.id === 'string' && typeof e.action === 'string' && typeof e.created_at === 'string')).toBe(true);
      expect(res.body.meta.request_id).toMatch(/^req_/);
    });

    it('exports are audited', async () => {
      const res = await t.rest('GET', '/v1/settings/audit-logs/export?format=json&date_range=7d', { key: org.liveKey });
      expect(res.status).toBe(200);
      const entry = await findAudit(org.liveKey, 'audit_log.exported', (e) => e.action === 'audit_log.exported' && e.request_id === res.body.meta.request_id);
      expect(entry).toMatchObject({ actor_type: 'api_key', ip: '127.0.0.1', details: { format: 'json', date_range: '7d' } });
    });

    it('a date range beyond the 90-day retention → 422 VALIDATION_ERROR', async () => {
      await expectError(await t.rest('GET', '/v1/settings/audit-logs/export?format=csv&date_range=91d', { key: org.liveKey }), 422, 'VALIDATION_ERROR');
      await expectError(await t.rest('GET', '/v1/settings/audit-logs/export?format=csv&date_range=0d', { key: org.liveKey }), 422, 'VALIDATION_ERROR');
      await expectError(await t.rest('GET', '/v1/settings/audit-logs/export?format=xml', { key: org.liveKey }), 422, 'VALIDATION_ERROR');
      const gql = await t.gql('{ auditLogExport(format: csv, dateRange: "91d") { count } }', {}, { key: org.liveKey });
      expectGqlError(gql, 'VALIDATION_ERROR');
    });

    it('GraphQL auditLogExport(format: csv) returns the CSV content', async () => {
      const res = await t.gql<{ auditLogExport: { format: string; count: number; contentType: string; content: string } }>(
        '{ auditLogExport(format: csv) { format count contentType content } }', {}, { key: org.liveKey },
      );
      expect(res.body.errors).toBeUndefined();
      const out = res.body.data!.auditLogExport;
      expect(out.format).toBe('csv');
      expect(out.contentType).toBe('text/csv');
      const lines = out.content.split('\r\n').filter(Boolean);
      expect(lines[0]).toBe('id,created_at,actor_type,actor_id,action,resource_type,resource_id,ip,request_id,details');
      expect(lines.length - 1).toBe(out.count);
      expect(out.count).toBeGreaterThan(3);
      expect(lines.some((l) => l.includes('"api_key.created"'))).toBe(true);
    });

    it('the export only covers the requested window', async () => {
      const other = await newOrg();
      await t.rest('PUT', '/v1/settings/ip-allowlist', { key: other.liveKey, body: { entries: [] } });
      clock.advance(3 * 86_400_000);
      const recent = await t.rest('GET', '/v1/settings/audit-logs/export?format=json&date_range=2d', { key: other.liveKey });
      expect(recent.status).toBe(200);
      expect((recent.body.data as AuditEntry[]).some((e) => e.action === 'settings.ip_allowlist_updated')).toBe(false);
      const wider = await t.rest('GET', '/v1/settings/audit-logs/export?format=json&date_range=4d', { key: other.liveKey });
      expect((wider.body.data as AuditEntry[]).some((e) => e.action === 'settings.ip_allowlist_updated')).toBe(true);
    });
  });
});
