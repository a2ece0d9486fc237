/**
 * Campaigns paid from billing's credit ledger, over HTTP against the real database with workers:
 * live-mode email campaigns (a local SMTP server receives them; live payments through the payments
 * sandbox) are charged exactly once per message (ledger key: the message id), pause with
 * `insufficient_credits` when the balance runs short — a batch the balance covers only in part
 * rolls back and sends the covered part — and finish after a top-up and a resume; the stats show
 * the cost. A starter plan pauses at its included messages (`quota_exceeded`), and the per-send
 * quota check answers 429 QUOTA_EXCEEDED. Test mode is never charged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemScope } from '../src/platform/auth/scope.ts';
import { isServiceError } from '../src/platform/errors.ts';
import type { Plan } from '../src/platform/tenancy/tenancy.entities.ts';
import type { TestApp } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';
import { liveOrgWithBalance, startPayingApp } from './helpers/billing.ts';

const received: string[] = [];
let t: TestApp;

beforeAll(async () => {
  t = await startPayingApp({
    smtp: {
      onData(stream, session, callback) {
        stream.resume();
        stream.on('end', () => {
          received.push(...session.envelope.rcptTo.map((r) => r.address));
          callback();
        });
      },
    },
    env: {
      CAMPAIGN_BATCH_SIZE: '3', CAMPAIGN_SANDBOX_THROUGHPUT: '0', SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '20', SANDBOX_READ_AFTER_MS: '40',
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    },
  });
});
afterAll(async () => { await t?.close(); });

const liveOrg = (plan: Plan, balance: number) => liveOrgWithBalance(t, plan, balance, `news-${plan}@acme.test`);

let seq = 0;
async function emailCampaign(key: string, n: number, from?: string): Promise<{ id: string; emails: string[] }> {
  const list = await t.rest('POST', '/v1/contacts/lists', { key, body: { name: `list ${seq}` } });
  const emails: string[] = [];
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const email = `reader${seq++}@example.com`;
    emails.push(email);
    const c = await t.rest('POST', '/v1/contacts', { key, body: { email, first_name: `R${i}` } });
    expect(c.status, c.text).toBe(201);
    ids.push(c.body.data.id);
  }
  expect((await t.rest('POST', `/v1/contacts/lists/${list.body.data.id}/members`, { key, body: { contact_ids: ids } })).status).toBe(200);
  const c = await t.rest('POST', '/v1/campaigns', {
    key, body: { name: 'Letter', channel: 'email', subject: 'News', body: 'Hi {{contact.first_name}}. Unsubscribe: reply STOP', list_id: list.body.data.id, ...(from ? { from } : {}) },
  });
  expect(c.status, c.text).toBe(201);
  return { id: c.body.data.id, emails };
}

async function campaignWhen(key: string, id: string, ok: (c: any) => boolean) {
  return eventually(`campaign ${id}`, async () => {
    const c = (await t.rest('GET', `/v1/campaigns/${id}`, { key })).body.data;
    return ok(c) ? c : undefined;
  }, 20_000);
}

/** The campaign's ledger: its messages' reservations (keyed by message id) and how many messages exist per recipient. */
async function charged(campaignId: string) {
  const { rows: msgs } = await t.db.query(`select id, recipients->>0 as "to" from messages where metadata->>'campaign_id' = $1`, [campaignId]);
  const { rows } = await t.db.query(`select count(*)::int as n, coalesce(sum(-amount), 0)::int as amount from credit_ledger_entries where kind = 'reservation' and idempotency_key = any($1)`, [msgs.map((m) => m.id)]);
  return { messages: msgs.length, recipients: new Set(msgs.map((m) => m.to)).size, reservations: rows[0].n as number, amount: rows[0].amount as number };
}

describe('live campaigns pay from credits', () => {
  it('charges exactly per message, pauses when the balance is short, and finishes after a top-up and a resume; stats show the cost', async () => {
    // Growth: an email costs 1 cent; the balance covers 5 of 8 (batches of 3: the second is covered in part).
    const o = await liveOrg('growth', 5);
    const { id, emails } = await emailCampaign(o.liveKey, 8, o.sender);
    expect((await t.rest('POST', `/v1/campaigns/${id}/send`, { key: o.liveKey })).status).toBe(200);

    const paused = await campaignWhen(o.liveKey, id, (c) => c.status === 'paused');
    expect(paused.pause_reason).toBe('insufficient_credits');
    expect(paused.stats).toMatchObject({ recipients: 8, sent: 5, pending: 3, cost: 5, waiting_by_reason: { paused: 3 } });
    expect(paused.stats.currency).toBe('usd');
    expect(await charged(id)).toEqual({ messages: 5, recipients: 5, reservations: 5, amount: 5 });
    expect((await t.rest('GET', '/v1/billing/credits', { key: o.liveKey })).body.data.balance).toBe(0);
    const { rows: events } = await t.db.query(`select data->>'pause_reason' as reason from events where resource_id = $1 and type = 'campaign.paused'`, [id]);
    expect(events).toEqual([{ reason: 'insufficient_credits' }]);

    // Still short: a resume pauses again without sending anything.
    expect((await t.rest('POST', `/v1/campaigns/${id}/resume`, { key: o.liveKey })).status).toBe(200);
    const again = await campaignWhen(o.liveKey, id, (c) => c.status === 'paused');
    expect(again.stats).toMatchObject({ sent: 5, pending: 3, cost: 5 });

    expect((await t.rest('POST', '/v1/billing/credits/topup', { key: o.liveKey, body: { amount: 100 } })).body.data.balance).toBe(100);
    expect((await t.rest('POST', `/v1/campaigns/${id}/resume`, { key: o.liveKey })).status).toBe(200);
    // The resumed batches run twice more at once (retried jobs): each message is sent and charged once.
    const scope = systemScope(o.orgId, 'live', 'growth', 'req_retry');
    await Promise.all([1, 4, 7].flatMap((from) => [0, 1].map(() => t.app.services.engine.runBatch(scope, { campaignId: id, from, to: from + 2, generation: 3 }))));
    const done = await campaignWhen(o.liveKey, id, (c) => c.status === 'completed');
    expect(done.pause_reason).toBeNull();
    expect(done.stats).toMatchObject({ recipients: 8, sent: 8, pending: 0, cost: 8 });
    expect(await charged(id)).toEqual({ messages: 8, recipients: 8, reservations: 8, amount: 8 });
    expect((await t.rest('GET', '/v1/billing/credits', { key: o.liveKey })).body.data.balance).toBe(97);
    await eventually('the emails', async () => (emails.every((e) => received.includes(e)) ? true : undefined));
    expect(received.filter((r) => emails.includes(r))).toHaveLength(8);

    const stats = await t.rest('GET', '/v1/campaigns/stats', { key: o.liveKey });
    expect(stats.body.data).toMatchObject({ campaigns: 1, sent: 8, cost: 8, currency: 'usd' });
    const g = await t.gql(`query($id: ID!) { campaign(id: $id) { stats { cost currency } } campaignStats { cost currency } }`, { id }, { key: o.liveKey });
    expect(g.body.errors).toBeUndefined();
    expect(g.body.data).toEqual({ campaign: { stats: { cost: 8, currency: 'usd' } }, campaignStats: { cost: 8, currency: 'usd' } });
  });

  it('a starter plan pauses at its included messages (quota_exceeded); the per-send check answers 429 QUOTA_EXCEEDED', async () => {
    const o = await liveOrg('starter', 100);
    // 4,998 of the 5,000 included messages used this period.
    await t.db.query(`insert into usage_entries (id, organization_id, mode, context, kind, quantity, resource_id, idempotency_key, created_at)
      select 'use_fixture_' || $1 || '_' || g, $1, 'live', 'messaging', 'email.recipient', 1, null, 'fixture:' || $1 || ':' || g, now() from generate_series(1, 4998) g`, [o.orgId]);
    const { id } = await emailCampaign(o.liveKey, 4, o.sender);
    expect((await t.rest('POST', `/v1/campaigns/${id}/send`, { key: o.liveKey })).status).toBe(200);
    const paused = await campaignWhen(o.liveKey, id, (c) => c.status === 'paused');
    expect(paused.pause_reason).toBe('quota_exceeded');
    expect(paused.stats).toMatchObject({ sent: 2, pending: 2, cost: 2 });
    expect((await t.rest('GET', '/v1/billing/usage', { key: o.liveKey })).body.data.messages).toMatchObject({ total: 5000, included: 5000 });

    const scope = systemScope(o.orgId, 'live', 'starter', 'req_quota');
    const refused = await t.app.services.quotas.check(scope, 'messages', 1).catch((e: unknown) => e);
    expect(isServiceError(refused) && refused.code === 'QUOTA_EXCEEDED' && refused.status === 429).toBe(true);
    expect((refused as { details: unknown }).details).toMatchObject({ quota: 'messages_included', limit: 5000, used: 5000, requested: 1 });
    // Not blocked: voice minutes left, test mode, plans that bill overage from credits.
    await t.app.services.quotas.check(scope, 'voice_minutes', 500);
    await t.app.services.quotas.check({ ...scope, mode: 'test' }, 'messages', 1);
    await t.app.services.quotas.check({ ...scope, plan: 'growth' }, 'messages', 1_000_000);
    expect(() => t.app.services.quotas.checkAgents(scope, 1)).toThrow(/allows 1 agent/);
    t.app.services.quotas.checkAgents(scope, 0);
    t.app.services.quotas.checkAgents({ ...scope, mode: 'test' }, 5);
  });

  it('test mode is never charged', async () => {
    const o = await t.createOrg('growth', 'Test mode');
    const { id } = await emailCampaign(o.testKey, 4);
    expect((await t.rest('POST', `/v1/campaigns/${id}/send`, { key: o.testKey })).status).toBe(200);
    const done = await campaignWhen(o.testKey, id, (c) => c.status === 'completed');
    expect(done.stats).toMatchObject({ sent: 4, cost: 0 });
    const { rows } = await t.db.query('select count(*)::int as n from credit_ledger_entries where organization_id = $1', [o.orgId]);
    expect(rows[0].n).toBe(0);
  });
});
