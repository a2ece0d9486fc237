/**
 * Authentication end to end over HTTP: API keys (creation, listing, revocation on both surfaces,
 * role escalation) and bearer JWTs (membership roles, expiry, forged and unsigned tokens, unknown
 * tenants, non-members). The IP allowlist is in auth-allowlist.test.ts, the audit trail and its
 * exports in auth-audit.test.ts.
 */
import { createHash } from 'node:crypto';
import { SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { TEST_JWT_SECRET, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { expectError, expectGqlError, eventually, type ErrorBody } from './helpers/assertions.ts';
import { authHelpers, useAuthApp } from './helpers/auth.ts';

const file = useAuthApp();
let t: TestApp;
let clock: ManualClock;
beforeAll(() => { t = file(); clock = t.clock as ManualClock; });
const { newOrg, whoAmI, createKey } = authHelpers(() => t);

const UNKNOWN_KEY = `svc_test_sk_${'A'.repeat(40)}`;

/** A bearer token signed by hand (the helper's mintToken upserts a membership, which some cases must avoid). */
async function signToken(claims: Record<string, unknown>, o: { ttlSeconds?: number; secret?: string } = {}): Promise<string> {
  const now = Math.floor(t.clock.now().getTime() / 1000);
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt(now).setExpirationTime(now + (o.ttlSeconds ?? 3600))
    .sign(new TextEncoder().encode(o.secret ?? TEST_JWT_SECRET));
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

type ApiKeyView = {
  id: string; name: string | null; role: string; mode: string; prefix: string; last4: string;
  created_at: string; last_used_at: string | null; revoked_at: string | null; key?: string;
};

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
