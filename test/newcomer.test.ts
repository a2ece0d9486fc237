/**
 * A newcomer's path through a running service: GraphiQL with no internet, loopback webhook URLs
 * explained, and GraphQL error statuses exactly as the README's GraphQL section states them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
beforeAll(async () => {
  t = await startTestApp({ clock: systemClock, env: { WEBHOOKS_ALLOW_LOOPBACK: '0' } });
  org = await t.createOrg('enterprise');
});
afterAll(async () => { await t?.close(); });

async function gqlRaw(body: unknown, accept: string) {
  const r = await fetch(`${t.baseUrl}/graphql`, {
    method: 'POST', headers: { 'X-API-Key': org.testKey, 'Content-Type': 'application/json', Accept: accept }, body: JSON.stringify(body),
  });
  return { status: r.status, type: (r.headers.get('content-type') ?? '').split(';')[0], body: await r.json() };
}

describe('GraphQL error statuses (README, GraphQL section)', () => {
  const fieldError = { query: '{ message(id: "msg_nope") { id } }' };
  const validation = { query: '{ nope }' };
  const syntax = { query: '{ ' };
  const variables = { query: 'query($id: ID!) { message(id: $id) { id } }', variables: {} };

  it('application/json: 200 for field, parse and validation errors; 400 for variables that do not coerce', async () => {
    for (const [body, status] of [[fieldError, 200], [validation, 200], [syntax, 200], [variables, 400]] as const) {
      const r = await gqlRaw(body, 'application/json');
      expect([r.status, r.type], JSON.stringify(body)).toEqual([status, 'application/json']);
      expect(r.body.errors[0].extensions.code).toBe(body === fieldError ? 'NOT_FOUND' : 'VALIDATION_ERROR');
    }
  });

  it('application/graphql-response+json: 200 for field errors, 400 for every request error', async () => {
    for (const [body, status] of [[fieldError, 200], [validation, 400], [syntax, 400], [variables, 400]] as const) {
      const r = await gqlRaw(body, 'application/graphql-response+json');
      expect([r.status, r.type], JSON.stringify(body)).toEqual([status, 'application/graphql-response+json']);
      expect(r.body.errors[0].extensions).toMatchObject({ code: body === fieldError ? 'NOT_FOUND' : 'VALIDATION_ERROR', status: body === fieldError ? 404 : 400 });
    }
  });

  it('401 before GraphQL runs, whatever the Accept header', async () => {
    const r = await fetch(`${t.baseUrl}/graphql`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(fieldError) });
    expect(r.status).toBe(401);
    expect((await r.json()).errors[0].extensions.code).toBe('UNAUTHORIZED');
  });
});

describe('GraphiQL', () => {
  it('is served with its assets inlined from the installed package, loading nothing from another host', async () => {
    const r = await fetch(`${t.baseUrl}/graphql`, { headers: { Accept: 'text/html' } });
    expect(r.status).toBe(200);
    const html = await r.text();
    expect(html).toContain('YogaGraphiQL.renderYogaGraphiQL');
    expect(html.length).toBeGreaterThan(500_000);
    const external = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="(https?:[^"]+)"/g)].map((m) => m[1]);
    expect(external).toEqual([]);
    expect(html).not.toMatch(/unpkg\.com|cdn\.jsdelivr/);
  });
});

describe('loopback webhook URLs', () => {
  it('are refused without WEBHOOKS_ALLOW_LOOPBACK, and the error says how to allow them', async () => {
    const r = await t.rest('POST', '/v1/webhooks', { key: org.testKey, body: { url: 'http://127.0.0.1:9999/hook', events: ['message.*'] } });
    expect(r.status).toBe(422);
    expect(r.body.error.code).toBe('INVALID_WEBHOOK_URL');
    expect(r.body.error.details).toMatchObject({ field: 'url', allow_loopback: 'WEBHOOKS_ALLOW_LOOPBACK=1' });
    expect(r.body.error.details.hint).toContain('WEBHOOKS_ALLOW_LOOPBACK=1');
  });
});
