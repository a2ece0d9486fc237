/**
 * Contacts end to end over HTTP (REST and GraphQL twins): CRUD with validation codes and unique
 * phone/email, tags, metadata merge, ranked search (full-text over names, emails, phones and
 * metadata, and trigram), filters and pagination, preferences, the consent history and the
 * opt-outs list, consent enforced on sends (and the voice check), inbound SMS keywords, lists and
 * members, the activity timeline from the event backbone, segments with preview, and CSV imports
 * run by the job handler.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { systemClock, type ManualClock } from '../src/platform/clock.ts';
import { ServiceError } from '../src/platform/errors.ts';
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
    // The opt-out is reported before a sender problem (both are looked up at once), every time.
    for (let i = 0; i < 3; i++) {
      tick();
      expectError(await rest('POST', '/v1/messages/sms', { to: p, body: 'promo', from: '+14155550199' }), 422, 'RECIPIENT_OPTED_OUT');
    }
    tick();
    expectError(await rest('POST', '/v1/messages/sms', { to: phone(), body: 'hello', from: '+14155550199' }), 422, 'SENDER_NOT_CONFIGURED');
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

  it('keeps an append-only history of every consent change (create, API, keyword, import), paginated, REST and GraphQL', async () => {
    const p = phone();
    const c = await create({ phone: p, email: `history${seq}@example.com`, consent: { email: 'opted_in' } });
    const put = await rest('PUT', `/v1/contacts/${c.id}/preferences`, { sms: 'opted_out', voice: 'opted_out', source: 'campaign_link' });
    expect(put.status, put.text).toBe(200);
    // Setting a status a channel already has records nothing.
    expect((await rest('PUT', `/v1/contacts/${c.id}/preferences`, { sms: 'opted_out' })).status).toBe(200);
    const start = await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: p, body: 'start' });
    expect(start.status, start.text).toBe(201);
    // An import changes whatsapp (sms is already opted in: no row); a bad consent value rejects its row.
    const imp = await rest('POST', '/v1/contacts/imports', { csv: `phone,consent.whatsapp,consent.sms\n${p},opted_out,opted_in\n${phone()},maybe,\n` });
    expect(imp.status, imp.text).toBe(202);
    await t.app.services.contacts.runImport({ organizationId: org.orgId, mode: 'test' }, imp.body.data.id);
    const report = (await rest('GET', `/v1/contacts/imports/${imp.body.data.id}`)).body.data;
    expect(report).toMatchObject({ accepted: 1, rejected: 1 });
    expect(report.rejections[0]).toMatchObject({ row: 3, code: 'VALIDATION_ERROR', field: 'consent.whatsapp' });

    const h = await rest('GET', `/v1/contacts/${c.id}/preferences/history`, undefined, viewerKey);
    expect(h.status, h.text).toBe(200);
    expect(h.body.data.map((x: any) => [x.channel, x.previous_status, x.status, x.source])).toEqual([
      ['whatsapp', 'unknown', 'opted_out', 'import'],
      ['sms', 'opted_out', 'opted_in', 'keyword'],
      ['voice', 'unknown', 'opted_out', 'campaign_link'],
      ['sms', 'unknown', 'opted_out', 'campaign_link'],
      ['email', 'unknown', 'opted_in', 'api'],
    ]);
    const [imported, keyword, , viaApi] = h.body.data;
    expect(imported).toMatchObject({ contact_id: c.id, actor: null, details: { import_id: imp.body.data.id, row: 2 } });
    expect(keyword).toMatchObject({ actor: null, details: { keyword: 'START', message_id: start.body.data.id } });
    expect(viaApi).toMatchObject({ actor: { type: 'api_key' }, request_id: put.body.meta.request_id, details: {} });
    expect(viaApi.actor.id).toMatch(/^key_/);
    expect(viaApi.id).toMatch(/^cns_/);
    expect(Date.parse(viaApi.created_at)).toBe(Date.parse(put.body.data.consent.sms.updated_at));

    const sms = await rest('GET', `/v1/contacts/${c.id}/preferences/history?channel=sms&limit=1`);
    expect(sms.body.data.map((x: any) => x.source)).toEqual(['keyword']);
    const sms2 = await rest('GET', `/v1/contacts/${c.id}/preferences/history?channel=sms&limit=1&cursor=${encodeURIComponent(sms.body.meta.pagination.cursor)}`);
    expect(sms2.body.data.map((x: any) => x.source)).toEqual(['campaign_link']);
    expect(sms2.body.meta.pagination.has_more).toBe(false);
    expectError(await rest('GET', `/v1/contacts/${c.id}/preferences/history?channel=fax`), 422, 'VALIDATION_ERROR');
    expectError(await rest('GET', `/v1/contacts/${c.id}/preferences/history?cursor=${encodeURIComponent(sms.body.meta.pagination.cursor)}`), 400, 'INVALID_CURSOR');

    tick();
    const gql = await t.gql('query($id: ID!) { contactConsentHistory(id: $id, first: 10, channel: sms) { edges { node { channel status previousStatus source actorType details } } } }', { id: c.id }, { key: viewerKey });
    expect(gql.body.errors, gql.text).toBeUndefined();
    expect(gql.body.data.contactConsentHistory.edges.map((e: any) => e.node)).toEqual([
      { channel: 'sms', status: 'opted_in', previousStatus: 'opted_out', source: 'keyword', actorType: null, details: { keyword: 'START', message_id: start.body.data.id } },
      { channel: 'sms', status: 'opted_out', previousStatus: 'unknown', source: 'campaign_link', actorType: 'api_key', details: {} },
    ]);

    // Deleting the contact deletes its history.
    expect((await rest('DELETE', `/v1/contacts/${c.id}`)).status).toBe(204);
    expect((await t.db.query('select count(*)::int as n from contact_consent_changes where contact_id = $1', [c.id])).rows[0].n).toBe(0);
    expectError(await rest('GET', `/v1/contacts/${c.id}/preferences/history`), 404, 'NOT_FOUND');
  });

  it('the consent check takes voice: a call to an opted-out recipient is refused with RECIPIENT_OPTED_OUT', async () => {
    const p = phone();
    const c = await create({ phone: p });
    const tenant = { organizationId: org.orgId, mode: 'test' as const };
    const consent = t.app.services.contacts.consent;
    await expect(consent.assertCanContact(tenant, 'voice', p)).resolves.toBeUndefined();
    expect((await rest('PUT', `/v1/contacts/${c.id}/preferences`, { voice: 'opted_out' })).body.data.consent.voice.status).toBe('opted_out');

    // Any spelling of the number is the same recipient.
    const national = `+1 (${p.slice(2, 5)}) ${p.slice(5, 8)}-${p.slice(8)}`;
    const err = await consent.assertCanContact(tenant, 'voice', national).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceError);
    expect(err).toMatchObject({ code: 'RECIPIENT_OPTED_OUT', status: 422, details: { channel: 'voice', contact_id: c.id, source: 'api', recipient: p } });
    // Only calls: messages to the number are still accepted, and other tenants' recipients are theirs.
    await expect(consent.assertCanContact(tenant, 'sms', p)).resolves.toBeUndefined();
    expect((await rest('POST', '/v1/messages/sms', { to: p, body: 'still allowed' })).status).toBe(201);
    await expect(consent.assertCanContact({ organizationId: other.orgId, mode: 'test' }, 'voice', p)).resolves.toBeUndefined();
    await expect(consent.assertCanContact({ organizationId: org.orgId, mode: 'live' }, 'voice', p)).resolves.toBeUndefined();

    tick();
    const back = await t.gql('mutation($id: ID!) { setContactPreferences(id: $id, preferences: { voice: opted_in }) { consent { voice { status } } } }', { id: c.id }, { key: org.testKey });
    expect(back.body.data.setContactPreferences.consent.voice.status).toBe('opted_in');
    await expect(consent.assertCanContact(tenant, 'voice', p)).resolves.toBeUndefined();
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
  it('is built from the events to and from the contact\'s phone and email, newest first, paginated', async () => {
    const p = phone();
    const mail = `timeline${seq}@example.com`;
    const c = await create({ phone: p, email: mail });
    const m1 = await rest('POST', '/v1/messages/sms', { to: p, body: 'one' });
    const inbound = await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: p, body: 'reply' });
    // The contact is the second recipient of an email: message events carry only the first `to`.
    const email = await rest('POST', '/v1/messages/email', { to: ['first-recipient@example.com', mail], subject: 'Hi', text: 'hi' });
    expect(email.status, email.text).toBe(201);
    const m4 = await rest('POST', '/v1/messages/sms', { to: p, body: 'four' });
    await rest('POST', '/v1/messages/sms', { to: phone(), body: 'someone else' });
    await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from: phone(), body: 'someone else writes' });

    const a = await rest('GET', `/v1/contacts/${c.id}/activity?limit=3`, undefined, viewerKey);
    expect(a.status, a.text).toBe(200);
    expect(a.body.meta.pagination.has_more).toBe(true);
    expect(a.body.data.map((e: { type: string; resource_id: string }) => [e.type, e.resource_id])).toEqual([
      ['message.queued', m4.body.data.message_id],
      ['message.queued', email.body.data.message_id],
      ['message.received', inbound.body.data.id],
    ]);
    expect(a.body.data[0]).toMatchObject({ resource_type: 'message', channel: 'sms', direction: 'outbound', to: p, status: 'queued' });
    expect(a.body.data[0].id).toMatch(/^evt_/);
    expect(a.body.data[0].data).toMatchObject({ message_id: m4.body.data.message_id, to: p });
    expect(a.body.data[2]).toMatchObject({ direction: 'inbound', from: p, status: 'delivered' });
    const events = await t.db.query('select id from events where resource_id = $1', [m4.body.data.message_id]);
    expect(events.rows.map((r) => r.id)).toContain(a.body.data[0].id);

    const b = await rest('GET', `/v1/contacts/${c.id}/activity?limit=3&cursor=${encodeURIComponent(a.body.meta.pagination.cursor)}`);
    expect(b.body.data.map((e: { type: string; resource_id: string }) => [e.type, e.resource_id])).toEqual([['message.queued', m1.body.data.message_id]]);
    expect(b.body.meta.pagination.has_more).toBe(false);
    // The cursor is bound to this contact's timeline.
    const other = await create({ phone: phone() });
    expectError(await rest('GET', `/v1/contacts/${other.id}/activity?cursor=${encodeURIComponent(a.body.meta.pagination.cursor)}`), 400, 'INVALID_CURSOR');

    tick();
    const gql = await t.gql('query($id: ID!) { contactActivity(id: $id, first: 5) { edges { node { id type resourceId channel direction from to status createdAt } } } }', { id: c.id }, { key: org.testKey });
    expect(gql.body.errors, gql.text).toBeUndefined();
    const nodes = gql.body.data.contactActivity.edges.map((e: any) => e.node);
    expect(nodes.map((n: { id: string }) => n.id)).toEqual([...a.body.data, ...b.body.data].map((e: { id: string }) => e.id));
    expect(nodes[2]).toMatchObject({ type: 'message.received', resourceId: inbound.body.data.id, direction: 'inbound', from: p, channel: 'sms' });
  });

  it('reads the counterpart expression index, not the whole events table', async () => {
    const client = await t.db.connect();
    try {
      await client.query('set enable_seqscan = off');
      const plan = await client.query(
        `explain select id from events e where e.organization_id = $1 and e.mode = 'test' and event_counterpart(e.data) = '+14155550100' and event_counterpart(e.data) is not null order by e.id desc limit 20`,
        [org.orgId],
      );
      expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('events_counterpart_idx');
    } finally {
      await client.query('reset enable_seqscan');
      client.release();
    }
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

describe('through the workers (system clock, fast sandbox providers)', () => {
  let w: TestApp;
  beforeAll(async () => {
    w = await startTestApp({ workers: true, clock: systemClock, env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', SANDBOX_READ_AFTER_MS: '200' } });
  });
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

  it('the timeline has one entry per message event: queued, sent, delivered, read, failed, received', async () => {
    const o = await w.createOrg('enterprise', 'Timeline worker org');
    const key = o.testKey;
    const p = '+14155557001';
    const c = (await w.rest('POST', '/v1/contacts', { key, body: { phone: p } })).body.data;
    const unreachable = (await w.rest('POST', '/v1/contacts', { key, body: { phone: '+15005550001' } })).body.data;
    const sms = (await w.rest('POST', '/v1/messages/sms', { key, body: { to: p, body: 'hi' } })).body.data;
    const rcs = (await w.rest('POST', '/v1/messages/rcs', { key, body: { to: p, body: 'rich' } })).body.data;
    const failing = (await w.rest('POST', '/v1/messages/sms', { key, body: { to: '+15005550001', body: 'nobody' } })).body.data;
    const timeline = async (id: string) => (await w.rest('GET', `/v1/contacts/${id}/activity?limit=100`, { key })).body.data as { type: string; resource_id: string; status: string }[];
    const of = (entries: { type: string; resource_id: string }[], message: string) => entries.filter((e) => e.resource_id === message).map((e) => e.type);

    const entries = await eventually('delivered and read', async () => {
      const got = await timeline(c.id);
      return of(got, sms.message_id).includes('message.delivered') && of(got, rcs.message_id).includes('message.read') ? got : undefined;
    });
    expect(of(entries, sms.message_id)).toEqual(['message.delivered', 'message.sent', 'message.queued']);
    // Under load the provider's read report may be applied before its delivered report (which then no longer applies).
    expect(of(entries, rcs.message_id).filter((type) => type !== 'message.delivered')).toEqual(['message.read', 'message.sent', 'message.queued']);
    expect(entries.find((e) => e.type === 'message.read')?.status).toBe('read');
    const ids = entries.map((e) => (e as unknown as { id: string }).id);
    expect(ids).toEqual([...ids].sort().reverse());

    const failed = await eventually('failed', async () => {
      const got = await timeline(unreachable.id);
      return got.some((e) => e.type === 'message.failed') ? got : undefined;
    });
    expect(of(failed, failing.message_id)).toEqual(['message.failed', 'message.queued']);

    const inbound = (await w.rest('POST', '/v1/sandbox/inbound', { key, body: { channel: 'sms', from: p, body: 'thanks' } })).body.data;
    const after = await timeline(c.id);
    expect(after[0]).toMatchObject({ type: 'message.received', resource_id: inbound.id });
    const gql = await w.gql('query($id: ID!) { contact(id: $id) { lastActivity { id type resourceId } } }', { id: c.id }, { key });
    expect(gql.body.data.contact.lastActivity).toEqual({ id: (after[0] as unknown as { id: string }).id, type: 'message.received', resourceId: inbound.id });
  });
});

describe('GraphQL Contact.lists and Contact.lastActivity', () => {
  /** The id of a message's event of this type. */
  const eventOf = async (messageId: string, type: string) =>
    (await t.db.query('select id from events where resource_id = $1 and type = $2', [messageId, type])).rows[0]?.id as string;
  const query = `query($search: String) { contacts(first: 50, search: $search) { edges { node {
    id tags lists { id name } lastActivity { id type resourceId channel direction to from }
  } } } }`;
  const nodes = async (search: string, key = org.testKey) => {
    tick();
    const r = await t.gql(query, { search }, { key });
    expect(r.body.errors, r.text).toBeUndefined();
    return new Map<string, any>(r.body.data.contacts.edges.map((e: any) => [e.node.id, e.node]));
  };

  it('answers each contact\'s lists and newest timeline entry (phone, email recipient or inbound), null when none, in one batch each', async () => {
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
    const latest = vi.spyOn(t.app.services.contacts, 'lastActivityOf');
    try {
      const got = await nodes('gqlbatch');
      expect([...got.keys()].sort()).toEqual([a.id, b.id, c.id, d.id].sort());
      expect(got.get(a.id).tags).toEqual(['vip']);
      expect(got.get(a.id).lists).toEqual([{ id: l2.id, name: 'Batch two' }, { id: l1.id, name: 'Batch one' }]);
      expect(got.get(b.id).lists).toEqual([]);
      expect(got.get(c.id).lists).toEqual([{ id: l2.id, name: 'Batch two' }]);
      const received = await eventOf(inbound.body.data.id, 'message.received');
      expect(got.get(a.id).lastActivity).toEqual({ id: received, type: 'message.received', resourceId: inbound.body.data.id, channel: 'sms', direction: 'inbound', to: inbound.body.data.to, from: pa });
      expect(got.get(b.id).lastActivity).toBeNull();
      expect(got.get(d.id).lastActivity).toMatchObject({ id: await eventOf(dInbound.body.data.id, 'message.received'), resourceId: dInbound.body.data.id, direction: 'inbound', from: pd });
      expect(got.get(c.id).lastActivity).toMatchObject({
        id: await eventOf(email.body.data.id, 'message.queued'), type: 'message.queued', resourceId: email.body.data.id, channel: 'email', direction: 'outbound', to: 'someone-else@example.com',
      });
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
    expect(one.body.data.contact.lastActivity.id).toBe(await eventOf(inbound.body.data.id, 'message.received'));
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
    expect(mineView.lastActivity.resourceId).toBe(mineMsg.body.data.id);
    const theirView = (await nodes('gqlisolated', other.testKey)).get(theirs.id);
    expect(theirView.lists).toEqual([{ id: theirList.id, name: 'Theirs only' }]);
    expect(theirView.lastActivity.resourceId).toBe(theirMsg.body.data.id);

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

  it('runs contacts(first: 100) with tags, lists and lastActivity in at most 5 SQL statements', async () => {
    const o = await t.createOrg('enterprise', 'Statement count org');
    // 120 contacts straight into the database; lists and messages through the API.
    await t.db.query(`
      insert into contacts (id, organization_id, mode, phone, email, first_name, tags, metadata, consent, sequence, created_at, updated_at)
      select 'con_01count' || lpad(i::text, 15, '0'), $1, 'test', '+1415556' || lpad(i::text, 4, '0'), 'count' || i || '@example.com', 'Count',
        case when i % 2 = 0 then '["even"]'::jsonb else '[]'::jsonb end, '{}', '{}', 1, now(), now()
      from generate_series(1, 120) as g(i)`, [o.orgId]);
    const newest = Array.from({ length: 10 }, (_, i) => `con_01count${String(120 - i).padStart(15, '0')}`);
    const phoneOf = (id: string) => `+1415556${id.slice(-4)}`;
    for (const name of ['Count one', 'Count two']) {
      tick();
      const l = (await t.rest('POST', '/v1/contacts/lists', { key: o.testKey, body: { name } })).body.data;
      tick();
      expect((await t.rest('POST', `/v1/contacts/lists/${l.id}/members`, { key: o.testKey, body: { contact_ids: newest.slice(0, 6) } })).status).toBe(200);
    }
    for (const id of newest.slice(2, 9)) { tick(); expect((await t.rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: phoneOf(id), body: 'hi' } })).status).toBe(201); }
    tick();
    expect((await t.rest('POST', '/v1/sandbox/inbound', { key: o.testKey, body: { channel: 'sms', from: phoneOf(newest[0]!), body: 'hello' } })).status).toBe(201);

    const doc = '{ contacts(first: 100) { edges { node { id tags lists { id name } lastActivity { id type createdAt } } } } }';
    tick();
    expect((await t.gql(doc, {}, { key: o.testKey })).status).toBe(200); // the key's credential is cached from here on
    // Every statement of the service, pool or ORM, goes through pg's Client#query.
    const query = vi.spyOn(pg.Client.prototype, 'query');
    try {
      tick();
      const r = await t.gql(doc, {}, { key: o.testKey });
      expect(r.body.errors, r.text).toBeUndefined();
      const nodes = r.body.data.contacts.edges.map((e: any) => e.node);
      expect(nodes).toHaveLength(100);
      expect(nodes.filter((n: any) => n.lastActivity).map((n: any) => n.id).sort()).toEqual([...newest.slice(0, 1), ...newest.slice(2, 9)].sort());
      expect(nodes.filter((n: any) => n.lists.length === 2)).toHaveLength(6);
      expect(nodes.filter((n: any) => n.tags.includes('even'))).toHaveLength(50);
      const statements = query.mock.calls.map(([q]) => (typeof q === 'string' ? q : (q as { text?: string }).text ?? '')).filter((sql) => !/pgboss/i.test(sql));
      expect(statements.some((sql) => /event_counterpart/.test(sql))).toBe(true);
      expect(statements.length, statements.join('\n---\n')).toBeLessThanOrEqual(5);
    } finally {
      query.mockRestore();
    }
  });
});
