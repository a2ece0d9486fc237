/**
 * Paced campaigns (sandbox registration at 20 msg/s): the measured rate, two campaigns from the
 * same sender sharing one GCRA schedule, and pause holding the rest until resume continues it
 * (nobody sent twice or skipped).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventuallyHolds } from './helpers/assertions.ts';

const RATE = 20;
let t: TestApp;
let org: TestOrg;

beforeAll(async () => {
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', CAMPAIGN_SANDBOX_THROUGHPUT: String(RATE), LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent' },
  });
  org = await t.createOrg('enterprise', 'Pacing org');
});
afterAll(async () => { await t?.close(); });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const call = (method: string, path: string, body?: unknown) => t.rest(method, path, { key: org.testKey, body });
const get = async (id: string) => (await call('GET', `/v1/campaigns/${id}`)).body.data;
const until = <T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> => eventuallyHolds('the campaign', read, ok, timeoutMs);

let seq = 0;
async function campaign(n: number): Promise<string> {
  const list = (await call('POST', '/v1/contacts/lists', { name: `l${seq}` })).body.data.id;
  const ids: string[] = [];
  for (let i = 0; i < n; i += 10) {
    const batch = await Promise.all(Array.from({ length: Math.min(10, n - i) }, () => call('POST', '/v1/contacts', { phone: `+1415666${String(1000 + seq++)}` })));
    ids.push(...batch.map((r) => r.body.data.id));
  }
  await call('POST', `/v1/contacts/lists/${list}/members`, { contact_ids: ids });
  const c = await call('POST', '/v1/campaigns', { name: 'Paced', channel: 'sms', list_id: list, body: 'Hi. Reply STOP to opt out' });
  return c.body.data.id;
}

/** When each message of the campaign was accepted (ms, ascending). */
async function acceptedAt(id: string): Promise<number[]> {
  const { rows } = await t.db.query(`select created_at from messages where metadata->>'campaign_id' = $1 order by created_at`, [id]);
  return rows.map((r) => new Date(r.created_at).getTime());
}

describe('pacing by throughput', () => {
  it('sends at the sender throughput, shared by two campaigns on the same number', async () => {
    const a = await campaign(30);
    const b = await campaign(30);
    await call('POST', `/v1/campaigns/${a}/send`);
    await call('POST', `/v1/campaigns/${b}/send`);
    await until(() => get(a), (c) => c.status === 'completed');
    await until(() => get(b), (c) => c.status === 'completed');
    const all = [...await acceptedAt(a), ...await acceptedAt(b)].sort((x, y) => x - y);
    expect(all).toHaveLength(60);
    const seconds = (all[59]! - all[0]!) / 1000;
    // 60 messages at 20/s: the last one leaves ~2.75 s after the first (batches of 5 every 250 ms).
    // Never faster than the throughput (batches never start before their slot); slower only when
    // the machine is too loaded to keep up (the suite shares 2 cores).
    const rate = 55 / seconds;
    expect(rate).toBeLessThan(RATE * 1.1);
    expect(rate).toBeGreaterThan(RATE * 0.2);
  });

  it('pause holds the remaining recipients; resume continues where it stopped', async () => {
    const id = await campaign(60);
    await call('POST', `/v1/campaigns/${id}/send`);
    await until(() => get(id), (c) => c.stats.sent >= 10);
    const paused = await call('POST', `/v1/campaigns/${id}/pause`);
    expect(paused.body.data).toMatchObject({ status: 'paused', pause_reason: null });
    await sleep(700);
    const held = await get(id);
    await sleep(1500);
    const still = await get(id);
    expect(still.status).toBe('paused');
    expect(still.stats.sent).toBe(held.stats.sent);
    expect(still.stats.sent).toBeLessThan(60);
    expect(still.stats.waiting_by_reason.paused).toBe(60 - still.stats.sent);
    const resumed = await call('POST', `/v1/campaigns/${id}/resume`);
    expect(resumed.body.data.status).toBe('sending');
    const done = await until(() => get(id), (c) => c.status === 'completed');
    expect(done.stats).toMatchObject({ recipients: 60, sent: 60, pending: 0, skipped: 0 });
    const { rows } = await t.db.query(`select "to", count(*)::int as n from messages where metadata->>'campaign_id' = $1 group by 1`, [id]);
    expect(rows).toHaveLength(60);
    expect(rows.every((r) => r.n === 1)).toBe(true);
    const events = await t.db.query(`select type from events where resource_id = $1 order by id`, [id]);
    expect(events.rows.map((r) => r.type)).toEqual(['campaign.started', 'campaign.paused', 'campaign.resumed', 'campaign.completed']);
  });
});
