/**
 * Campaigns end to end over HTTP (REST and GraphQL) against the real database with pg-boss
 * workers and the sandbox providers: the state machine and its 409s, the send engine (frozen,
 * de-duplicated audience; consent; one message per recipient even when a batch runs three times
 * at once), pause/resume holding and continuing, cancel, the schedule firing once, pacing,
 * frequency caps, quiet hours, A/B variants and stats, live-mode 10DLC refusal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { startTestApp, type CallOptions, type TestApp, type TestOrg } from './helpers/testApp.ts';

const ENV = {
  SANDBOX_SEND_LATENCY_MS: '0',
  SANDBOX_DELIVERED_AFTER_MS: '50',
  SANDBOX_READ_AFTER_MS: '100',
  CAMPAIGN_SANDBOX_THROUGHPUT: '0',
  CAMPAIGN_BATCH_SIZE: '10',
  LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
};

let t: TestApp;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  t = await startTestApp({ workers: true, clock: systemClock, env: ENV });
  org = await t.createOrg('enterprise', 'Campaign org');
  other = await t.createOrg('enterprise', 'Other org');
});
afterAll(async () => { await t?.close(); });

const call = (method: string, path: string, o: CallOptions = {}) => t.rest(method, path, { key: org.testKey, ...o });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await what();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`timed out waiting; last value: ${JSON.stringify(v)}`);
    await sleep(100);
  }
}

let phoneSeq = 0;
/** A list of `n` contacts with fresh phone numbers (plus whatever `extra` contacts are given). */
async function audience(n: number, extra: Record<string, unknown>[] = [], key = org.testKey): Promise<{ listId: string; phones: string[] }> {
  const list = await t.rest('POST', '/v1/contacts/lists', { key, body: { name: `list ${phoneSeq}` } });
  expect(list.status).toBe(201);
  const phones: string[] = [];
  const bodies: Record<string, unknown>[] = [];
  for (let i = 0; i < n; i++) {
    const phone = `+1415555${String(1000 + phoneSeq++).padStart(4, '0')}`;
    phones.push(phone);
    bodies.push({ phone, first_name: `P${i}` });
  }
  bodies.push(...extra);
  const ids: string[] = [];
  for (let i = 0; i < bodies.length; i += 10) {
    const created = await Promise.all(bodies.slice(i, i + 10).map((b) => t.rest('POST', '/v1/contacts', { key, body: b })));
    for (const c of created) {
      expect(c.status, c.text).toBe(201);
      ids.push(c.body.data.id);
    }
  }
  const added = await t.rest('POST', `/v1/contacts/lists/${list.body.data.id}/members`, { key, body: { contact_ids: ids } });
  expect(added.status, added.text).toBe(200);
  return { listId: list.body.data.id, phones };
}

async function create(body: Record<string, unknown>) {
  const r = await call('POST', '/v1/campaigns', { body: { name: 'Spring sale', channel: 'sms', body: 'Hi {{contact.first_name}}, 20% off. Reply STOP to opt out', ...body } });
  expect(r.status, r.text).toBe(201);
  return r.body.data;
}

const get = async (id: string) => (await call('GET', `/v1/campaigns/${id}`)).body.data;
const finished = (id: string) => until(() => get(id), (c) => c.status === 'completed');

/** Messages of one campaign, counted per recipient, from the database. */
async function messagesPerRecipient(campaignId: string): Promise<Map<string, number>> {
  const { rows } = await t.db.query(`select "to", count(*)::int as n from messages where metadata->>'campaign_id' = $1 group by "to"`, [campaignId]);
  return new Map(rows.map((r) => [r.to, r.n]));
}

describe('campaign resource and state machine', () => {
  it('creates drafts, validates, lists with filters and search, updates and deletes only in the allowed states', async () => {
    const { listId } = await audience(1);
    const missing = await call('POST', '/v1/campaigns', { body: { name: 'x', channel: 'sms', body: 'hi' } });
    expect(missing.status).toBe(422);
    expect(missing.body.error.code).toBe('MISSING_REQUIRED_FIELD');
    expect(missing.body.error.details.field).toBe('segment_id');
    const both = await call('POST', '/v1/campaigns', { body: { name: 'x', channel: 'sms', body: 'hi', list_id: listId, segment_id: 'seg_x' } });
    expect(both.status).toBe(422);
    const unknownList = await call('POST', '/v1/campaigns', { body: { name: 'x', channel: 'sms', body: 'hi', list_id: 'lst_nope' } });
    expect(unknownList.status).toBe(404);
    const noSubject = await call('POST', '/v1/campaigns', { body: { name: 'x', channel: 'email', body: 'hi', list_id: listId } });
    expect(noSubject.body.error.details.field).toBe('subject');
    const past = await call('POST', '/v1/campaigns', { body: { name: 'x', channel: 'sms', body: 'hi', list_id: listId, scheduled_at: '2020-01-01T00:00:00Z' } });
    expect(past.status).toBe(422);

    const draft = await create({ name: 'Autumn promo', list_id: listId });
    expect(draft).toMatchObject({ status: 'draft', channel: 'sms', list_id: listId, segment_id: null, scheduled_at: null });
    expect(draft.id).toMatch(/^cmp_/);
    const email = await create({ name: 'Newsletter', channel: 'email', subject: 'News', list_id: listId });

    const search = await call('GET', '/v1/campaigns?search=autumn');
    expect(search.body.data.map((c: { id: string }) => c.id)).toEqual([draft.id]);
    const byChannel = await call('GET', '/v1/campaigns?channel=email');
    expect(byChannel.body.data.map((c: { id: string }) => c.id)).toEqual([email.id]);
    const page = await call('GET', '/v1/campaigns?limit=1');
    expect(page.body.data).toHaveLength(1);
    expect(page.body.meta.pagination.has_more).toBe(true);
    const next = await call('GET', `/v1/campaigns?limit=1&cursor=${encodeURIComponent(page.body.meta.pagination.cursor)}`);
    expect(next.body.data[0].id).not.toBe(page.body.data[0].id);
    expect((await call('GET', '/v1/campaigns?status=bogus')).status).toBe(422);

    const at = new Date(Date.now() + 3_600_000).toISOString();
    const scheduled = await call('PUT', `/v1/campaigns/${draft.id}`, { body: { body: 'New text. Reply STOP to opt out', scheduled_at: at } });
    expect(scheduled.status, scheduled.text).toBe(200);
    expect(scheduled.body.data).toMatchObject({ status: 'scheduled', body: 'New text. Reply STOP to opt out', name: 'Autumn promo' });
    expect((await call('DELETE', `/v1/campaigns/${draft.id}`)).body.error.code).toBe('CONFLICT');
    const unscheduled = await call('PUT', `/v1/campaigns/${draft.id}`, { body: { scheduled_at: null } });
    expect(unscheduled.body.data.status).toBe('draft');

    expect((await call('POST', `/v1/campaigns/${draft.id}/pause`)).status).toBe(409);
    expect((await call('POST', `/v1/campaigns/${draft.id}/resume`)).status).toBe(409);
    const cancelled = await call('POST', `/v1/campaigns/${draft.id}/cancel`);
    expect(cancelled.body.data.status).toBe('cancelled');
    const put = await call('PUT', `/v1/campaigns/${draft.id}`, { body: { name: 'late' } });
    expect(put.status).toBe(409);
    expect(put.body.error.details).toMatchObject({ status: 'cancelled', allowed_statuses: ['draft', 'scheduled'] });
    expect((await call('POST', `/v1/campaigns/${draft.id}/send`)).status).toBe(409);

    expect((await call('DELETE', `/v1/campaigns/${email.id}`)).status).toBe(204);
    expect((await call('GET', `/v1/campaigns/${email.id}`)).status).toBe(404);
    // Another tenant sees nothing.
    expect((await t.rest('GET', `/v1/campaigns/${draft.id}`, { key: other.testKey })).status).toBe(404);
  });
});

describe('send engine', () => {
  it('freezes a de-duplicated audience, honours opt-outs, sends each recipient once and completes', async () => {
    const { listId, phones } = await audience(23, [
      { email: 'nophone@example.com', first_name: 'Mail' },
      { phone: '+14155559900', first_name: 'Out', consent: { sms: 'opted_out' } },
    ]);
    const c = await create({ list_id: listId });
    const sent = await call('POST', `/v1/campaigns/${c.id}/send`);
    expect(sent.status, sent.text).toBe(200);
    expect(sent.body.data.status).toBe('sending');
    expect((await call('PUT', `/v1/campaigns/${c.id}`, { body: { name: 'x' } })).status).toBe(409);
    expect((await call('DELETE', `/v1/campaigns/${c.id}`)).status).toBe(409);
    const done = await finished(c.id);
    expect(done.audience_count).toBe(25);
    expect(done.stats).toMatchObject({ recipients: 25, sent: 23, skipped: 2, opted_out: 1, pending: 0 });
    expect(done.stats.skipped_by_reason).toMatchObject({ opted_out: 1, no_address: 1 });
    const per = await messagesPerRecipient(c.id);
    expect(per.size).toBe(23);
    expect([...per.values()].every((n) => n === 1)).toBe(true);
    expect(new Set(per.keys())).toEqual(new Set(phones));
    const { rows } = await t.db.query(`select body from messages where metadata->>'campaign_id' = $1 and "to" = $2`, [c.id, phones[3]]);
    expect(rows[0].body).toBe('Hi P3, 20% off. Reply STOP to opt out');
    const delivered = await until(() => get(c.id), (x) => x.stats.delivered === 23);
    expect(delivered.stats.delivered).toBe(23);
    const events = await t.db.query(`select type from events where resource_id = $1 order by id`, [c.id]);
    expect(events.rows.map((r) => r.type)).toEqual(['campaign.started', 'campaign.completed']);
  });

  it('sends each recipient exactly once when the same batches run concurrently (at-least-once jobs)', async () => {
    const { listId } = await audience(30);
    const c = await create({ list_id: listId });
    await call('POST', `/v1/campaigns/${c.id}/send`);
    const scope = systemScope(org.orgId, 'test', 'enterprise', 'req_test');
    const engine = t.app.services.engine;
    await until(() => get(c.id), (x) => x.audience_count !== null, 10_000);
    // The workers run these batches too: every range runs three times at once here.
    await Promise.all([1, 11, 21].flatMap((from) => [0, 1].map(() => engine.runBatch(scope, { campaignId: c.id, from, to: from + 9, generation: 1 }))));
    await finished(c.id);
    const per = await messagesPerRecipient(c.id);
    expect(per.size).toBe(30);
    expect(Math.max(...per.values())).toBe(1);
    const { rows } = await t.db.query(`select count(*)::int as n from sandbox_sends where payload::text like $1`, [`%${c.id}%`]);
    expect(rows[0].n).toBeLessThanOrEqual(30);
  });
});
