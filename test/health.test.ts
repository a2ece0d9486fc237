import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

let t: TestApp;
beforeAll(async () => { t = await startTestApp(); });
afterAll(async () => { await t?.close(); });

describe('health', () => {
  it('/healthz answers without credentials', async () => {
    const r = await t.rest('GET', '/healthz');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'ok' });
  });

  it('/readyz checks the database and the queue', async () => {
    const r = await t.rest('GET', '/readyz');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'ready', database: true, queue: true });
  });

  it('bootstrapped keys work on REST and GraphQL', async () => {
    const org = await t.createOrg();
    const rest = await t.rest('GET', '/v1/settings/organization', { key: org.testKey });
    expect(rest.status).toBe(200);
    expect(rest.body.data.organization.id).toBe(org.orgId);
    expect(rest.body.meta.request_id).toMatch(/^req_/);
    expect(rest.headers.get('x-request-id')).toBe(rest.body.meta.request_id);
    const gql = await t.gql('{ viewer { role mode organization { id } } }', {}, { key: org.liveKey });
    expect(gql.body.data).toEqual({ viewer: { role: 'owner', mode: 'live', organization: { id: org.orgId } } });
  });

  it('a well-formed incoming X-Request-Id is kept and echoed on both surfaces; a malformed one is replaced', async () => {
    // Growth: eight requests in a second stay within its burst limit.
    const org = await t.createOrg('growth');
    const traced = await t.rest('GET', '/v1/settings/organization', { key: org.testKey, headers: { 'X-Request-Id': 'trace-7f3a9c21-client' } });
    expect(traced.headers.get('x-request-id')).toBe('trace-7f3a9c21-client');
    expect(traced.body.meta.request_id).toBe('trace-7f3a9c21-client');
    const gql = await t.gql('{ viewer { role } }', {}, { key: org.testKey, headers: { 'X-Request-Id': 'gql-trace-000123' } });
    expect(gql.headers.get('x-request-id')).toBe('gql-trace-000123');
    const failed = await t.rest('GET', '/v1/nope', { key: org.testKey, headers: { 'X-Request-Id': 'trace-of-a-404' } });
    expect(failed.body.meta.request_id).toBe('trace-of-a-404');
    for (const bad of ['short', 'has spaces in it', 'x'.repeat(129), 'quote"inside-id']) {
      const r = await t.rest('GET', '/v1/settings/organization', { key: org.testKey, headers: { 'X-Request-Id': bad } });
      expect(r.headers.get('x-request-id')).toMatch(/^req_/);
      expect(r.body.meta.request_id).toBe(r.headers.get('x-request-id'));
    }
  });

  it('two GraphQL requests carrying the same X-Request-Id are rate-limited independently', async () => {
    const org = await t.createOrg();
    const [a, b] = await Promise.all([0, 1].map(() => t.gql('{ apiKeys(first: 1) { edges { node { id } } } }', {}, { key: org.testKey, headers: { 'X-Request-Id': 'same-id-twice-000' } })));
    for (const r of [a!, b!]) {
      expect(r.status).toBe(200);
      expect(r.body.errors).toBeUndefined();
      expect(Number(r.headers.get('x-ratelimit-remaining'))).toBeGreaterThan(0);
    }
    expect(new Set([a!.headers.get('x-ratelimit-remaining'), b!.headers.get('x-ratelimit-remaining')]).size).toBe(2);
  });

  it('CORS: every answer allows any origin and exposes the rate-limit headers; a preflight also lists methods and headers', async () => {
    const preflight = await fetch(`${t.baseUrl}/v1/messages/sms`, {
      method: 'OPTIONS', headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'x-api-key, content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
    expect(preflight.headers.get('access-control-allow-headers')).toContain('X-API-Key');
    expect(preflight.headers.get('access-control-allow-headers')).toContain('Idempotency-Key');
    expect(preflight.headers.get('access-control-max-age')).toBe('600');

    const org = await t.createOrg();
    for (const r of [await t.rest('GET', '/v1/settings/organization', { key: org.testKey }), await t.gql('{ viewer { role } }', {}, { key: org.testKey }), await t.rest('GET', '/v1/nope')]) {
      expect(r.headers.get('access-control-allow-origin')).toBe('*');
      expect(r.headers.get('access-control-expose-headers')).toContain('X-RateLimit-Remaining');
      expect(r.headers.get('access-control-allow-methods')).toBeNull();
    }
  });
});

describe('SERVER_TIMING', () => {
  it('adds the time per front-door stage to REST and GraphQL answers when on, and nothing when off', async () => {
    const timed = await startTestApp({ env: { SERVER_TIMING: 'true' } });
    try {
      const org = await timed.createOrg('growth');
      const stages = (v: string | null) => (v ?? '').split(', ').map((p) => p.split(';')[0]);
      const rest = await timed.rest('GET', '/v1/settings/organization', { key: org.testKey });
      // REST: the admission ('limit') runs alongside reading the body, so it is reported where it ends.
      expect(stages(rest.headers.get('server-timing')).sort()).toEqual(['auth', 'body', 'limit', 'op', 'total']);
      for (const part of rest.headers.get('server-timing')!.split(', ')) expect(Number(part.split('dur=')[1])).toBeGreaterThanOrEqual(0);
      const gql = await timed.gql('{ viewer { role } }', {}, { key: org.testKey });
      expect(stages(gql.headers.get('server-timing'))).toEqual(['auth', 'body', 'limit', 'op', 'total']);
    } finally {
      await timed.close();
    }
    const org = await t.createOrg();
    expect((await t.rest('GET', '/v1/settings/organization', { key: org.testKey })).headers.get('server-timing')).toBeNull();
  });
});
