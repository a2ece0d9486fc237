/**
 * Persisted operations' limits and guarantees: the per-organization cap on APQ registrations, and
 * Idempotency-Key replay for a mutation sent by its documentId.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GraphqlDocuments, MAX_APQ_DOCUMENTS } from '../src/modules/settings/settings.documents.ts';
import { isServiceError } from '../src/platform/errors.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

let t: TestApp;
beforeAll(async () => { t = await startTestApp(); });
afterAll(async () => { await t?.close(); });

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('APQ registrations per organization', () => {
  it('refuses a registration past the cap with QUOTA_EXCEEDED; known ids and trusted uploads are not counted against it', async () => {
    expect(MAX_APQ_DOCUMENTS).toBe(1000);
    const org = await t.createOrg('growth');
    const other = await t.createOrg('growth');
    const docs = new GraphqlDocuments(t.app.pool, { maxApq: 2 });
    const text = (n: number) => `query Q${n} { viewer { role } }`;
    await docs.register(org.orgId, sha256(text(1)), text(1));
    await docs.register(org.orgId, sha256(text(2)), text(2));
    // Registering a known id again is no new document.
    await docs.register(org.orgId, sha256(text(1)), text(1));
    const refused = await docs.register(org.orgId, sha256(text(3)), text(3)).catch((e: unknown) => e);
    expect(isServiceError(refused) && refused.code).toBe('QUOTA_EXCEEDED');
    expect(isServiceError(refused) && refused.details).toEqual({ limit: 'apq_documents', max: 2 });
    // Another organization has a cap of its own; trusted uploads do not count.
    await docs.register(other.orgId, sha256(text(3)), text(3));
    await docs.upload(org.orgId, { a: text(4), b: text(5) });
    expect((await docs.find(org.orgId, 'a'))?.source).toBe('trusted');
  });

  it('answers the refusal over /graphql as its code, with the documented details', async () => {
    const org = await t.createOrg('growth');
    await t.db.query(
      `insert into graphql_documents (organization_id, id, document, source)
         select $1, md5(g::text), 'query { viewer { role } }', 'apq' from generate_series(1, $2) g`,
      [org.orgId, MAX_APQ_DOCUMENTS],
    );
    const query = 'query Fresh { viewer { mode } }';
    const res = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'X-API-Key': org.testKey },
      body: JSON.stringify({ query, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } }),
    });
    const body = await res.json();
    expect(body.errors[0].extensions).toMatchObject({ code: 'QUOTA_EXCEEDED', status: 429, details: { limit: 'apq_documents', max: MAX_APQ_DOCUMENTS } });
    // The same text without the hash still runs.
    expect((await t.gql('query Fresh { viewer { mode } }', undefined, { key: org.testKey })).body.data).toEqual({ viewer: { mode: 'test' } });
  });
});

describe('Idempotency-Key on a mutation sent by documentId', () => {
  it('replays the first answer and sends once', async () => {
    const org = await t.createOrg('growth');
    const up = await t.rest('POST', '/v1/graphql/documents', { key: org.testKey, body: { 'send-sms': 'mutation Send($i: SendSmsInput!) { sendSms(input: $i) { id status } }' } });
    expect(up.status, up.text).toBeLessThan(300);
    const send = () => fetch(`${t.baseUrl}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'X-API-Key': org.testKey, 'Idempotency-Key': 'by-id-1' },
      body: JSON.stringify({ documentId: 'send-sms', variables: { i: { to: '+14155550160', body: 'once by id' } } }),
    });
    const first = await send();
    const firstText = await first.text();
    expect(JSON.parse(firstText).data.sendSms.id).toMatch(/^msg_/);
    const again = await send();
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(firstText);
    const listed = await t.gql<{ messages: { edges: unknown[] } }>('{ messages(first: 5) { edges { node { id } } } }', undefined, { key: org.testKey });
    expect(listed.body.data!.messages.edges).toHaveLength(1);
  });
});
