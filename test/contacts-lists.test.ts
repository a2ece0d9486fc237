/**
 * Contact lists and members, segments with preview, and the GraphQL Contact.lists and
 * Contact.lastActivity fields, over HTTP.
 */
import pg from 'pg';
import { beforeAll, describe, expect, it, vi } from 'vitest';
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

    const doc = (name: string) => `query ${name} { contacts(first: 100) { edges { node { id tags lists { id name } lastActivity { id type createdAt } } } } }`;
    tick();
    expect((await t.gql(doc('Warm'), {}, { key: o.testKey })).status).toBe(200); // the key's credential is cached from here on
    // Every statement of the service, pool or ORM, goes through pg's Client#query.
    const query = vi.spyOn(pg.Client.prototype, 'query');
    try {
      tick();
      // Another document (the response cache holds the first one's answer): executed, not served from the cache.
      const r = await t.gql(doc('Counted'), {}, { key: o.testKey });
      expect(r.body.errors, r.text).toBeUndefined();
      expect((r.body as { extensions?: { responseCache?: unknown } }).extensions?.responseCache).toBeUndefined();
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
