/**
 * The event history: `GET /v1/events` and the `events` query list what webhooks delivered, so a
 * client that missed deliveries can catch up; filtered by type and time, cursor-paginated, scoped
 * to the organization and mode, and kept EVENTS_RETENTION_DAYS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { idFloor } from '../src/platform/ids.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

let t: TestApp;
let org: TestOrg;
let messageId: string;
beforeAll(async () => {
  // The real clock: the sandbox's delivery reports fall due, and the burst limiter's seconds pass.
  t = await startTestApp({ workers: true, clock: systemClock });
  org = await t.createOrg('growth');
  const sent = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550123', body: 'history' } });
  expect(sent.status, sent.text).toBe(201);
  messageId = sent.body.data.id;
  // The sandbox delivers within about a second: queued, sent, delivered.
  await eventually('the delivered event', async () => {
    const r = await t.rest('GET', '/v1/events?type=message.delivered', { key: org.testKey });
    return r.body.data?.length ? r : undefined;
  });
});
afterAll(async () => { await t?.close(); });

type EventBody = { id: string; type: string; created_at: string; data: Record<string, unknown>; resource_type: string; resource_id: string; sequence: number };

describe('GET /v1/events', () => {
  it('lists the organization\'s events newest first, as webhooks deliver them', async () => {
    const r = await t.rest('GET', '/v1/events?type=message.*', { key: org.testKey });
    expect(r.status, r.text).toBe(200);
    const events = r.body.data as EventBody[];
    expect(events.map((e) => e.type)).toEqual(['message.delivered', 'message.sent', 'message.queued']);
    expect(events.every((e) => e.resource_id === messageId && e.resource_type === 'message')).toBe(true);
    expect(events[0]!.data).toMatchObject({ message_id: messageId, status: 'delivered', to: '+14155550123' });
    expect(events.map((e) => e.sequence)).toEqual([...events.map((e) => e.sequence)].sort((a, b) => b - a));
    expect(r.body.meta.pagination).toEqual({ cursor: null, has_more: false });

    const one = await t.rest('GET', `/v1/events/${events[1]!.id}`, { key: org.testKey });
    expect(one.body.data).toEqual(events[1]);
  });

  it('filters by exact names and by time, and pages with a cursor', async () => {
    const exact = await t.rest('GET', '/v1/events?type=message.sent,message.queued', { key: org.testKey });
    expect((exact.body.data as EventBody[]).map((e) => e.type)).toEqual(['message.sent', 'message.queued']);

    const all = (await t.rest('GET', '/v1/events?type=message.*', { key: org.testKey })).body.data as EventBody[];
    const queuedAt = all.at(-1)!.created_at;
    const after = await t.rest('GET', `/v1/events?type=message.*&created_after=${encodeURIComponent(queuedAt)}`, { key: org.testKey });
    expect((after.body.data as EventBody[]).map((e) => e.type)).not.toContain('message.queued');
    const before = await t.rest('GET', `/v1/events?type=message.*&created_before=${encodeURIComponent(all[0]!.created_at)}`, { key: org.testKey });
    expect((before.body.data as EventBody[]).map((e) => e.type)).not.toContain('message.delivered');
    expect((before.body.data as EventBody[]).map((e) => e.type)).toContain('message.queued');

    const first = await t.rest('GET', '/v1/events?type=message.*&limit=2', { key: org.testKey });
    expect(first.body.meta.pagination.has_more).toBe(true);
    const rest = await t.rest('GET', `/v1/events?type=message.*&limit=2&cursor=${encodeURIComponent(first.body.meta.pagination.cursor)}`, { key: org.testKey });
    expect([...first.body.data, ...rest.body.data].map((e: EventBody) => e.id)).toEqual(all.map((e) => e.id));
  });

  it('shows nothing of another organization or mode, and answers bad filters with the error envelope', async () => {
    const other = await t.createOrg('growth');
    expect((await t.rest('GET', '/v1/events', { key: other.testKey })).body.data).toEqual([]);
    expect((await t.rest('GET', '/v1/events?type=message.*', { key: org.liveKey })).body.data).toEqual([]);
    const foreign = await t.rest('GET', `/v1/events/${(await t.rest('GET', '/v1/events', { key: org.testKey })).body.data[0].id}`, { key: other.testKey });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('NOT_FOUND');

    const badType = await t.rest('GET', '/v1/events?type=message.%25', { key: org.testKey });
    expect(badType.status).toBeGreaterThanOrEqual(400);
    expect(badType.body.error.code).toBe('VALIDATION_ERROR');
    const badDate = await t.rest('GET', '/v1/events?created_after=yesterday', { key: org.testKey });
    expect(badDate.body.error.code).toBe('VALIDATION_ERROR');
  });
});

describe('eventHistory query (GraphQL)', () => {
  it('pages the same history as a connection, filtered by types', async () => {
    const r = await t.gql(`query($types: [String!]) { eventHistory(first: 10, types: $types) { edges { node { id type resourceType resourceId data } } pageInfo { hasNextPage } } }`,
      { types: ['message.delivered', 'message.queued'] }, { key: org.testKey });
    expect(r.body.errors, r.text).toBeUndefined();
    const nodes = r.body.data.eventHistory.edges.map((e: { node: { type: string; resourceId: string } }) => e.node);
    expect(nodes.map((n: { type: string }) => n.type)).toEqual(['message.delivered', 'message.queued']);
    expect(nodes[0]).toMatchObject({ resourceType: 'message', resourceId: messageId });
    const rest = (await t.rest('GET', '/v1/events?type=message.delivered,message.queued', { key: org.testKey })).body.data as EventBody[];
    expect(nodes.map((n: { id: string }) => n.id)).toEqual(rest.map((e) => e.id));
  });
});

describe('retention', () => {
  it('removes events older than the retention from the history, and nothing newer', async () => {
    // An event written 40 days ago (its id carries its time) beside today's.
    // (newId never goes back in time: the id is the 40-day-old floor with a random part of its own.)
    const old = `${idFloor('evt', Date.now() - 40 * 86_400_000)}0123456789abcdef`;
    await t.db.query(
      `insert into events (id, organization_id, mode, type, resource_type, resource_id, sequence, data, created_at)
       values ($1, $2, 'test', 'message.queued', 'message', 'msg_old', 1, '{}', now() - interval '40 days')`, [old, org.orgId]);
    const before = (await t.rest('GET', '/v1/events?limit=100', { key: org.testKey })).body.data as EventBody[];
    expect(before.map((e) => e.id)).toContain(old);
    expect(t.config.webhooks.eventRetentionDays).toBe(30);
    const removed = await t.app.services.events.prune(new Date(Date.now() - t.config.webhooks.eventRetentionDays * 86_400_000));
    expect(removed).toBe(1);
    const after = (await t.rest('GET', '/v1/events?limit=100', { key: org.testKey })).body.data as EventBody[];
    expect(after.map((e) => e.id)).toEqual(before.map((e) => e.id).filter((id) => id !== old));
  });
});
