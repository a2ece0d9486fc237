/**
 * Campaigns end to end over HTTP (REST and GraphQL) against the real database with pg-boss
 * workers and the sandbox providers: the state machine and its 409s, the send engine (frozen,
 * de-duplicated audience; consent; one message per recipient even when a batch runs three times
 * at once), pause/resume holding and continuing, cancel, the schedule firing once, pacing,
 * frequency caps, quiet hours, A/B variants and stats, live-mode 10DLC refusal.
 */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { openSandboxPayload } from './helpers/sandbox.ts';
import { startTestApp, type CallOptions, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventuallyHolds } from './helpers/assertions.ts';

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

const until = <T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> => eventuallyHolds('the campaign', read, ok, timeoutMs);

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
    const { rows } = await t.db.query(`select payload from sandbox_sends`);
    const sent = rows.filter((r) => JSON.stringify(openSandboxPayload(r.payload)).includes(c.id));
    expect(sent.length).toBeLessThanOrEqual(30);
  });
});

describe('scheduling', () => {
  it('moves draft → scheduled and fires once, even when the schedule runs concurrently', async () => {
    const { listId } = await audience(3);
    const at = new Date(Date.now() + 1500).toISOString();
    const c = await create({ list_id: listId, scheduled_at: at });
    expect(c.status).toBe('scheduled');
    const scope = systemScope(org.orgId, 'test', 'enterprise', 'req_sched');
    // Two instances' handlers at once, plus the real job later: one start.
    await Promise.all([0, 1, 2].map(() => t.app.services.campaigns.fireSchedule(scope, c.id, new Date(at).toISOString())));
    await finished(c.id);
    await sleep(1500);
    const events = await t.db.query(`select type from events where resource_id = $1 and type = 'campaign.started'`, [c.id]);
    expect(events.rows).toHaveLength(1);
    expect((await messagesPerRecipient(c.id)).size).toBe(3);
  });

  it('a moved schedule leaves the old instant without effect', async () => {
    const { listId } = await audience(1);
    const c = await create({ list_id: listId, scheduled_at: new Date(Date.now() + 800).toISOString() });
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await call('PUT', `/v1/campaigns/${c.id}`, { body: { scheduled_at: later } })).body.data.status).toBe('scheduled');
    await sleep(2000);
    expect((await get(c.id)).status).toBe('scheduled');
  });
});

describe('audience rules', () => {
  it('skips recipients over the frequency cap across campaigns', async () => {
    const { listId } = await audience(3);
    const first = await create({ list_id: listId });
    await call('POST', `/v1/campaigns/${first.id}/send`);
    await finished(first.id);
    const capped = await create({ list_id: listId, frequency_cap: { max_messages: 1, period_hours: 24 } });
    await call('POST', `/v1/campaigns/${capped.id}/send`);
    const done = await finished(capped.id);
    expect(done.stats).toMatchObject({ sent: 0, skipped: 3 });
    expect(done.stats.skipped_by_reason.frequency_cap).toBe(3);
    const loose = await create({ list_id: listId, frequency_cap: { max_messages: 2, period_hours: 24 } });
    await call('POST', `/v1/campaigns/${loose.id}/send`);
    expect((await finished(loose.id)).stats.sent).toBe(3);
  });

  it('defers recipients inside their quiet hours and sends the others', async () => {
    const hhmm = (d: Date) => d.toISOString().slice(11, 16);
    const now = Date.now();
    const { listId } = await audience(2, [{ phone: '+6421555001', first_name: 'Kiwi', metadata: { timezone: 'Pacific/Kiritimati' } }]);
    const c = await create({ list_id: listId, quiet_hours: { start: hhmm(new Date(now - 3_600_000)), end: hhmm(new Date(now + 3_600_000)), timezone: 'UTC' } });
    await call('POST', `/v1/campaigns/${c.id}/send`);
    const progress = await until(() => get(c.id), (x) => x.stats.sent === 1 && x.stats.waiting_by_reason.quiet_hours_deferred === 2);
    expect(progress.status).toBe('sending');
    expect(progress.stats.pending).toBe(2);
    expect([...(await messagesPerRecipient(c.id)).keys()]).toEqual(['+6421555001']);
    const { rows } = await t.db.query(`select not_before from campaign_recipients where campaign_id = $1 and wait_reason = 'quiet_hours'`, [c.id]);
    expect(rows.every((r) => Math.abs(new Date(r.not_before).getTime() - (now + 3_600_000)) < 61_000)).toBe(true);
    const cancelled = await call('POST', `/v1/campaigns/${c.id}/cancel`);
    expect(cancelled.body.data.status).toBe('cancelled');
    expect((await get(c.id)).stats).toMatchObject({ cancelled: 2, pending: 0, sent: 1 });
  });

  it('splits the audience between A/B variants by weight and reports each; a winner goes to the held-back rest', async () => {
    const { listId } = await audience(40);
    const c = await create({
      list_id: listId, body: null,
      ab_test: { variants: [{ name: 'A', body: 'Offer A. Reply STOP to opt out', weight: 1 }, { name: 'B', body: 'Offer B. Reply STOP to opt out', weight: 1 }] },
    });
    await call('POST', `/v1/campaigns/${c.id}/send`);
    const done = await finished(c.id);
    const [a, b] = done.stats.variants;
    expect([a.name, b.name]).toEqual(['A', 'B']);
    expect(a.sent + b.sent).toBe(40);
    expect(Math.min(a.sent, b.sent)).toBeGreaterThan(5);
    const { rows } = await t.db.query(`select metadata->>'campaign_variant' as v, body from messages where metadata->>'campaign_id' = $1`, [c.id]);
    expect(rows.every((r) => r.body === `Offer ${r.v}. Reply STOP to opt out`)).toBe(true);

    const w = await create({
      list_id: listId, body: null,
      ab_test: { variants: [{ name: 'A', body: 'Offer A. Reply STOP', weight: 1 }, { name: 'B', body: 'Offer B. Reply STOP', weight: 1 }], winner: { metric: 'delivered', after_minutes: 60, test_percent: 25 } },
    });
    await call('POST', `/v1/campaigns/${w.id}/send`);
    const tested = await until(() => get(w.id), (x) => x.stats.pending > 0 && x.stats.pending === x.stats.waiting_by_reason.ab_test_winner && x.stats.delivered === x.stats.sent && x.stats.sent > 0);
    expect(tested.status).toBe('sending');
    expect(tested.stats.sent + tested.stats.pending).toBe(40);
    // The test group is random (25 % of contacts by a hash of their ids), and so is each one's
    // variant: now and then one variant has no test send at all (its rate is 0). The winner is the
    // best delivered rate, a tie going to the first listed (A, when both delivered all).
    type Tested = { name: string; sent: number; delivered: number };
    const rate = (v: Tested) => (v.sent > 0 ? v.delivered / v.sent : 0);
    const expected = (tested.stats.variants as Tested[]).reduce((x, y) => (rate(y) > rate(x) ? y : x)).name;
    if ((tested.stats.variants as Tested[]).every((v) => v.sent > 0)) expect(expected).toBe('A');
    await t.app.services.engine.pickWinner(systemScope(org.orgId, 'test', 'enterprise', 'req_w'), w.id);
    const won = await finished(w.id);
    expect(won.winner_variant).toBe(expected);
    const winnerCount = won.stats.variants.find((v: { name: string }) => v.name === expected).sent;
    expect(winnerCount).toBe(40 - won.stats.variants.find((v: { name: string }) => v.name !== expected).sent);
    expect(winnerCount).toBeGreaterThan(tested.stats.pending);
  });
});

describe('stats, GraphQL and live mode', () => {
  it('aggregates over the organization (REST and GraphQL) and runs the lifecycle through GraphQL', async () => {
    const { listId } = await audience(2);
    const created = await t.gql(`mutation($input: CreateCampaignInput!) { createCampaign(input: $input) { id status channel listId } }`,
      { input: { name: 'GQL', channel: 'sms', listId, body: 'Hello {{contact.first_name}}. Reply STOP', frequencyCap: { max_messages: 5, period_hours: 1 } } }, { key: org.testKey });
    expect(created.body.errors).toBeUndefined();
    const id = created.body.data!.createCampaign.id;
    expect(created.body.data!.createCampaign).toMatchObject({ status: 'draft', channel: 'sms', listId });
    const paused = await t.gql(`mutation($id: ID!) { pauseCampaign(id: $id) { status } }`, { id }, { key: org.testKey });
    expect(paused.body.errors![0].extensions).toMatchObject({ code: 'CONFLICT', status: 409 });
    const sent = await t.gql(`mutation($id: ID!) { sendCampaign(id: $id) { status } }`, { id }, { key: org.testKey });
    expect(sent.body.data!.sendCampaign.status).toBe('sending');
    await finished(id);
    const q = await t.gql(`query($id: ID!) { campaign(id: $id) { status frequencyCap stats { recipients sent skipped skippedByReason variants { name } } } }`, { id }, { key: org.testKey });
    expect(q.body.data!.campaign).toMatchObject({ status: 'completed', frequencyCap: { max_messages: 5, period_hours: 1 }, stats: { recipients: 2, sent: 2, skipped: 0, variants: [] } });

    const rest = await call('GET', '/v1/campaigns/stats');
    expect(rest.status).toBe(200);
    const s = rest.body.data;
    const { rows } = await t.db.query(`select count(*)::int as n from campaign_recipients where organization_id = $1 and status = 'sent'`, [org.orgId]);
    expect(s.sent).toBe(rows[0].n);
    expect(s.campaigns_by_status.completed).toBeGreaterThan(3);
    expect(s.campaigns).toBe(Object.values(s.campaigns_by_status as Record<string, number>).reduce((a, b) => a + b, 0));
    expect(s).toHaveProperty('opted_out');
    const gql = await t.gql(`{ campaignStats { campaigns sent optedOut campaignsByStatus } }`, {}, { key: org.testKey });
    expect(gql.body.data!.campaignStats).toMatchObject({ campaigns: s.campaigns, sent: s.sent, optedOut: s.opted_out });
    // Another organization starts from zero.
    expect((await t.rest('GET', '/v1/campaigns/stats', { key: other.testKey })).body.data).toMatchObject({ campaigns: 0, sent: 0 });
    // Viewers read, but do not send.
    const viewer = await t.createKey(org.orgId, 'viewer');
    expect((await t.rest('GET', `/v1/campaigns/${id}`, { key: viewer })).status).toBe(200);
    expect((await t.rest('POST', `/v1/campaigns/${id}/send`, { key: viewer })).status).toBe(403);
  });

  it('streams live progress through the campaignProgress subscription until the campaign completes', async () => {
    const { listId } = await audience(12);
    const c = await create({ list_id: listId });
    const client = createClient({ url: `${t.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: org.testKey }, retryAttempts: 0, lazy: true });
    const seen: { status: string; stats: { sent: number; recipients: number } }[] = [];
    const ended = new Promise<void>((resolve, reject) => {
      client.subscribe({ query: 'subscription($id: ID!) { campaignProgress(id: $id) { status stats { sent recipients } } }', variables: { id: c.id } }, {
        next: (v) => { seen.push((v.data as { campaignProgress: (typeof seen)[number] }).campaignProgress); }, error: reject, complete: resolve,
      });
    });
    await until(async () => seen.length, (n) => n > 0, 5000);
    await call('POST', `/v1/campaigns/${c.id}/send`);
    await ended;
    await client.dispose();
    expect(seen[0]).toMatchObject({ status: 'draft', stats: { sent: 0 } });
    expect(seen[seen.length - 1]).toMatchObject({ status: 'completed', stats: { sent: 12, recipients: 12 } });
    expect(seen.some((v) => v.status === 'sending')).toBe(true);
    // Progress only moves forward.
    expect(seen.map((v) => v.stats.sent)).toEqual([...seen.map((v) => v.stats.sent)].sort((a, b) => a - b));
  });

  it('refuses live SMS campaigns from unregistered US long codes', async () => {
    const list = await t.rest('POST', '/v1/contacts/lists', { key: org.liveKey, body: { name: 'live list' } });
    const base = { name: 'Live', channel: 'sms', body: 'Hi. Reply STOP', list_id: list.body.data.id };
    for (const extra of [{}, { from: '+14155550123' }]) {
      const c = await t.rest('POST', '/v1/campaigns', { key: org.liveKey, body: { ...base, ...extra } });
      expect(c.status, c.text).toBe(201);
      const sent = await t.rest('POST', `/v1/campaigns/${c.body.data.id}/send`, { key: org.liveKey });
      expect(sent.status).toBe(422);
      expect(sent.body.error).toMatchObject({ code: 'SENDER_NOT_CONFIGURED', details: { field: 'from', reason: '10dlc_unregistered' } });
      expect((await t.rest('GET', `/v1/campaigns/${c.body.data.id}`, { key: org.liveKey })).body.data.status).toBe('draft');
    }
  });
});
