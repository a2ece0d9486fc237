/**
 * RCS and Viber campaigns end to end over HTTP with pg-boss workers and the sandbox providers:
 * each recipient gets one message on the campaign's channel, personalized; an RCS recipient without
 * RCS gets the message as an SMS (messaging's fallback, `fallback.channel: "sms"` on the message);
 * a recipient opted out of the channel is skipped.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

let t: TestApp;
let org: TestOrg;

beforeAll(async () => {
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', SANDBOX_READ_AFTER_MS: '100', CAMPAIGN_SANDBOX_THROUGHPUT: '0', CAMPAIGN_BATCH_SIZE: '10' },
  });
  org = await t.createOrg('enterprise', 'Channels org');
});
afterAll(async () => { await t?.close(); });

const call = (method: string, path: string, body?: unknown) => t.rest(method, path, { key: org.testKey, ...(body !== undefined ? { body } : {}) });

async function listOf(contacts: Record<string, unknown>[]): Promise<string> {
  const list = await call('POST', '/v1/contacts/lists', { name: `list ${Date.now()}` });
  expect(list.status).toBe(201);
  const ids: string[] = [];
  for (const c of contacts) {
    const r = await call('POST', '/v1/contacts', c);
    expect(r.status, r.text).toBe(201);
    ids.push(r.body.data.id);
  }
  expect((await call('POST', `/v1/contacts/lists/${list.body.data.id}/members`, { contact_ids: ids })).status).toBe(200);
  return list.body.data.id;
}

async function sendCampaign(channel: 'rcs' | 'viber', listId: string) {
  const c = await call('POST', '/v1/campaigns', { name: `${channel} launch`, channel, list_id: listId, body: 'Hi {{contact.first_name}}, new arrivals are in' });
  expect(c.status, c.text).toBe(201);
  const sent = await call('POST', `/v1/campaigns/${c.body.data.id}/send`);
  expect(sent.status, sent.text).toBe(200);
  const done = await eventually('the campaign completed', async () => {
    const g = (await call('GET', `/v1/campaigns/${c.body.data.id}`)).body.data;
    return g.status === 'completed' ? g : undefined;
  }, 30_000);
  const { rows } = await t.db.query(`select "to", channel, body, fallback, status from messages where metadata->>'campaign_id' = $1 order by "to"`, [c.body.data.id]);
  return { campaign: done, messages: rows };
}

describe('campaign channels', () => {
  it('RCS: one message per recipient, personalized; a recipient without RCS gets it as an SMS; an opted-out one is skipped', async () => {
    const listId = await listOf([
      { phone: '+14155557001', first_name: 'Ada' },
      { phone: '+15005550003', first_name: 'Noel' },
      { phone: '+14155557002', first_name: 'Out', consent: { rcs: 'opted_out' } },
    ]);
    const { campaign, messages } = await sendCampaign('rcs', listId);
    expect(campaign.stats).toMatchObject({ recipients: 3, sent: 2, skipped: 1, opted_out: 1 });
    expect(messages.map((m) => [m.to, m.channel, m.body])).toEqual([
      ['+14155557001', 'rcs', 'Hi Ada, new arrivals are in'],
      ['+15005550003', 'rcs', 'Hi Noel, new arrivals are in'],
    ]);
    const fellBack = await eventually('the SMS fallback', async () => {
      const { rows } = await t.db.query(`select fallback from messages where "to" = '+15005550003' and metadata->>'campaign_id' = $1`, [campaign.id]);
      return rows[0]?.fallback ? rows[0].fallback : undefined;
    });
    expect(fellBack).toMatchObject({ channel: 'sms' });
    await eventually('both delivered', async () => ((await call('GET', `/v1/campaigns/${campaign.id}`)).body.data.stats.delivered === 2 ? true : undefined), 20_000);
  });

  it('Viber: one message per recipient on Viber, personalized, delivered', async () => {
    const listId = await listOf([{ phone: '+14155557101', first_name: 'Bo' }, { phone: '+14155557102', first_name: 'Cy' }]);
    const { campaign, messages } = await sendCampaign('viber', listId);
    expect(campaign.stats).toMatchObject({ recipients: 2, sent: 2, skipped: 0 });
    expect(messages.map((m) => [m.channel, m.body])).toEqual([['viber', 'Hi Bo, new arrivals are in'], ['viber', 'Hi Cy, new arrivals are in']]);
    await eventually('both delivered', async () => ((await call('GET', `/v1/campaigns/${campaign.id}`)).body.data.stats.delivered === 2 ? true : undefined), 20_000);
  });
});
