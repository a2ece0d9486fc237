/**
 * The contact activity timeline from the event backbone, and CSV imports run by the job handler
 * (and through the workers on the system clock with fast sandbox providers).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { eventually, expectError } from './helpers/assertions.ts';
import { contactsHelpers, startContactsApp } from './helpers/contacts.ts';
import { startTestApp, type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';

const file = useFileApp(startContactsApp);
let t: TestApp;
let org: TestOrg;
let viewerKey: string;
beforeAll(() => { ({ t, org, viewerKey } = file()); });
const { tick, phone, lastSeq, rest, create } = contactsHelpers(() => t, () => org);

describe('activity', () => {
  it('is built from the events to and from the contact\'s phone and email, newest first, paginated', async () => {
    const p = phone();
    const mail = `timeline${lastSeq()}@example.com`;
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
