/**
 * Contacts end to end over HTTP (REST and GraphQL twins): CRUD with validation codes and unique
 * phone/email, tags, metadata merge, ranked search (full-text over names, emails, phones and
 * metadata, and trigram), filters and pagination. Consent is in contacts-consent.test.ts, lists
 * and segments in contacts-lists.test.ts, the activity timeline and CSV imports in
 * contacts-activity.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/assertions.ts';
import { contactsHelpers, startContactsApp } from './helpers/contacts.ts';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';

const file = useFileApp(startContactsApp);
let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let viewerKey: string;
beforeAll(() => { ({ t, org, other, viewerKey } = file()); });
const { tick, phone, rest, create } = contactsHelpers(() => t, () => org);

describe('contacts CRUD', () => {
  it('creates, reads, updates (metadata merged) and deletes permanently', async () => {
    const c = await create({ phone: '+1 (415) 555-3001', email: 'Jane.Doe@Example.com', first_name: 'Jane', last_name: 'Doe', country: 'us', lifecycle_stage: 'lead', tags: ['vip', 'vip', 'beta'], metadata: { plan: 'pro', seats: 3 } });
    expect(c).toMatchObject({ phone: '+14155553001', email: 'jane.doe@example.com', country: 'US', lifecycle_stage: 'lead', tags: ['vip', 'beta'], metadata: { plan: 'pro', seats: 3 } });
    expect(c.id).toMatch(/^con_/);
    expect(c.consent.sms).toEqual({ status: 'unknown', updated_at: null, source: null });
    expect(Object.keys(c.consent).sort()).toEqual(['email', 'rcs', 'sms', 'viber', 'voice', 'whatsapp']);

    const got = await rest('GET', `/v1/contacts/${c.id}`, undefined, viewerKey);
    expect(got.body.data).toEqual(c);

    const upd = await rest('PUT', `/v1/contacts/${c.id}`, { first_name: 'Janet', metadata: { seats: 5, plan: null, team: 'ops' }, lifecycle_stage: 'customer' });
    expect(upd.status, upd.text).toBe(200);
    expect(upd.body.data).toMatchObject({ first_name: 'Janet', last_name: 'Doe', lifecycle_stage: 'customer', metadata: { seats: 5, team: 'ops' } });

    const list = await create({ phone: phone() });
    const l = await rest('POST', '/v1/contacts/lists', { name: 'to delete from' });
    await rest('POST', `/v1/contacts/lists/${l.body.data.id}/members`, { contact_ids: [c.id, list.id] });
    expect((await rest('DELETE', `/v1/contacts/${c.id}`)).status).toBe(204);
    expectError(await rest('GET', `/v1/contacts/${c.id}`), 404, 'NOT_FOUND');
    const members = await rest('GET', `/v1/contacts/lists/${l.body.data.id}/members`);
    expect(members.body.data.map((m: { id: string }) => m.id)).toEqual([list.id]);
    const rows = await t.db.query('select count(*)::int as n from contacts where id = $1', [c.id]);
    expect(rows.rows[0].n).toBe(0);
  });

  it('validates input with the spec codes', async () => {
    expectError(await rest('POST', '/v1/contacts', { phone: '415-555' }), 422, 'INVALID_PHONE_NUMBER');
    expectError(await rest('POST', '/v1/contacts', { email: 'not-an-email' }), 422, 'INVALID_EMAIL');
    const noAddress = expectError(await rest('POST', '/v1/contacts', { first_name: 'Nobody' }), 422, 'MISSING_REQUIRED_FIELD');
    expect(noAddress.error.details.field).toBe('phone');
    expect(expectError(await rest('POST', '/v1/contacts', { phone: phone(), country: 'USA' }), 422, 'VALIDATION_ERROR').error.details.field).toBe('country');
    expect(expectError(await rest('POST', '/v1/contacts', { phone: phone(), lifecycle_stage: 'alien' }), 422, 'VALIDATION_ERROR').error.details.field).toBe('lifecycle_stage');
    expect(expectError(await rest('POST', '/v1/contacts', { phone: phone(), tags: 'vip' }), 422, 'VALIDATION_ERROR').error.details.field).toBe('tags');
    const c = await create({ phone: phone() });
    expect(expectError(await rest('PUT', `/v1/contacts/${c.id}`, { phone: null }), 422, 'VALIDATION_ERROR').error.details.field).toBe('phone');
    expectError(await rest('GET', '/v1/contacts?page=2'), 400, 'VALIDATION_ERROR');
    expectError(await rest('POST', '/v1/contacts', { phone: phone() }, viewerKey), 403, 'INSUFFICIENT_PERMISSIONS');
  });

  it('keeps phone and email unique per organization and mode (409 ALREADY_EXISTS)', async () => {
    const p = phone();
    const c = await create({ phone: p, email: 'unique@example.com' });
    expect(expectError(await rest('POST', '/v1/contacts', { phone: p }), 409, 'ALREADY_EXISTS').error.details.field).toBe('phone');
    expect(expectError(await rest('POST', '/v1/contacts', { email: 'UNIQUE@example.com' }), 409, 'ALREADY_EXISTS').error.details.field).toBe('email');
    const second = await create({ phone: phone() });
    expectError(await rest('PUT', `/v1/contacts/${second.id}`, { email: 'unique@example.com' }), 409, 'ALREADY_EXISTS');
    // Another organization, and the live mode of the same one, are separate.
    expect((await rest('POST', '/v1/contacts', { phone: p }, other.testKey)).status).toBe(201);
    expect((await rest('POST', '/v1/contacts', { phone: p }, org.liveKey)).status).toBe(201);
    expectError(await rest('GET', `/v1/contacts/${c.id}`, undefined, other.testKey), 404, 'NOT_FOUND');
  });

  it('appends tags (duplicates ignored) and removes one', async () => {
    const c = await create({ phone: phone(), tags: ['a'] });
    const added = await rest('POST', `/v1/contacts/${c.id}/tags`, { tags: ['b', 'a', 'c', 'b'] });
    expect(added.body.data.tags).toEqual(['a', 'b', 'c']);
    const removed = await rest('DELETE', `/v1/contacts/${c.id}/tags/b`);
    expect(removed.status).toBe(200);
    expect(removed.body.data.tags).toEqual(['a', 'c']);
    expect((await rest('DELETE', `/v1/contacts/${c.id}/tags/absent`)).body.data.tags).toEqual(['a', 'c']);
    expectError(await rest('POST', `/v1/contacts/${c.id}/tags`, { tags: [] }), 422, 'VALIDATION_ERROR');
  });
});

describe('listing, search and filters', () => {
  let key: string;
  beforeAll(async () => {
    const o = await t.createOrg('enterprise', 'Search org');
    key = o.testKey;
    const people = [
      { first_name: 'Alice', last_name: 'Martin', email: 'alice@acme.io', phone: '+14155554001', country: 'US', lifecycle_stage: 'lead', tags: ['vip'] },
      { first_name: 'Bob', last_name: 'Stone', email: 'bob@globex.com', phone: '+442071234567', country: 'GB', lifecycle_stage: 'customer', tags: ['vip', 'beta'] },
      { first_name: 'Carla', last_name: 'Martinez', email: 'carla@acme.io', phone: '+14155554003', country: 'US', lifecycle_stage: 'customer' },
      { first_name: 'Dan', last_name: 'Brown', email: 'dan@initech.com', country: 'FR', lifecycle_stage: 'churned', tags: ['beta'] },
    ];
    for (const p of people) { tick(); expect((await t.rest('POST', '/v1/contacts', { key, body: p })).status).toBe(201); }
  });
  const names = async (query: string) => {
    tick();
    const r = await t.rest('GET', `/v1/contacts${query}`, { key });
    expect(r.status, r.text).toBe(200);
    return r.body.data.map((c: { first_name: string }) => c.first_name);
  };

  it('lists newest first and filters by lifecycle stage, country and tag', async () => {
    expect(await names('')).toEqual(['Dan', 'Carla', 'Bob', 'Alice']);
    expect(await names('?lifecycle_stage=customer')).toEqual(['Carla', 'Bob']);
    expect(await names('?country=us')).toEqual(['Carla', 'Alice']);
    expect(await names('?tag=vip')).toEqual(['Bob', 'Alice']);
    expect(await names('?tag=beta&country=FR')).toEqual(['Dan']);
    tick();
    expectError(await t.rest('GET', '/v1/contacts?lifecycle_stage=alien', { key }), 422, 'VALIDATION_ERROR');
  });

  it('searches names, emails and phone fragments with full-text and trigram indexes', async () => {
    // Ranked: Alice Martin has the exact word, Carla Martinez only its prefix (though she is newer).
    expect(await names('?search=martin')).toEqual(['Alice', 'Carla']);
    expect(await names('?search=alice%20mar')).toEqual(['Alice']);
    expect(await names('?search=acme')).toEqual(['Carla', 'Alice']);
    expect(await names('?search=bob%40globex.com')).toEqual(['Bob']);
    expect(await names('?search=%2B4420')).toEqual(['Bob']);
    expect(await names('?search=5554003')).toEqual(['Carla']);
    expect(await names('?search=Martinex')).toContain('Carla');
    expect(await names('?search=zzzzqqq')).toEqual([]);
    expect(await names('?search=martin&country=US&lifecycle_stage=lead')).toEqual(['Alice']);
  });

  it('uses the GIN indexes for search', async () => {
    await t.db.query('set enable_seqscan = off');
    const plan = await t.db.query(`explain select id from contacts c where c.search_text %> 'martin' or c.search_vector @@ to_tsquery('simple', '''martin'':*')`);
    const digits = await t.db.query(`explain select id from contacts c where c.search_text like '%5554003%'`);
    await t.db.query('reset enable_seqscan');
    const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toContain('contacts_search_text_idx');
    expect(text).toContain('contacts_search_vector_idx');
    expect(digits.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('contacts_search_text_idx');
  });

  it('pages with signed cursors bound to the filters', async () => {
    tick();
    const first = await t.rest('GET', '/v1/contacts?limit=3', { key });
    expect(first.body.data).toHaveLength(3);
    expect(first.body.meta.pagination.has_more).toBe(true);
    tick();
    const second = await t.rest('GET', `/v1/contacts?limit=3&cursor=${encodeURIComponent(first.body.meta.pagination.cursor)}`, { key });
    expect(second.body.data.map((c: { first_name: string }) => c.first_name)).toEqual(['Alice']);
    expect(second.body.meta.pagination.has_more).toBe(false);
    tick();
    expectError(await t.rest('GET', `/v1/contacts?limit=3&country=US&cursor=${encodeURIComponent(first.body.meta.pagination.cursor)}`, { key }), 400, 'INVALID_CURSOR');
    tick();
    expectError(await t.rest('GET', '/v1/contacts?limit=101', { key }), 400, 'VALIDATION_ERROR');
  });

  it('GraphQL twin: contacts connection with search and filters', async () => {
    tick();
    const r = await t.gql('{ contacts(first: 10, search: "martin", lifecycleStage: lead) { edges { node { id firstName lifecycleStage consent { sms { status } } } } pageInfo { hasNextPage } } }', {}, { key });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.contacts.edges.map((e: any) => e.node.firstName)).toEqual(['Alice']);
    expect(r.body.data.contacts.edges[0].node.consent.sms.status).toBe('unknown');
  });
});

describe('search relevance and metadata', () => {
  let key: string;
  const ids: Record<string, string> = {};
  const people: Record<string, Record<string, unknown>> = {
    prefix: { first_name: 'Leeroy', last_name: 'Jenkins', phone: '+14155558002' },
    meta: { first_name: 'Kim', last_name: 'Park', phone: '+14155558003', metadata: { account: { manager: 'Lee' }, company: 'Zenith Labs', seats: 42 } },
    exact: { first_name: 'Lee', last_name: 'Hart', phone: '+14155558001' },
    emailPrefix: { first_name: 'Ann', last_name: 'Ng', email: 'leeward@example.com' },
    email: { first_name: 'Sam', last_name: 'Ortiz', email: 'lee.sam@example.com' },
    fuzzyMeta: { first_name: 'Otto', phone: '+14155558005', metadata: { nickname: 'Martinex' } },
    fuzzyName: { first_name: 'Carla', last_name: 'Martinez', phone: '+14155558004' },
  };
  beforeAll(async () => {
    key = (await t.createOrg('enterprise', 'Relevance org')).testKey;
    // Created in an order that is neither the expected ranking nor its reverse.
    for (const [name, body] of Object.entries(people)) { tick(); ids[name] = (await t.rest('POST', '/v1/contacts', { key, body })).body.data.id; }
  });
  const search = async (query: string) => {
    tick();
    const r = await t.rest('GET', `/v1/contacts?search=${encodeURIComponent(query)}&limit=100`, { key });
    expect(r.status, r.text).toBe(200);
    const byId = new Map(Object.entries(ids).map(([n, id]) => [id, n]));
    return r.body.data.map((c: { id: string }) => byId.get(c.id));
  };

  it('orders matches by relevance: exact words, then prefixes; names, then email and phone, then metadata; then typos', async () => {
    expect(await search('lee')).toEqual(['exact', 'email', 'prefix', 'emailPrefix', 'meta']);
    // A metadata word (full-text) ranks above a name that is only similar (trigram), although that contact is newer.
    expect(await search('martinex')).toEqual(['fuzzyMeta', 'fuzzyName']);
    expect(await search('jenkins leeroy')).toEqual(['prefix']);
  });

  it('pages a ranked search on (score, id) cursors, REST and GraphQL alike', async () => {
    const all = await search('lee');
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 5; page++) {
      tick();
      const r = await t.rest('GET', `/v1/contacts?search=lee&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { key });
      expect(r.status, r.text).toBe(200);
      seen.push(...r.body.data.map((c: { id: string }) => c.id));
      cursor = r.body.meta.pagination.cursor ?? undefined;
      expect(r.body.meta.pagination.has_more).toBe(seen.length < all.length);
      if (!r.body.meta.pagination.has_more) break;
    }
    expect(seen).toEqual(all.map((n: string) => ids[n]));
    // A cursor belongs to its search.
    tick();
    const first = await t.rest('GET', '/v1/contacts?search=lee&limit=2', { key });
    tick();
    expectError(await t.rest('GET', `/v1/contacts?search=leeroy&limit=2&cursor=${encodeURIComponent(first.body.meta.pagination.cursor)}`, { key }), 400, 'INVALID_CURSOR');

    const q = 'query($after: String) { contacts(first: 2, search: "lee", after: $after) { edges { node { id } } pageInfo { hasNextPage endCursor } } }';
    tick();
    const g1 = await t.gql(q, {}, { key });
    tick();
    const g2 = await t.gql(q, { after: g1.body.data.contacts.pageInfo.endCursor }, { key });
    expect(g2.body.errors, g2.text).toBeUndefined();
    expect([...g1.body.data.contacts.edges, ...g2.body.data.contacts.edges].map((e: any) => e.node.id)).toEqual(seen.slice(0, 4));
  });

  it('finds metadata values at any depth, and stops when they change', async () => {
    expect(await search('zenith')).toEqual(['meta']);
    expect(await search('zenith labs')).toEqual(['meta']);
    expect(await search('42')).toEqual(['meta']);
    expect(await search('8001')).toEqual(['exact']);
    tick();
    expect((await t.rest('PUT', `/v1/contacts/${ids.meta}`, { key, body: { metadata: { company: null } } })).status).toBe(200);
    expect(await search('zenith')).toEqual([]);
    expect(await search('lee')).toContain('meta');
  });
});
