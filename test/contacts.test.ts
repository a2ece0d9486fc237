/**
 * Contacts end to end over HTTP (REST and GraphQL twins): CRUD with validation codes and unique
 * phone/email, tags, metadata merge, search (full-text and trigram), filters and pagination,
 * preferences and the opt-outs list, consent enforced on sends, inbound SMS keywords, lists and
 * members, the activity timeline, segments with preview, and CSV imports run by the job handler.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { systemClock, type ManualClock } from '../src/platform/clock.ts';
import { eventually, expectError, expectGqlError } from './helpers/assertions.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let viewerKey: string;

beforeAll(async () => {
  t = await startTestApp();
  org = await t.createOrg('enterprise', 'Contacts org');
  other = await t.createOrg('enterprise', 'Other org');
  viewerKey = await t.createKey(org.orgId, 'viewer');
});
afterAll(async () => { await t?.close(); });

/** Enterprise bursts 100/s per key on a frozen clock: move a second on before each burst. */
const tick = () => (t.clock as ManualClock).advance(1000);
let seq = 0;
const phone = () => `+1415555${String(2000 + ++seq).padStart(4, '0')}`;
const rest = (method: string, path: string, body?: unknown, key = org.testKey) => { tick(); return t.rest(method, path, { key, body }); };
const create = async (body: Record<string, unknown>) => {
  const r = await rest('POST', '/v1/contacts', body);
  expect(r.status, r.text).toBe(201);
  return r.body.data;
};

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
    expect(await names('?search=martin')).toEqual(['Carla', 'Alice']);
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

describe('consent', () => {
  it('sets preferences, lists opt-outs and refuses sends to opted-out recipients (REST and GraphQL)', async () => {
    const p = phone();
    const c = await create({ phone: p, email: `optout${seq}@example.com`, first_name: 'Olive' });
    const set = await rest('PUT', `/v1/contacts/${c.id}/preferences`, { sms: 'opted_out', email: 'opted_in' });
    expect(set.status, set.text).toBe(200);
    expect(set.body.data.consent.sms).toMatchObject({ status: 'opted_out', source: 'api' });
    expect(set.body.data.consent.email.status).toBe('opted_in');
    expectError(await rest('PUT', `/v1/contacts/${c.id}/preferences`, { fax: 'opted_out' }), 422, 'VALIDATION_ERROR');
    expectError(await rest('PUT', `/v1/contacts/${c.id}/preferences`, { sms: 'maybe' }), 422, 'VALIDATION_ERROR');
    expectError(await rest('PUT', `/v1/contacts/${c.id}/preferences`, {}), 422, 'VALIDATION_ERROR');

    const before = (await t.db.query('select count(*)::int as n from messages where "to" = $1', [p])).rows[0].n;
    const refused = expectError(await rest('POST', '/v1/messages/sms', { to: p, body: 'promo' }), 422, 'RECIPIENT_OPTED_OUT');
    expect(refused.error.details).toMatchObject({ channel: 'sms', contact_id: c.id });
    tick();
    const gql = await t.gql('mutation($to: String!) { sendSms(input: { to: $to, body: "promo" }) { id } }', { to: p }, { key: org.testKey });
    expectGqlError(gql, 'RECIPIENT_OPTED_OUT');
    expect((await t.db.query('select count(*)::int as n from messages where "to" = $1', [p])).rows[0].n).toBe(before);
    // Other channels are not affected; email was opted in.
    expect((await rest('POST', '/v1/messages/whatsapp', { to: p, type: 'template', template: { name: 'nope', language: 'en' } })).body.error?.code).not.toBe('RECIPIENT_OPTED_OUT');
    expect((await rest('POST', '/v1/messages/email', { to: c.email, subject: 'Hi', text: 'hi' })).status).toBe(201);

    const optouts = await rest('GET', '/v1/contacts/optouts?channel=sms', undefined, viewerKey);
    expect(optouts.body.data.map((x: { id: string }) => x.id)).toContain(c.id);
    expect((await rest('GET', '/v1/contacts/optouts?channel=email')).body.data.map((x: { id: string }) => x.id)).not.toContain(c.id);
    expect((await rest('GET', '/v1/contacts/optouts?search=olive')).body.data.map((x: { id: string }) => x.id)).toEqual([c.id]);
    expectError(await rest('GET', '/v1/contacts/optouts?channel=fax'), 422, 'VALIDATION_ERROR');

    tick();
    const back = await t.gql('mutation($id: ID!) { setContactPreferences(id: $id, preferences: { sms: opted_in }) { consent { sms { status source } } } }', { id: c.id }, { key: org.testKey });
    expect(back.body.data.setContactPreferences.consent.sms).toEqual({ status: 'opted_in', source: 'api' });
    expect((await rest('POST', '/v1/messages/sms', { to: p, body: 'welcome back' })).status).toBe(201);
  });

  it('answers STOP, START and HELP keywords (exact, trimmed, any case) and creates the contact', async () => {
    const p = phone();
    const outbound = async () => (await t.db.query(`select body from messages where "to" = $1 and direction = 'outbound' order by id`, [p])).rows.map((r) => r.body);
    const inbound = async (body: string) => {
      const r = await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: p, body });
      expect(r.status, r.text).toBe(201);
    };
    await inbound('please stop');
    expect(await outbound()).toEqual([]);
    await inbound('  Stop \n');
    const found = await rest('GET', `/v1/contacts?search=${encodeURIComponent(p)}`);
    expect(found.body.data).toHaveLength(1);
    expect(found.body.data[0].consent.sms).toMatchObject({ status: 'opted_out', source: 'keyword' });
    expect(await outbound()).toHaveLength(1);
    expect((await outbound())[0]).toMatch(/unsubscribed/);
    // A second STOP changes nothing and sends nothing more; sends are refused.
    await inbound('UNSUBSCRIBE');
    expect(await outbound()).toHaveLength(1);
    expectError(await rest('POST', '/v1/messages/sms', { to: p, body: 'hi' }), 422, 'RECIPIENT_OPTED_OUT');
    // HELP is answered even when opted out.
    await inbound('help');
    expect((await outbound())[1]).toMatch(/Reply STOP/);
    await inbound('unstop');
    expect((await outbound())[2]).toMatch(/resubscribed/);
    expect((await rest('GET', `/v1/contacts/${found.body.data[0].id}`)).body.data.consent.sms.status).toBe('opted_in');
    expect((await rest('POST', '/v1/messages/sms', { to: p, body: 'hi' })).status).toBe(201);
    for (const word of ['STOPALL', 'cancel', 'End', 'QUIT']) {
      await inbound(word);
      expect((await rest('GET', `/v1/contacts/${found.body.data[0].id}`)).body.data.consent.sms.status).toBe('opted_out');
      await inbound('START');
    }
  });
});

describe('lists', () => {
  it('creates, lists, updates, adds and removes members, pages them, and deletes keeping contacts', async () => {
    const created = await rest('POST', '/v1/contacts/lists', { name: 'Newsletter', description: 'weekly' });
    expect(created.status).toBe(201);
    const l = created.body.data;
    expect(l).toMatchObject({ name: 'Newsletter', description: 'weekly' });
    expect(l.id).toMatch(/^lst_/);
    expectError(await rest('POST', '/v1/contacts/lists', {}), 422, 'MISSING_REQUIRED_FIELD');
    expect((await rest('GET', '/v1/contacts/lists', undefined, viewerKey)).body.data.map((x: { id: string }) => x.id)).toContain(l.id);
    expect((await rest('GET', `/v1/contacts/lists/${l.id}`)).body.data.name).toBe('Newsletter');
    expect((await rest('PUT', `/v1/contacts/lists/${l.id}`, { description: null })).body.data).toMatchObject({ name: 'Newsletter', description: null });

    const cs = [await create({ phone: phone() }), await create({ phone: phone() }), await create({ phone: phone() })];
    const add = await rest('POST', `/v1/contacts/lists/${l.id}/members`, { contact_ids: cs.map((c) => c.id) });
    expect(add.body.data.added).toBe(3);
    expect((await rest('POST', `/v1/contacts/lists/${l.id}/members`, { contact_ids: [cs[0].id] })).body.data.added).toBe(0);
    const bad = expectError(await rest('POST', `/v1/contacts/lists/${l.id}/members`, { contact_ids: [cs[0].id, 'con_01jd0000000000000000000000'] }), 422, 'VALIDATION_ERROR');
    expect(bad.error.details.field).toBe('contact_ids.1');

    const page1 = await rest('GET', `/v1/contacts/lists/${l.id}/members?limit=2`);
    expect(page1.body.data.map((c: { id: string }) => c.id)).toEqual([cs[2].id, cs[1].id]);
    const page2 = await rest('GET', `/v1/contacts/lists/${l.id}/members?limit=2&cursor=${encodeURIComponent(page1.body.meta.pagination.cursor)}`);
    expect(page2.body.data.map((c: { id: string }) => c.id)).toEqual([cs[0].id]);

    expect((await rest('DELETE', `/v1/contacts/lists/${l.id}/members/${cs[1].id}`)).status).toBe(204);
    tick();
    const gql = await t.gql('query($id: ID!) { contactListMembers(id: $id, first: 10) { edges { node { id } } } }', { id: l.id }, { key: org.testKey });
    expect(gql.body.data.contactListMembers.edges.map((e: any) => e.node.id)).toEqual([cs[2].id, cs[0].id]);

    expect((await rest('DELETE', `/v1/contacts/lists/${l.id}`)).status).toBe(204);
    expectError(await rest('GET', `/v1/contacts/lists/${l.id}`), 404, 'NOT_FOUND');
    expect((await rest('GET', `/v1/contacts/${cs[0].id}`)).status).toBe(200);
  });
});

describe('activity', () => {
  it('shows messages to and from the contact, newest first, paginated', async () => {
    const p = phone();
    const c = await create({ phone: p });
    const m1 = await rest('POST', '/v1/messages/sms', { to: p, body: 'one' });
    await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: p, body: 'reply' });
    const m3 = await rest('POST', '/v1/messages/sms', { to: p, body: 'three' });
    await rest('POST', '/v1/messages/sms', { to: phone(), body: 'someone else' });
    const a = await rest('GET', `/v1/contacts/${c.id}/activity?limit=2`, undefined, viewerKey);
    expect(a.status, a.text).toBe(200);
    expect(a.body.data.map((m: { direction: string }) => m.direction)).toEqual(['outbound', 'inbound']);
    expect(a.body.data[0].id).toBe(m3.body.data.id);
    const b = await rest('GET', `/v1/contacts/${c.id}/activity?limit=2&cursor=${encodeURIComponent(a.body.meta.pagination.cursor)}`);
    expect(b.body.data.map((m: { id: string }) => m.id)).toEqual([m1.body.data.id]);
    tick();
    const gql = await t.gql('query($id: ID!) { contactActivity(id: $id, first: 5) { edges { node { id direction } } } }', { id: c.id }, { key: org.testKey });
    expect(gql.body.data.contactActivity.edges).toHaveLength(3);
  });
});

describe('segments', () => {
  let key: string;
  let ids: Record<string, string>;
  beforeAll(async () => {
    const o = await t.createOrg('enterprise', 'Segment org');
    key = o.testKey;
    ids = {};
    const people = [
      { first_name: 'Ann', phone: '+14155555001', country: 'US', lifecycle_stage: 'lead', tags: ['vip'], metadata: { plan: 'pro', seats: 10, address: { city: 'Paris' } } },
      { first_name: 'Ben', phone: '+14155555002', country: 'GB', lifecycle_stage: 'customer', tags: ['beta'], metadata: { plan: 'free', seats: 1 } },
      { first_name: 'Cat', email: 'cat@example.com', country: 'US', lifecycle_stage: 'customer', tags: ['vip', 'beta'], metadata: { seats: '20' } },
    ];
    for (const p of people) { tick(); ids[p.first_name] = (await t.rest('POST', '/v1/contacts', { key, body: p })).body.data.id; }
    tick();
    await t.rest('PUT', `/v1/contacts/${ids.Ben}/preferences`, { key, body: { sms: 'opted_out' } });
    tick();
    await t.rest('POST', '/v1/messages/sms', { key, body: { to: '+14155555001', body: 'hello' } });
  });
  const preview = async (rules: unknown) => {
    tick();
    const r = await t.rest('POST', '/v1/contacts/segments/preview', { key, body: { rules } });
    return r;
  };
  const match = async (rules: unknown) => {
    const r = await preview(rules);
    expect(r.status, r.text).toBe(200);
    expect(r.body.data.count).toBe(r.body.data.contacts.length);
    return r.body.data.contacts.map((c: { first_name: string }) => c.first_name).sort();
  };

  it('compiles each kind of condition and nested groups', async () => {
    expect(await match({ all: [] })).toEqual(['Ann', 'Ben', 'Cat']);
    expect(await match({ all: [{ field: 'lifecycle_stage', op: 'eq', value: 'customer' }, { field: 'country', op: 'eq', value: 'us' }] })).toEqual(['Cat']);
    expect(await match({ any: [{ field: 'country', op: 'eq', value: 'GB' }, { all: [{ field: 'tags', op: 'contains', value: 'vip' }, { field: 'email', op: 'exists' }] }] })).toEqual(['Ben', 'Cat']);
    expect(await match({ all: [{ field: 'tags', op: 'contains_all', value: ['vip', 'beta'] }] })).toEqual(['Cat']);
    expect(await match({ all: [{ field: 'tags', op: 'not_contains', value: 'vip' }] })).toEqual(['Ben']);
    expect(await match({ all: [{ field: 'metadata.plan', op: 'in', value: ['pro', 'enterprise'] }] })).toEqual(['Ann']);
    expect(await match({ all: [{ field: 'metadata.seats', op: 'gte', value: 5 }] })).toEqual(['Ann']);
    expect(await match({ all: [{ field: 'metadata.address.city', op: 'eq', value: 'Paris' }] })).toEqual(['Ann']);
    expect(await match({ all: [{ field: 'metadata.plan', op: 'not_exists' }] })).toEqual(['Cat']);
    expect(await match({ all: [{ field: 'consent.sms', op: 'eq', value: 'opted_out' }] })).toEqual(['Ben']);
    expect(await match({ all: [{ field: 'consent.sms', op: 'neq', value: 'opted_out' }] })).toEqual(['Ann', 'Cat']);
    expect(await match({ all: [{ field: 'first_name', op: 'starts_with', value: 'a' }] })).toEqual(['Ann']);
    expect(await match({ all: [{ field: 'created_at', op: 'within_days', value: 1 }] })).toEqual(['Ann', 'Ben', 'Cat']);
    expect(await match({ all: [{ field: 'created_at', op: 'before', value: '2000-01-01' }] })).toEqual([]);
    expect(await match({ all: [{ field: 'activity', op: 'within_days', value: 30, channel: 'sms', direction: 'outbound' }] })).toEqual(['Ann']);
    expect(await match({ all: [{ field: 'activity', op: 'not_within_days', value: 30 }] })).toEqual(['Ben', 'Cat']);
  });

  it('rejects unknown fields, operators and malformed rules with details.field', async () => {
    const field = async (rules: unknown) => expectError(await preview(rules), 422, 'VALIDATION_ERROR').error.details.field;
    expect(await field({ all: [{ field: 'shoe_size', op: 'eq', value: 42 }] })).toBe('rules.all.0.field');
    expect(await field({ all: [{ field: 'country', op: 'like', value: 'US' }] })).toBe('rules.all.0.op');
    expect(await field({ any: [{ field: 'tags', op: 'contains', value: 'x' }, { all: [{ field: 'lifecycle_stage', op: 'eq', value: 'alien' }] }] })).toBe('rules.any.1.all.0.value');
    expect(await field({ some: [] })).toBe('rules');
    expect(await field({ any: [] })).toBe('rules.any');
    expect(await field({ all: [{ field: 'consent.fax', op: 'eq', value: 'opted_out' }] })).toBe('rules.all.0.field');
  });

  it('creates, lists, gets, updates, previews and deletes segments (REST and GraphQL)', async () => {
    tick();
    const created = await t.rest('POST', '/v1/contacts/segments', { key, body: { name: 'VIPs', rules: { all: [{ field: 'tags', op: 'contains', value: 'vip' }] } } });
    expect(created.status, created.text).toBe(201);
    const s = created.body.data;
    expect(s.id).toMatch(/^seg_/);
    tick();
    expectError(await t.rest('POST', '/v1/contacts/segments', { key, body: { name: 'bad', rules: { all: [{ field: 'x', op: 'eq', value: 1 }] } } }), 422, 'VALIDATION_ERROR');
    tick();
    expect((await t.rest('GET', '/v1/contacts/segments', { key })).body.data.map((x: { id: string }) => x.id)).toEqual([s.id]);
    tick();
    const pv = await t.rest('GET', `/v1/contacts/segments/${s.id}/preview?limit=1`, { key });
    expect(pv.body.data.count).toBe(2);
    expect(pv.body.data.contacts).toHaveLength(1);
    tick();
    const upd = await t.rest('PUT', `/v1/contacts/segments/${s.id}`, { key, body: { rules: { all: [{ field: 'country', op: 'eq', value: 'GB' }] } } });
    expect(upd.body.data.rules).toEqual({ all: [{ field: 'country', op: 'eq', value: 'GB' }] });
    tick();
    const gql = await t.gql('query($id: ID!) { segment(id: $id) { name } segmentPreview(id: $id) { count contacts { firstName } } }', { id: s.id }, { key });
    expect(gql.body.data).toEqual({ segment: { name: 'VIPs' }, segmentPreview: { count: 1, contacts: [{ firstName: 'Ben' }] } });
    tick();
    expect((await t.rest('DELETE', `/v1/contacts/segments/${s.id}`, { key })).status).toBe(204);
    tick();
    expectError(await t.rest('GET', `/v1/contacts/segments/${s.id}`, { key }), 404, 'NOT_FOUND');
    tick();
    expect((await t.rest('GET', `/v1/contacts/${ids.Ben}`, { key })).status).toBe(200);
  });
});

describe('CSV import', () => {
  it('upserts by phone or email and reports rejected rows with reasons', async () => {
    const existing = await create({ email: 'import-existing@example.com', first_name: 'Old', tags: ['a'] });
    const l = (await rest('POST', '/v1/contacts/lists', { name: 'Imported' })).body.data;
    const csv = [
      'phone,email,first_name,last_name,country,lifecycle_stage,tags,metadata.source',
      '+14155556001,new1@example.com,New,One,us,lead,vip;beta,fair',
      ',import-existing@example.com,Updated,,,,b,',
      'not-a-phone,,Bad,,,,,',
      '+14155556002,,"Quoted, Name",,XX,,,',
      ',,NoAddress,,,,,',
      '+14155556001,,,Again,,,gamma,',
    ].join('\r\n');
    const started = await rest('POST', '/v1/contacts/imports', { csv, list_id: l.id });
    expect(started.status, started.text).toBe(202);
    expect(started.body.data).toMatchObject({ status: 'queued', total_rows: 6, processed_rows: 0 });
    expectError(await rest('POST', '/v1/contacts/imports', { csv: 'name\nx' }), 422, 'VALIDATION_ERROR');

    // Workers are off in this suite: run the job's handler directly, as the worker would (twice: idempotent).
    const scope = { organizationId: org.orgId, mode: 'test' as const };
    await t.app.services.contacts.runImport(scope, started.body.data.id);
    await t.app.services.contacts.runImport(scope, started.body.data.id);

    const done = await rest('GET', `/v1/contacts/imports/${started.body.data.id}`, undefined, viewerKey);
    expect(done.body.data).toMatchObject({ status: 'completed', total_rows: 6, processed_rows: 6, created: 1, updated: 2, accepted: 3, rejected: 3 });
    expect(done.body.data.rejections.map((r: { row: number; code: string }) => [r.row, r.code])).toEqual([[4, 'INVALID_PHONE_NUMBER'], [5, 'VALIDATION_ERROR'], [6, 'MISSING_REQUIRED_FIELD']]);
    const updated = (await rest('GET', `/v1/contacts/${existing.id}`)).body.data;
    expect(updated).toMatchObject({ first_name: 'Updated', tags: ['a', 'b'] });
    const imported = (await rest('GET', '/v1/contacts?search=new1%40example.com')).body.data[0];
    expect(imported).toMatchObject({ phone: '+14155556001', last_name: 'Again', country: 'US', lifecycle_stage: 'lead', tags: ['vip', 'beta', 'gamma'], metadata: { source: 'fair' } });
    const members = await rest('GET', `/v1/contacts/lists/${l.id}/members`);
    expect(members.body.data).toHaveLength(2);
    tick();
    const gql = await t.gql('query($id: ID!) { contactImport(id: $id) { status accepted rejected rejections { row code } } }', { id: started.body.data.id }, { key: org.testKey });
    expect(gql.body.data.contactImport).toMatchObject({ status: 'completed', accepted: 3, rejected: 3 });
  });
});

describe('CSV import through the worker', () => {
  let w: TestApp;
  beforeAll(async () => { w = await startTestApp({ workers: true, clock: systemClock }); });
  afterAll(async () => { await w?.close(); });

  it('a queued import is picked up by the contacts.import job and completes with its report', async () => {
    const o = await w.createOrg('enterprise', 'Import worker org');
    const csv = ['phone,email,first_name', '+14155556101,,Worker', ',bad-email,Nope'].join('\n');
    const started = await w.rest('POST', '/v1/contacts/imports', { key: o.testKey, body: { csv } });
    expect(started.status, started.text).toBe(202);
    const done = await eventually('import completed', async () => {
      const r = await w.rest('GET', `/v1/contacts/imports/${started.body.data.id}`, { key: o.testKey });
      return r.body.data.status === 'completed' ? r.body.data : undefined;
    });
    expect(done).toMatchObject({ total_rows: 2, processed_rows: 2, created: 1, accepted: 1, rejected: 1 });
    expect(done.rejections.map((r: { row: number; code: string }) => [r.row, r.code])).toEqual([[3, 'INVALID_EMAIL']]);
    const found = await w.rest('GET', '/v1/contacts?search=%2B14155556101', { key: o.testKey });
    expect(found.body.data.map((c: { first_name: string }) => c.first_name)).toEqual(['Worker']);
  });
});

describe('GraphQL Contact.lists and Contact.lastActivity', () => {
  const query = `query($search: String) { contacts(first: 50, search: $search) { edges { node {
    id tags lists { id name } lastActivity { id channel direction to from }
  } } } }`;
  const nodes = async (search: string, key = org.testKey) => {
    tick();
    const r = await t.gql(query, { search }, { key });
    expect(r.body.errors, r.text).toBeUndefined();
    return new Map<string, any>(r.body.data.contacts.edges.map((e: any) => [e.node.id, e.node]));
  };

  it('answers each contact\'s lists and newest message (phone, email recipient or inbound), null when none, in one batch each', async () => {
    const pa = phone();
    const a = await create({ phone: pa, email: 'gqlbatch-a@example.com', first_name: 'Gqlbatch', tags: ['vip'] });
    const b = await create({ phone: phone(), first_name: 'Gqlbatch' });
    const c = await create({ email: 'gqlbatch-c@example.com', first_name: 'Gqlbatch' });
    const pd = phone();
    const d = await create({ phone: pd, first_name: 'Gqlbatch' });
    const l1 = (await rest('POST', '/v1/contacts/lists', { name: 'Batch one' })).body.data;
    const l2 = (await rest('POST', '/v1/contacts/lists', { name: 'Batch two' })).body.data;
    await rest('POST', `/v1/contacts/lists/${l1.id}/members`, { contact_ids: [a.id] });
    await rest('POST', `/v1/contacts/lists/${l2.id}/members`, { contact_ids: [a.id, c.id] });

    expect((await rest('POST', '/v1/messages/sms', { to: pa, body: 'first' })).status).toBe(201);
    expect((await rest('POST', '/v1/messages/email', { to: 'gqlbatch-a@example.com', subject: 'Hi', text: 'hi' })).status).toBe(201);
    const inbound = await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: pa, body: 'newest' });
    expect(inbound.status, inbound.text).toBe(201);
    // c is the second recipient of an email: matched through `recipients`, not `to`.
    const email = await rest('POST', '/v1/messages/email', { to: ['someone-else@example.com', 'gqlbatch-c@example.com'], subject: 'Hi', text: 'hi' });
    expect(email.status, email.text).toBe(201);
    // d only ever wrote in: matched through `from` alone.
    const dInbound = await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: pd, body: 'hello' });
    expect(dInbound.status, dInbound.text).toBe(201);
    await rest('POST', '/v1/messages/sms', { to: phone(), body: 'not a contact of this test' });

    const lists = vi.spyOn(t.app.services.contacts, 'listsOf');
    const latest = vi.spyOn(t.app.services.messaging, 'latestMessagesWith');
    try {
      const got = await nodes('gqlbatch');
      expect([...got.keys()].sort()).toEqual([a.id, b.id, c.id, d.id].sort());
      expect(got.get(a.id).tags).toEqual(['vip']);
      expect(got.get(a.id).lists).toEqual([{ id: l2.id, name: 'Batch two' }, { id: l1.id, name: 'Batch one' }]);
      expect(got.get(b.id).lists).toEqual([]);
      expect(got.get(c.id).lists).toEqual([{ id: l2.id, name: 'Batch two' }]);
      expect(got.get(a.id).lastActivity).toEqual({ id: inbound.body.data.id, channel: 'sms', direction: 'inbound', to: inbound.body.data.to, from: pa });
      expect(got.get(b.id).lastActivity).toBeNull();
      expect(got.get(d.id).lastActivity).toMatchObject({ id: dInbound.body.data.id, direction: 'inbound', from: pd });
      expect(got.get(c.id).lastActivity).toMatchObject({ id: email.body.data.id, channel: 'email', direction: 'outbound', to: 'someone-else@example.com' });
      expect(lists).toHaveBeenCalledTimes(1);
      expect(latest).toHaveBeenCalledTimes(1);
    } finally {
      lists.mockRestore();
      latest.mockRestore();
    }

    // The same fields on a single contact, for a viewer.
    tick();
    const one = await t.gql('query($id: ID!) { contact(id: $id) { lists { name } lastActivity { id createdAt } } }', { id: a.id }, { key: viewerKey });
    expect(one.body.data.contact.lists.map((l: { name: string }) => l.name)).toEqual(['Batch two', 'Batch one']);
    expect(one.body.data.contact.lastActivity.id).toBe(inbound.body.data.id);
    expect(Number.isNaN(Date.parse(one.body.data.contact.lastActivity.createdAt))).toBe(false);
  });

  it('keeps lists and activity inside the organization and mode', async () => {
    const p = phone();
    const mine = await create({ phone: p, email: 'gqlisolated@example.com', first_name: 'Gqlisolated' });
    const mineMsg = await rest('POST', '/v1/messages/sms', { to: p, body: 'mine' });
    expect(mineMsg.status).toBe(201);
    const l = (await rest('POST', '/v1/contacts/lists', { name: 'Mine only' })).body.data;
    await rest('POST', `/v1/contacts/lists/${l.id}/members`, { contact_ids: [mine.id] });

    // The other organization: a contact with the same phone and email, a newer message to it, and its own list.
    const theirs = (await rest('POST', '/v1/contacts', { phone: p, email: 'gqlisolated@example.com', first_name: 'Gqlisolated' }, other.testKey)).body.data;
    const theirMsg = await rest('POST', '/v1/messages/sms', { to: p, body: 'theirs' }, other.testKey);
    expect(theirMsg.status, theirMsg.text).toBe(201);
    const theirList = (await rest('POST', '/v1/contacts/lists', { name: 'Theirs only' }, other.testKey)).body.data;
    await rest('POST', `/v1/contacts/lists/${theirList.id}/members`, { contact_ids: [theirs.id] }, other.testKey);

    const mineView = (await nodes('gqlisolated')).get(mine.id);
    expect(mineView.lists).toEqual([{ id: l.id, name: 'Mine only' }]);
    expect(mineView.lastActivity.id).toBe(mineMsg.body.data.id);
    const theirView = (await nodes('gqlisolated', other.testKey)).get(theirs.id);
    expect(theirView.lists).toEqual([{ id: theirList.id, name: 'Theirs only' }]);
    expect(theirView.lastActivity.id).toBe(theirMsg.body.data.id);

    // Live mode of the same organization: same phone, no lists, no activity (the messages are test mode).
    const live = (await rest('POST', '/v1/contacts', { phone: p, first_name: 'Gqlisolated' }, org.liveKey)).body.data;
    const liveView = (await nodes('gqlisolated', org.liveKey)).get(live.id);
    expect(liveView).toMatchObject({ lists: [], lastActivity: null });

    // The services scope by the tenant given, whatever ids are asked for.
    const tenant = { organizationId: other.orgId, mode: 'test' as const };
    expect((await t.app.services.contacts.listsOf(tenant, [mine.id])).get(mine.id)).toEqual([]);
    const cross = await t.app.services.contacts.lastActivityOf({ organizationId: org.orgId, mode: 'live' }, [mine]);
    expect(cross.size).toBe(0);
  });
});
