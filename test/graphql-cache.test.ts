/**
 * The GraphQL response cache (graphql/responseCache.ts): reads cached per organization, mode and
 * credential, never across tenants; invalidated by GraphQL mutations and by REST writes; a hit is
 * visible in `extensions.responseCache`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { OFFICER } from './helpers/phi.ts';

let t: TestApp;
beforeAll(async () => { t = await startTestApp(); });
afterAll(async () => { await t?.close(); });

const CONTACTS = 'query Contacts { contacts(first: 10) { edges { node { id firstName } } } }';
type Contacts = { contacts: { edges: { node: { id: string; firstName: string | null } }[] } };

async function read(key: string) {
  const r = await t.gql<Contacts>(CONTACTS, undefined, { key });
  expect(r.body.errors, r.text).toBeUndefined();
  return { names: r.body.data!.contacts.edges.map((e) => e.node.firstName), cache: (r.body as { extensions?: { responseCache?: { hit?: boolean; didCache?: boolean } } }).extensions?.responseCache };
}

let phones = 0;
async function createContact(key: string, firstName: string): Promise<string> {
  const phone = `+1415555${String(2000 + phones++)}`;
  const r = await t.gql<{ createContact: { id: string } }>('mutation($i: CreateContactInput!) { createContact(input: $i) { id } }', { i: { firstName, phone, tags: ['cache'] } }, { key });
  expect(r.body.errors, r.text).toBeUndefined();
  return r.body.data!.createContact.id;
}

describe('GraphQL response cache', () => {
  it('caches nothing for an organization in HIPAA mode: every read is decided (and logged) again', async () => {
    const clinic = await t.createOrg('business', 'Cache clinic');
    await createContact(clinic.testKey, 'Patient');
    await read(clinic.testKey);
    expect((await read(clinic.testKey)).cache).toEqual({ hit: true });
    expect((await t.rest('PUT', '/v1/settings/hipaa/baa', { key: clinic.liveKey, body: { status: 'signed', signed_date: '2026-11-01' } })).status).toBe(200);
    const on = await t.rest('PUT', '/v1/settings/hipaa', { key: clinic.liveKey, body: { enabled: true, compliance_officer: OFFICER } });
    expect(on.status, on.text).toBe(200);
    for (let i = 0; i < 3; i++) expect((await read(clinic.testKey)).cache).toBeUndefined();
  });

  it('caches a read per organization: the same query as another tenant is a miss with its own data', async () => {
    const a = await t.createOrg('growth');
    const b = await t.createOrg('growth');
    await createContact(a.testKey, 'Alice-A');
    await createContact(b.testKey, 'Bob-B');

    const first = await read(a.testKey);
    expect(first).toEqual({ names: ['Alice-A'], cache: undefined });
    const again = await t.gql<Contacts>(CONTACTS, undefined, { key: a.testKey });
    // A hit is measured and counted like a miss: the same cost, the rate limit.
    expect((again.body as any).extensions).toMatchObject({ responseCache: { hit: true }, cost: { requested: expect.any(Number) }, rateLimit: { remaining: expect.any(Number) } });
    expect(again.body.data!.contacts.edges.map((e) => e.node.firstName)).toEqual(['Alice-A']);

    // Tenant B, byte-identical query, right after A warmed the cache: B's own data, never A's.
    const other = await read(b.testKey);
    expect(other.names).toEqual(['Bob-B']);
    expect(other.cache).toBeUndefined();
    expect((await read(b.testKey)).names).toEqual(['Bob-B']);
    expect((await read(a.testKey)).names).toEqual(['Alice-A']);

    // The same organization in live mode and another credential (a viewer) are other sessions too.
    expect((await read(a.liveKey)).cache).toBeUndefined();
    const viewer = await t.createKey(a.orgId, 'viewer');
    expect(await read(viewer)).toEqual({ names: ['Alice-A'], cache: undefined });
  });

  it('a GraphQL mutation and a REST write invalidate the organization\'s cached reads', async () => {
    const org = await t.createOrg('growth');
    const id = await createContact(org.testKey, 'Before');
    await read(org.testKey);
    expect((await read(org.testKey)).cache?.hit).toBe(true);

    const renamed = await t.gql('mutation($id: ID!) { updateContact(id: $id, input: { firstName: "ViaGraphQL" }) { id firstName } }', { id }, { key: org.testKey });
    expect(renamed.body.errors, renamed.text).toBeUndefined();
    // Mutations are never cached.
    expect((renamed.body as any).extensions.responseCache).toBeUndefined();
    expect(await read(org.testKey)).toEqual({ names: ['ViaGraphQL'], cache: undefined });
    expect((await read(org.testKey)).cache?.hit).toBe(true);

    const patched = await t.rest('PUT', `/v1/contacts/${id}`, { key: org.testKey, body: { first_name: 'ViaRest' } });
    expect(patched.status, patched.text).toBe(200);
    expect(await read(org.testKey)).toEqual({ names: ['ViaRest'], cache: undefined });

    // A contact created over REST shows in the list at once (a new entity no cached answer named).
    const created = await t.rest('POST', '/v1/contacts', { key: org.testKey, body: { first_name: 'NewViaRest', phone: '+14155550177' } });
    expect(created.status, created.text).toBeLessThan(300);
    expect((await read(org.testKey)).names).toEqual(['NewViaRest', 'ViaRest']);
  });

  it('never caches the rate-limit status (a live counter)', async () => {
    const org = await t.createOrg('growth');
    const q = '{ rateLimit(fields: ["Query.contacts"]) { burstPerSecond } }';
    await t.gql(q, undefined, { key: org.testKey });
    const second = await t.gql(q, undefined, { key: org.testKey });
    expect((second.body as any).extensions.responseCache).toBeUndefined();
  });
});
