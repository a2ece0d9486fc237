/**
 * Idempotency-Key through real HTTP: replay byte for byte, conflicts, scoping per organization and
 * mode, concurrent duplicates, the 24 h lifetime (on the ManualClock), and GraphQL mutations.
 * Organizations are on the growth plan so a test's handful of requests never waits in the burst queue.
 */
import { beforeEach, afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../src/platform/clock.ts';
import { requestHash } from '../src/platform/idempotency.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let clock: ManualClock;
beforeAll(async () => {
  t = await startTestApp();
  clock = t.clock as ManualClock;
});
afterAll(async () => { await t?.close(); });
// A fresh second (burst slots) for every test.
beforeEach(() => { clock.advance(1000); });

const KEYS = '/v1/settings/api-keys';
const CREATE_KEY = 'mutation ($input: CreateApiKeyInput!) { createApiKey(input: $input) { key apiKey { id role mode name } } }';

let seq = 0;
const newIdemKey = () => `idem-${Date.now().toString(36)}-${++seq}`;

function createKey(apiKey: string, idemKey: string | undefined, body: unknown = { role: 'viewer', name: 'idempotent' }): Promise<HttpResponse> {
  return t.rest('POST', KEYS, { key: apiKey, body, headers: idemKey === undefined ? {} : { 'Idempotency-Key': idemKey } });
}

async function countKeys(orgId: string, mode?: 'test' | 'live'): Promise<number> {
  const { rows } = await t.db.query(
    'select count(*) from api_keys where organization_id = $1 and ($2::text is null or mode = $2)', [orgId, mode ?? null]);
  return Number(rows[0].count);
}

async function idemRow(org: TestOrg, mode: 'test' | 'live', key: string) {
  const { rows } = await t.db.query('select * from idempotency_keys where organization_id = $1 and mode = $2 and key = $3', [org.orgId, mode, key]);
  return rows[0] as { state: string; response_status: number | null; request_hash: string } | undefined;
}

describe('REST replay', () => {
  it('the second identical request replays status and body byte for byte and creates nothing', async () => {
    const org = await t.createOrg('growth');
    const before = await countKeys(org.orgId);
    const key = newIdemKey();
    // Start of a fresh minute, so both requests share one rate-limit window.
    clock.set(Math.ceil(clock.now().getTime() / 60_000) * 60_000 + 1000);

    const first = await createKey(org.testKey, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.body.data).toMatchObject({ role: 'viewer', mode: 'test', name: 'idempotent' });
    expect(await countKeys(org.orgId)).toBe(before + 1);

    clock.advance(5000);
    const second = await createKey(org.testKey, key);
    expect(second.status).toBe(201);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.headers.get('content-type')).toBe(first.headers.get('content-type'));
    // The replay still counts against the window and reports it.
    expect(second.headers.get('x-ratelimit-remaining')).toBe(String(Number(first.headers.get('x-ratelimit-remaining')) - 1));
    // A new request id for the replay, while the body keeps the original one.
    expect(second.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));

    const third = await createKey(org.testKey, key);
    expect(third.text).toBe(first.text);
    expect(await countKeys(org.orgId)).toBe(before + 1);
    expect(await idemRow(org, 'test', key)).toMatchObject({ state: 'done', response_status: 201 });

    // The key created by the first request works.
    const use = await t.rest('GET', '/v1/settings/organization', { key: first.body.data.key });
    expect(use.status).toBe(200);
  });

  it('without the header every request creates a key', async () => {
    const org = await t.createOrg('growth');
    const before = await countKeys(org.orgId);
    const a = await createKey(org.testKey, undefined);
    const b = await createKey(org.testKey, undefined);
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(a.body.data.id).not.toBe(b.body.data.id);
    expect(await countKeys(org.orgId)).toBe(before + 2);
  });

  it('the same key with a different body is 409 CONFLICT and creates nothing', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    expect((await createKey(org.testKey, key, { role: 'viewer', name: 'one' })).status).toBe(201);
    const before = await countKeys(org.orgId);

    const other = await createKey(org.testKey, key, { role: 'viewer', name: 'two' });
    expect(other.status).toBe(409);
    expect(other.body.error).toMatchObject({ code: 'CONFLICT', status: 409, details: { idempotency_key: key } });
    expect(other.headers.get('idempotent-replayed')).toBeNull();
    expect(await countKeys(org.orgId)).toBe(before);

    // The original request still replays.
    const again = await createKey(org.testKey, key, { role: 'viewer', name: 'one' });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await countKeys(org.orgId)).toBe(before);
  });

  it('keys are scoped per organization: another organization with the same key creates its own', async () => {
    const a = await t.createOrg('growth', 'Org A');
    const b = await t.createOrg('growth', 'Org B');
    const key = newIdemKey();
    const [beforeA, beforeB] = [await countKeys(a.orgId), await countKeys(b.orgId)];

    const ra = await createKey(a.testKey, key);
    const rb = await createKey(b.testKey, key);
    expect([ra.status, rb.status]).toEqual([201, 201]);
    expect(rb.headers.get('idempotent-replayed')).toBeNull();
    expect(rb.body.data.id).not.toBe(ra.body.data.id);
    expect(rb.body.data.key).not.toBe(ra.body.data.key);
    expect([await countKeys(a.orgId), await countKeys(b.orgId)]).toEqual([beforeA + 1, beforeB + 1]);

    // Each organization replays its own response.
    expect((await createKey(a.testKey, key)).text).toBe(ra.text);
    expect((await createKey(b.testKey, key)).text).toBe(rb.text);
  });

  it('keys are scoped per mode: the same key in test and live mode are independent', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const [beforeTest, beforeLive] = [await countKeys(org.orgId, 'test'), await countKeys(org.orgId, 'live')];

    const inTest = await createKey(org.testKey, key);
    const inLive = await createKey(org.liveKey, key);
    expect([inTest.status, inLive.status]).toEqual([201, 201]);
    expect(inLive.headers.get('idempotent-replayed')).toBeNull();
    expect(inTest.body.data.mode).toBe('test');
    expect(inLive.body.data.mode).toBe('live');
    expect(inLive.body.data.id).not.toBe(inTest.body.data.id);
    expect([await countKeys(org.orgId, 'test'), await countKeys(org.orgId, 'live')]).toEqual([beforeTest + 1, beforeLive + 1]);

    const replayLive = await createKey(org.liveKey, key);
    expect(replayLive.text).toBe(inLive.text);
    expect(replayLive.headers.get('idempotent-replayed')).toBe('true');
  });

  it('validation errors (422) are stored and replayed too', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const before = await countKeys(org.orgId);

    const first = await createKey(org.testKey, key, { role: 'emperor' });
    expect(first.status).toBe(422);
    expect(first.body.error.code).toBe('VALIDATION_ERROR');
    const second = await createKey(org.testKey, key, { role: 'emperor' });
    expect(second.status).toBe(422);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await idemRow(org, 'test', key)).toMatchObject({ state: 'done', response_status: 422 });

    // The key is spent: a corrected request needs a new key.
    const corrected = await createKey(org.testKey, key, { role: 'viewer' });
    expect(corrected.status).toBe(409);
    expect(corrected.body.error.code).toBe('CONFLICT');
    expect(await countKeys(org.orgId)).toBe(before);
  });

  it('an invalid Idempotency-Key is 400 VALIDATION_ERROR and nothing is created or stored', async () => {
    const org = await t.createOrg('growth');
    const before = await countKeys(org.orgId);
    for (const bad of ['k'.repeat(256), 'x'.repeat(300), 'has space']) {
      const r = await createKey(org.testKey, bad);
      expect(r.status, bad).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400, details: { field: 'Idempotency-Key' } });
    }
    expect(await countKeys(org.orgId)).toBe(before);
    const { rows } = await t.db.query('select count(*) from idempotency_keys where organization_id = $1', [org.orgId]);
    expect(Number(rows[0].count)).toBe(0);

    // 255 visible ASCII characters are fine.
    const longest = await createKey(org.testKey, 'k'.repeat(255));
    expect(longest.status).toBe(201);
    expect(await countKeys(org.orgId)).toBe(before + 1);
  });
});

describe('concurrent and in-flight requests', () => {
  it('a request while the first with the same key is still running is 409 CONFLICT', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const body = { role: 'viewer', name: 'in flight' };
    const now = clock.now();
    await t.db.query(
      `insert into idempotency_keys (organization_id, mode, key, request_hash, state, created_at, locked_at)
       values ($1, 'test', $2, $3, 'running', $4, $4)`,
      [org.orgId, key, requestHash('POST', KEYS, JSON.stringify(body)), now],
    );
    const before = await countKeys(org.orgId);

    const r = await createKey(org.testKey, key, body);
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ code: 'CONFLICT', details: { idempotency_key: key } });
    expect(r.body.error.message).toMatch(/still being processed/);
    expect(await countKeys(org.orgId)).toBe(before);
    expect(await idemRow(org, 'test', key)).toMatchObject({ state: 'running' });

    // A different request with that key is a conflict of another kind.
    const different = await createKey(org.testKey, key, { role: 'viewer', name: 'other' });
    expect(different.status).toBe(409);
    expect(different.body.error.message).toMatch(/different request/);

    // A claim left running for a minute belongs to a crashed request and is taken over.
    clock.advance(60_000);
    const takeover = await createKey(org.testKey, key, body);
    expect(takeover.status).toBe(201);
    expect(takeover.headers.get('idempotent-replayed')).toBeNull();
    expect(await countKeys(org.orgId)).toBe(before + 1);
    expect(await idemRow(org, 'test', key)).toMatchObject({ state: 'done', response_status: 201 });
    expect((await createKey(org.testKey, key, body)).text).toBe(takeover.text);
  });

  it('5 concurrent identical requests create exactly one key; the others conflict or replay it', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const before = await countKeys(org.orgId);

    const all = await Promise.all(Array.from({ length: 5 }, () => createKey(org.testKey, key)));
    expect(await countKeys(org.orgId)).toBe(before + 1);
    const originals = all.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    expect(originals).toHaveLength(1);
    const original = originals[0]!;
    for (const r of all) {
      if (r === original) continue;
      if (r.status === 409) {
        expect(r.body.error.code).toBe('CONFLICT');
      } else {
        expect(r.status).toBe(201);
        expect(r.headers.get('idempotent-replayed')).toBe('true');
        expect(r.text).toBe(original.text);
      }
    }
    // Afterwards it replays.
    const later = await createKey(org.testKey, key);
    expect(later.text).toBe(original.text);
    expect(await countKeys(org.orgId)).toBe(before + 1);
  });
});

describe('lifetime', () => {
  it('a key is replayed for 24 h and can be reused after that', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const before = await countKeys(org.orgId);

    const first = await createKey(org.testKey, key);
    expect(first.status).toBe(201);

    clock.advance(24 * 3600 * 1000 - 1000);
    const stillReplayed = await createKey(org.testKey, key);
    expect(stillReplayed.headers.get('idempotent-replayed')).toBe('true');
    expect(stillReplayed.text).toBe(first.text);
    expect(await countKeys(org.orgId)).toBe(before + 1);

    clock.advance(2000);
    const reused = await createKey(org.testKey, key);
    expect(reused.status).toBe(201);
    expect(reused.headers.get('idempotent-replayed')).toBeNull();
    expect(reused.body.data.id).not.toBe(first.body.data.id);
    expect(await countKeys(org.orgId)).toBe(before + 2);

    // The reused key now replays its new response.
    const replay = await createKey(org.testKey, key);
    expect(replay.text).toBe(reused.text);
    expect(await countKeys(org.orgId)).toBe(before + 2);
  });
});

describe('GraphQL', () => {
  const idem = (key: string) => ({ headers: { 'Idempotency-Key': key } });

  it('a mutation with an Idempotency-Key is replayed byte for byte', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const before = await countKeys(org.orgId);
    const input = { input: { role: 'developer', name: 'via graphql' } };

    const first = await t.gql(CREATE_KEY, input, { key: org.testKey, ...idem(key) });
    expect(first.status).toBe(200);
    expect(first.body.errors).toBeUndefined();
    expect(first.body.data.createApiKey.apiKey).toMatchObject({ role: 'developer', mode: 'test', name: 'via graphql' });
    expect(first.headers.get('idempotent-replayed')).toBeNull();

    const second = await t.gql(CREATE_KEY, input, { key: org.testKey, ...idem(key) });
    expect(second.status).toBe(200);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await countKeys(org.orgId)).toBe(before + 1);

    // Without the header the mutation runs again.
    const plain = await t.gql(CREATE_KEY, input, { key: org.testKey });
    expect(plain.body.data.createApiKey.apiKey.id).not.toBe(first.body.data.createApiKey.apiKey.id);
    expect(await countKeys(org.orgId)).toBe(before + 2);
  });

  it('a mutation reusing the key with other variables is a CONFLICT error', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const first = await t.gql(CREATE_KEY, { input: { role: 'viewer', name: 'a' } }, { key: org.testKey, ...idem(key) });
    expect(first.body.errors).toBeUndefined();
    const before = await countKeys(org.orgId);

    const other = await t.gql(CREATE_KEY, { input: { role: 'viewer', name: 'b' } }, { key: org.testKey, ...idem(key) });
    expect(other.status).toBe(409);
    expect(other.body.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', status: 409, details: { idempotency_key: key } });
    expect(await countKeys(org.orgId)).toBe(before);

    // A REST request with the key is a different request, too.
    const rest = await createKey(org.testKey, key);
    expect(rest.status).toBe(409);
    expect(rest.body.error.code).toBe('CONFLICT');
    expect(await countKeys(org.orgId)).toBe(before);
  });

  it('an invalid Idempotency-Key on a mutation is a 400 VALIDATION_ERROR', async () => {
    const org = await t.createOrg('growth');
    const before = await countKeys(org.orgId);
    const r = await t.gql(CREATE_KEY, { input: { role: 'viewer' } }, { key: org.testKey, ...idem('x'.repeat(300)) });
    expect(r.status).toBe(400);
    expect(r.body.errors?.[0]?.extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400, details: { field: 'Idempotency-Key' } });
    expect(await countKeys(org.orgId)).toBe(before);
  });

  it('a query with an Idempotency-Key is not affected', async () => {
    const org = await t.createOrg('growth');
    const key = newIdemKey();
    const query = '{ viewer { role mode } }';

    const a = await t.gql(query, {}, { key: org.testKey, ...idem(key) });
    const b = await t.gql(query, {}, { key: org.testKey, ...idem(key) });
    for (const r of [a, b]) {
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual({ viewer: { role: 'owner', mode: 'test' } });
      expect(Object.keys(r.body)).toEqual(['data', 'extensions']);
      expect(r.headers.get('idempotent-replayed')).toBeNull();
    }
    expect(await idemRow(org, 'test', key)).toBeUndefined();

    // Even a key already used by a mutation does not touch queries.
    const mutationKey = newIdemKey();
    const m = await t.gql(CREATE_KEY, { input: { role: 'viewer' } }, { key: org.testKey, ...idem(mutationKey) });
    expect(m.body.errors).toBeUndefined();
    const q = await t.gql(query, {}, { key: org.testKey, ...idem(mutationKey) });
    expect(q.status).toBe(200);
    expect(q.body.data).toEqual({ viewer: { role: 'owner', mode: 'test' } });
    expect(q.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('stored responses at rest', () => {
  it('keeps the replayable body sealed in the database (a created key is not readable from a dump)', async () => {
    const org = await t.createOrg('enterprise');
    const r = await t.rest('POST', '/v1/settings/api-keys', { key: org.testKey, body: { role: 'developer' }, headers: { 'Idempotency-Key': 'sealed-1' } });
    expect(r.status).toBe(201);
    const { rows } = await t.db.query(`select response_body from idempotency_keys where organization_id = $1 and key = 'sealed-1'`, [org.orgId]);
    expect(rows[0].response_body).toMatch(/^v1:/);
    expect(rows[0].response_body).not.toContain(r.body.data.key);
    const replay = await t.rest('POST', '/v1/settings/api-keys', { key: org.testKey, body: { role: 'developer' }, headers: { 'Idempotency-Key': 'sealed-1' } });
    expect(replay.text).toBe(r.text);
  });
});
