/**
 * Persisted operations on /graphql (src/graphql/persisted.ts) through HTTP against the real
 * service: Apollo's APQ link registering and reusing a hash, `documentId` requests from the
 * graphql-codegen client preset's manifest, an organization's trusted-documents-only switch, tenant
 * isolation and the documented errors.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { createPersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { createClient as createWsClient } from 'graphql-ws';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

const manifest = JSON.parse(readFileSync(new URL('./graphql/gql/persisted-documents.json', import.meta.url), 'utf8')) as Record<string, string>;
const recentId = Object.keys(manifest).find((id) => manifest[id]!.startsWith('query RecentMessages'))!;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

// Enterprise organizations: their burst allowance is above the requests a test sends in a second.
let t: TestApp;
beforeAll(async () => { t = await startTestApp(); });
afterAll(async () => { await t?.close(); });

type Sent = { query?: string; extensions?: { persistedQuery?: unknown } };

async function post(key: string, body: Record<string, unknown>) {
  const res = await fetch(`${t.baseUrl}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', 'X-API-Key': key }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: { message: string; extensions: { code: string } }[]; extensions?: any } };
}

describe('Automatic Persisted Queries (Apollo Client)', () => {
  it('registers an unknown hash with its text, then sends the hash alone', async () => {
    const org = await t.createOrg('enterprise');
    const sent: Sent[] = [];
    const recordingFetch: typeof fetch = async (input, init) => {
      sent.push(JSON.parse(String(init?.body)) as Sent);
      return fetch(input, init);
    };
    const client = () => new ApolloClient({
      link: createPersistedQueryLink({ sha256 }).concat(new HttpLink({ uri: `${t.baseUrl}/graphql`, headers: { 'X-API-Key': org.testKey }, fetch: recordingFetch })),
      cache: new InMemoryCache(),
    });
    const VIEWER = gql`query PersistedViewer { viewer { role organization { id } } }`;
    const first = await client().query<{ viewer: { role: string; organization: { id: string } } }>({ query: VIEWER, fetchPolicy: 'no-cache' });
    expect(first.data?.viewer).toMatchObject({ role: 'owner', organization: { id: org.orgId } });
    // Hash alone (unknown: PersistedQueryNotFound), then hash with the text (registered).
    expect(sent).toHaveLength(2);
    expect(sent[0]!.query).toBeUndefined();
    expect(sent[0]!.extensions?.persistedQuery).toMatchObject({ version: 1 });
    expect(sent[1]!.query).toContain('PersistedViewer');

    // A new client (no memory of the miss) gets the answer from the hash alone.
    sent.length = 0;
    const again = await client().query<{ viewer: { role: string } }>({ query: VIEWER, fetchPolicy: 'no-cache' });
    expect(again.data?.viewer.role).toBe('owner');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.query).toBeUndefined();
  });

  it('answers an unknown hash with PersistedQueryNotFound, refuses a hash that is not the text\'s, and keeps hashes per organization', async () => {
    const a = await t.createOrg('enterprise');
    const b = await t.createOrg('enterprise');
    const query = '{ viewer { role } }';
    const hash = sha256(query);
    const unknown = await post(a.testKey, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(unknown.body.errors?.[0]).toMatchObject({ message: 'PersistedQueryNotFound', extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } });
    expect(unknown.status).toBe(404);

    const mismatch = await post(a.testKey, { query, extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ viewer { mode } }') } } });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.errors?.[0]?.extensions.code).toBe('PERSISTED_QUERY_HASH_MISMATCH');
    expect(mismatch.body.data).toBeUndefined();

    const registered = await post(a.testKey, { query, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(registered.body.data?.viewer.role).toBe('owner');
    const byHash = await post(a.testKey, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(byHash.body.data?.viewer.role).toBe('owner');
    // Cost extensions as on any other operation.
    expect(byHash.body.extensions?.cost).toMatchObject({ requested: expect.any(Number) });
    expect(byHash.body.extensions?.rateLimit).toMatchObject({ limit: expect.any(Number) });

    const otherTenant = await post(b.testKey, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(otherTenant.body.errors?.[0]?.extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
  });
});

describe('trusted documents (the client preset\'s manifest)', () => {
  let a: TestOrg;
  let b: TestOrg;
  beforeAll(async () => {
    a = await t.createOrg('enterprise');
    b = await t.createOrg('enterprise');
  });

  it('uploads, lists and deletes a manifest; only an owner uploads', async () => {
    const viewerKey = await t.createKey(a.orgId, 'developer');
    expect((await t.rest('POST', '/v1/graphql/documents', { key: viewerKey, body: manifest })).status).toBe(403);
    const up = await t.rest('POST', '/v1/graphql/documents', { key: a.testKey, body: manifest });
    expect(up.status).toBe(200);
    expect(up.body.data.map((d: { id: string }) => d.id).sort()).toEqual(Object.keys(manifest).sort());
    const list = await t.rest('GET', '/v1/graphql/documents', { key: a.testKey });
    expect(list.body.data.map((d: { id: string }) => d.id)).toContain(recentId);

    const gqlUp = await post(a.testKey, { query: 'mutation($d: JSON!) { uploadGraphqlDocuments(documents: $d) { id } }', variables: { d: { 'extra-1': '{ viewer { mode } }' } } });
    expect(gqlUp.body.data?.uploadGraphqlDocuments).toEqual([{ id: 'extra-1' }]);
    expect((await post(a.testKey, { documentId: 'extra-1' })).body.data?.viewer.mode).toBe('test');
    const del = await t.rest('DELETE', '/v1/graphql/documents/extra-1', { key: a.testKey });
    expect(del.status).toBe(200);
    expect((await post(a.testKey, { documentId: 'extra-1' })).body.errors?.[0]?.extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
  });

  it('runs a documentId from the manifest with variables, and only for the organization that uploaded it', async () => {
    await t.rest('POST', '/v1/graphql/documents', { key: a.testKey, body: manifest });
    const run = await post(a.testKey, { documentId: recentId, variables: { first: 2 } });
    expect(run.status).toBe(200);
    expect(run.body.errors).toBeUndefined();
    expect(run.body.data?.messages.edges).toEqual([]);
    expect(run.body.extensions?.cost?.requested).toBeGreaterThan(0);

    const unknown = await post(a.testKey, { documentId: 'sha256:0000' });
    expect(unknown.body.errors?.[0]).toMatchObject({ message: 'PersistedQueryNotFound', extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } });

    const isolated = await post(b.testKey, { documentId: recentId, variables: { first: 2 } });
    expect(isolated.body.errors?.[0]?.extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect(isolated.body.data).toBeUndefined();
  });

  it('with graphql_trusted_documents_only, refuses document texts (APQ too) and runs trusted ids', async () => {
    const org = await t.createOrg('enterprise');
    await t.rest('POST', '/v1/graphql/documents', { key: org.testKey, body: manifest });
    // An APQ-registered hash, before the switch.
    const query = '{ viewer { role } }';
    await post(org.testKey, { query, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });

    const on = await t.rest('PATCH', '/v1/settings/organization', { key: org.testKey, body: { graphql_trusted_documents_only: true } });
    expect(on.status).toBe(200);
    expect(on.body.data.organization.graphql_trusted_documents_only).toBe(true);

    const text = await post(org.testKey, { query });
    expect(text.status).toBe(400);
    expect(text.body.errors?.[0]?.extensions.code).toBe('PERSISTED_QUERY_REQUIRED');
    const apq = await post(org.testKey, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });
    expect(apq.body.errors?.[0]?.extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    const trusted = await post(org.testKey, { documentId: recentId, variables: { first: 1 } });
    expect(trusted.body.data?.messages.edges).toEqual([]);

    // graphql-ws carries document texts only: refused too.
    const ws = createWsClient({ url: `${t.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: org.testKey }, retryAttempts: 0 });
    const refused = await new Promise<unknown>((resolve) => {
      ws.subscribe({ query: 'subscription($id: ID!) { messageStatus(id: $id) { id } }', variables: { id: 'msg_x' } }, { next: resolve, error: resolve, complete: () => resolve('complete') });
    });
    await ws.dispose();
    expect(JSON.stringify(refused)).toContain('PERSISTED_QUERY_REQUIRED');

    // A subscription by id over SSE runs (the message is unknown: its not-found error is the event).
    await t.rest('POST', '/v1/graphql/documents', { key: org.testKey, body: { 'status-sub': 'subscription($id: ID!) { messageStatus(id: $id) { id } }' } });
    const sse = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'X-API-Key': org.testKey },
      body: JSON.stringify({ documentId: 'status-sub', variables: { id: 'msg_0000000000000000000000000' } }),
    });
    expect(sse.headers.get('content-type')).toContain('text/event-stream');
    const events = await sse.text();
    expect(events).toContain('"NOT_FOUND"');
    expect(events).not.toContain('PERSISTED_QUERY');
    // The same id asking for one JSON answer is the client's error, not a 500.
    const plain = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json', 'X-API-Key': org.testKey },
      body: JSON.stringify({ documentId: 'status-sub', variables: { id: 'msg_0000000000000000000000000' } }),
    });
    expect(plain.status).toBeLessThan(500);
    expect((await plain.json()).errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', status: 400, details: { field: 'Accept' } });

    // Switched off with the GraphQL twin (sent as a trusted document it is not: REST then).
    const off = await t.rest('PATCH', '/v1/settings/organization', { key: org.testKey, body: { graphql_trusted_documents_only: false } });
    expect(off.body.data.organization.graphql_trusted_documents_only).toBe(false);
    expect((await post(org.testKey, { query })).body.data?.viewer.role).toBe('owner');
  });
});
