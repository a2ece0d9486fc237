/**
 * API sends share their sender's 10DLC pace (platform/pacing.ts): SMS sent through the API from a
 * number with an approved registration (sandbox registry: 15 msg/s for this brand) leave one slot
 * at a time — a burst is spread over at least (n − 1) / rate seconds, delivered by paced jobs —
 * while an unregistered number's sends are not paced. (Campaigns on the same number reserve from
 * the same schedule: one pacing key per sender, platform/pacing.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';
import { MessageCharges } from '../src/modules/messaging/messaging.billing.ts';
import { deliveryJobIds } from '../src/modules/messaging/messaging.pacing.ts';

let t: TestApp;
let org: TestOrg;
let registered: string;
let unregistered: string;
const RATE = 15;

const call = (method: string, path: string, body?: unknown) => t.rest(method, path, { key: org.testKey, ...(body !== undefined ? { body } : {}) });

async function buyNumber(): Promise<{ id: string; number: string }> {
  const found = (await call('GET', '/v1/numbers/available?country=US&capabilities=sms')).body.data;
  const bought = await call('POST', '/v1/numbers', { number: found[Math.floor(Math.random() * found.length)].number });
  expect(bought.status, bought.text).toBe(201);
  return { id: bought.body.data.id, number: bought.body.data.number };
}

beforeAll(async () => {
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', SANDBOX_BRAND_VETTING_MS: '200', SANDBOX_CAMPAIGN_REVIEW_MS: '300', CAMPAIGN_SANDBOX_THROUGHPUT: '0' },
  });
  org = await t.createOrg('enterprise', 'Paced API sends');
  const n1 = await buyNumber();
  const n2 = await buyNumber();
  registered = n1.number;
  unregistered = n2.number;
  const brand = await call('POST', '/v1/compliance/brands', {
    company_name: 'Acme Corp', ein: '12-3456789', country: 'us', entity_type: 'private_profit', vertical: 'retail',
    website: 'https://acme.test', contact_email: 'ops@acme.test', contact_phone: '+14155550100',
  });
  expect(brand.status, brand.text).toBe(201);
  await eventually('the brand vetted', async () => ((await call('GET', `/v1/compliance/brands/${brand.body.data.id}`)).body.data.status === 'vetted' ? true : undefined));
  const tenDlc = await call('POST', '/v1/compliance/campaigns', {
    brand_id: brand.body.data.id, use_case: 'marketing', number_ids: [n1.id],
    description: 'Weekly offers for customers who joined the Acme loyalty club on our website.',
    sample_messages: ['Acme: 20% off this weekend only! Reply STOP to unsubscribe.'],
    message_flow: 'Customers opt in by ticking a consent box when they join the loyalty club on acme.test.', opt_in_type: 'web_form',
  });
  expect(tenDlc.status, tenDlc.text).toBe(201);
  const approved = await eventually('the 10DLC campaign approved', async () => {
    const c = (await call('GET', `/v1/compliance/campaigns/${tenDlc.body.data.id}`)).body.data;
    return c.status === 'approved' ? c : undefined;
  });
  expect(approved.throughput_mps).toBe(RATE);
}, 60_000);
afterAll(async () => { await t?.close(); });

async function burst(from: string, n: number, prefix: string): Promise<string[]> {
  const sent = await Promise.all(Array.from({ length: n }, (_, i) => call('POST', '/v1/messages/sms', { from, to: `+1415${prefix}${String(i).padStart(4, '0')}`, body: `Offer ${i}. Reply STOP to opt out` })));
  for (const s of sent) expect(s.status, s.text).toBe(201);
  return sent.map((s) => s.body.data.id);
}

const sentTimes = async (ids: string[]) => {
  const { rows } = await t.db.query(`select sent_at from messages where id = any($1) and sent_at is not null order by sent_at`, [ids]);
  return rows.map((r) => new Date(r.sent_at).getTime());
};
/** Messages whose delivery row was moved to a later slot (`paced`), counted as they are claimed in their slot (the paced rows go once sent). */
const pacedSeen = new Set<string>();
const watchPaced = async (ids: string[]) => {
  const { rows } = await t.db.query(`select message_id from messaging_deliveries where paced and message_id = any($1)`, [ids]);
  for (const r of rows) pacedSeen.add(r.message_id as string);
};
const pacedOf = (ids: string[]) => ids.filter((id) => pacedSeen.has(id)).length;

describe('API sends on a registered number', () => {
  it('leave at the number’s 10DLC throughput; an unregistered number’s are not paced', async () => {
    const n = 30;
    const paced = await burst(registered, n, '555');
    const free = await burst(unregistered, n, '556');
    // Billing's stale-reservation sweep asks messaging about a queued message: one waiting for its
    // pacing slot (its delivery row moved to the slot, not claimed yet) is still under way.
    const waiting = await eventually('a message waiting for its slot', async () => {
      const { rows } = await t.db.query(
        `select m.id from messages m join messaging_deliveries d on d.message_id = m.id
          where m.id = any($1) and m.status = 'queued' and d.paced and d.attempts = 0 and d.due_at > now() + interval '300 milliseconds' limit 1`,
        [paced]);
      return rows[0]?.id as string | undefined;
    }, 10_000);
    const charges = new MessageCharges({ pool: t.db, clock: systemClock, jobs: t.app.jobs, delivery: t.app.services.messageDelivery, queue: t.app.services.deliveries, deliverJob: { name: 'messaging.deliver', idsOf: deliveryJobIds } });
    expect(await charges.outcomes([{ organizationId: org.orgId, mode: 'test', key: waiting }])).toEqual([null]);
    const times = await eventually('all paced sends sent', async () => {
      await watchPaced([...paced, ...free]);
      const s = await sentTimes(paced);
      return s.length === n ? s : undefined;
    }, 30_000);
    // A strict pace: the slots span (n − 1) / rate seconds. `sent_at` is taken after the provider's
    // answer, so one send's own latency (the first one's cold path, a loaded machine: 100 ms seen)
    // can shorten the measured span by up to two slots; unpaced, the 30 sends leave in well under 1 s.
    expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(((n - 3) / RATE) * 1000);
    expect(pacedOf(paced)).toBeGreaterThan(n / 2);
    await eventually('all unpaced sends sent', async () => ((await sentTimes(free)).length === n ? true : undefined), 30_000);
    expect(pacedOf(free)).toBe(0);
    // Every delivery row went once its message was sent, and no delivery job was made.
    expect((await t.db.query('select count(*)::int as c from messaging_deliveries where message_id = any($1)', [[...paced, ...free]])).rows[0].c).toBe(0);
    expect((await t.db.query(`select count(*)::int as c from pgboss.job where name = 'messaging.deliver' and data->'data'->>'messageId' = any($1)`, [[...paced, ...free]])).rows[0].c).toBe(0);
  });
});
