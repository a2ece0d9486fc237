/**
 * Live calls paid by the minute from the credit balance (issue 17; voice.billing.ts): placing a
 * call reserves its max_duration's minutes (fewer when that is all the balance covers: max_duration
 * is cut to them), the end of the call keeps the minutes it was billed and gives the rest back, a
 * call never answered costs nothing, no minute covered → 402 with nothing stored, and a reservation
 * whose call was never stored is released by the stale-reservation sweep (`callCharges`). Calls go
 * over real SIP to the scripted UA of the SIP tests.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { liveOrgWithBalance } from './helpers/billing.ts';
import { buyVoiceNumber, callReaches, expectError, VOICE_ENV } from './helpers/voice.ts';
import { startScriptedUa } from './helpers/sip.ts';

/** business: `voice.minute` costs 2. */
const PLAN = 'business';
const PER_MINUTE = 2;
const STALE_SECONDS = 60;
const clock = new ManualClock(Date.now());
let t: TestApp;
let ua: Awaited<ReturnType<typeof startScriptedUa>>;

beforeAll(async () => {
  ua = await startScriptedUa({ username: 'x', password: 'y' });
  t = await startTestApp({
    clock, workers: true,
    env: {
      ...VOICE_ENV, SIP_BIND_HOST: '127.0.0.1', BILLING_LIVE_SANDBOX: 'true', SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES: '1', SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS: '0',
      BILLING_STALE_RESERVATION_SECONDS: String(STALE_SECONDS),
    },
  });
}, 60_000);
afterAll(async () => {
  await t?.close();
  ua?.close();
});

/** A live organization with `balance` credits, a voice number and a trunk to the scripted UA. */
async function payingOrg(balance: number, pool: 'spent' | 'fresh' = 'spent'): Promise<TestOrg & { from: string }> {
  const o = await liveOrgWithBalance(t, PLAN, balance, undefined, pool);
  const from = await buyVoiceNumber(t, o.testKey);
  await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [o.orgId, from]);
  const trunk = await t.rest('POST', '/v1/voice/sip-trunks', { key: o.liveKey, body: { name: 'ua', termination_uri: `sip:127.0.0.1:${ua.port}`, encryption: 'none' } });
  expect(trunk.status, trunk.text).toBe(201);
  return { ...o, from };
}
const balanceOf = async (o: TestOrg) => (await t.rest('GET', '/v1/billing/credits', { key: o.liveKey })).body.data.balance as number;
/** The call's reservation and its settlement entries. */
async function ledgerOf(callId: string) {
  const { rows } = await t.db.query(`select r.amount::int as reserved, coalesce(array_agg(s.kind || ':' || s.amount::int) filter (where s.id is not null), '{}') as settled
      from credit_ledger_entries r left join credit_ledger_entries s on s.reference_id = r.id
     where r.idempotency_key = $1 and r.kind = 'reservation' group by r.id`, [`call:${callId}`]);
  return rows;
}

describe('live calls paid by the minute', () => {
  it('reserves max_duration\'s minutes, keeps the 2 started minutes of a 90-second call and gives the rest back', async () => {
    const o = await payingOrg(100);
    const placed = await t.rest('POST', '/v1/voice/calls', { key: o.liveKey, body: { from: o.from, to: '+14155550100', max_duration: 600 } });
    expect(placed.status, placed.text).toBe(201);
    const id = placed.body.data.id;
    expect(await balanceOf(o)).toBe(100 - 10 * PER_MINUTE);
    await callReaches(t, o.liveKey, id, 'in_progress', 15_000);
    clock.advance(90_000);
    const hung = await t.rest('POST', `/v1/voice/calls/${id}/hangup`, { key: o.liveKey });
    expect(hung.status, hung.text).toBe(200);
    expect(hung.body.data.duration_seconds).toBe(90);
    expect(await balanceOf(o)).toBe(100 - 2 * PER_MINUTE);
    expect(await ledgerOf(id)).toEqual([{ reserved: -10 * PER_MINUTE, settled: [`capture:${8 * PER_MINUTE}`] }]);
    // The call carries what it was charged (cents), over REST and GraphQL, in the call and the list.
    expect((await t.rest('GET', `/v1/voice/calls/${id}`, { key: o.liveKey })).body.data).toMatchObject({ price: 2 * PER_MINUTE, price_unit: 'usd' });
    expect((await t.rest('GET', '/v1/voice/calls', { key: o.liveKey })).body.data.find((c: any) => c.id === id)).toMatchObject({ price: 2 * PER_MINUTE, price_unit: 'usd' });
    const gql = await t.gql('query($id: ID!) { call(id: $id) { price priceUnit } }', { id }, { key: o.liveKey });
    expect(gql.body.data?.call, JSON.stringify(gql.body.errors)).toEqual({ price: 2 * PER_MINUTE, priceUnit: 'usd' });
  }, 30_000);

  it('a call never answered (busy) costs nothing: the whole reservation is released', async () => {
    const o = await payingOrg(100);
    const placed = await t.rest('POST', '/v1/voice/calls', { key: o.liveKey, body: { from: o.from, to: '+14155550486', max_duration: 300 } });
    expect(placed.status, placed.text).toBe(201);
    await callReaches(t, o.liveKey, placed.body.data.id, 'busy', 15_000);
    expect(await balanceOf(o)).toBe(100);
    expect(await ledgerOf(placed.body.data.id)).toEqual([{ reserved: -5 * PER_MINUTE, settled: [`capture:${5 * PER_MINUTE}`] }]);
    expect((await t.rest('GET', `/v1/voice/calls/${placed.body.data.id}`, { key: o.liveKey })).body.data).toMatchObject({ price: 0, price_unit: 'usd' });
  }, 30_000);

  it('a balance covering fewer minutes places the call with max_duration cut to them (a credit_limit step)', async () => {
    const o = await payingOrg(5);
    const placed = await t.rest('POST', '/v1/voice/calls', { key: o.liveKey, body: { from: o.from, to: '+14155550100' } });
    expect(placed.status, placed.text).toBe(201);
    expect(placed.body.data.max_duration).toBe(120);
    expect(await balanceOf(o)).toBe(1);
    const row = (await t.db.query(`select steps from calls where id = $1`, [placed.body.data.id])).rows[0];
    expect(row.steps.find((s: any) => s.type === 'credit_limit').detail).toEqual({ max_duration_requested: 3600, max_duration: 120, minutes: 2, included_minutes: 0 });
    await t.rest('POST', `/v1/voice/calls/${placed.body.data.id}/hangup`, { key: o.liveKey });
  }, 30_000);

  it('not one minute covered: 402 INSUFFICIENT_CREDITS over REST and GraphQL, nothing stored', async () => {
    const o = await payingOrg(1);
    expectError(await t.rest('POST', '/v1/voice/calls', { key: o.liveKey, body: { from: o.from, to: '+14155550100' } }), 402, 'INSUFFICIENT_CREDITS');
    const gql = await t.gql('mutation($from: String!) { createCall(input: { to: "+14155550100", from: $from }) { id } }', { from: o.from }, { key: o.liveKey });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('INSUFFICIENT_CREDITS');
    expect((await t.db.query(`select count(*)::int as n from calls where organization_id = $1`, [o.orgId])).rows[0].n).toBe(0);
    expect(await balanceOf(o)).toBe(1);
  }, 30_000);

  it('a reservation whose call was never stored is released by the stale-reservation sweep; a call under way keeps its own', async () => {
    const o = await payingOrg(100);
    const live = await t.rest('POST', '/v1/voice/calls', { key: o.liveKey, body: { from: o.from, to: '+14155550100', max_duration: 120 } });
    expect(live.status, live.text).toBe(201);
    await callReaches(t, o.liveKey, live.body.data.id, 'in_progress', 15_000);
    // What a process that died between reserving and storing its call left behind.
    await t.app.services.credits.reserve(systemScope(o.orgId, 'live', PLAN, 'req_test'), { amount: 6, key: 'call:call_01jd0000000000000000000000', referenceId: 'call_01jd0000000000000000000000' });
    expect(await balanceOf(o)).toBe(100 - 4 - 6);
    clock.advance((STALE_SECONDS + 5) * 1000);
    await t.app.services.reservationSweep.run();
    expect(await balanceOf(o)).toBe(100 - 4);
    expect(await ledgerOf(live.body.data.id)).toEqual([{ reserved: -4, settled: [] }]);
    await t.rest('POST', `/v1/voice/calls/${live.body.data.id}/hangup`, { key: o.liveKey });
  }, 30_000);
});

describe('included voice minutes', () => {
  const poolUsed = async (orgId: string) => (await t.db.query(`select coalesce(sum(used), 0)::int as n from billing_pool_usage where organization_id = $1 and mode = 'live' and quota = 'voice_minutes'`, [orgId])).rows[0].n as number;

  it('a call inside the plan\'s included minutes needs no credit: it takes its max_duration\'s minutes and gives back what it did not use', async () => {
    const o = await payingOrg(0, 'fresh');
    const placed = await t.rest('POST', '/v1/voice/calls', { key: o.liveKey, body: { from: o.from, to: '+14155550100', max_duration: 600 } });
    expect(placed.status, placed.text).toBe(201);
    expect(await poolUsed(o.orgId)).toBe(10);
    await callReaches(t, o.liveKey, placed.body.data.id, 'in_progress', 15_000);
    clock.advance(90_000);
    expect((await t.rest('POST', `/v1/voice/calls/${placed.body.data.id}/hangup`, { key: o.liveKey })).status).toBe(200);
    expect(await poolUsed(o.orgId)).toBe(2);
    expect(await balanceOf(o)).toBe(0);
    expect(await ledgerOf(placed.body.data.id)).toEqual([]);
  }, 30_000);

  it('with 2 included minutes left and credit for 3: the call may last 5 minutes; a 4-minute call uses both included minutes and pays 2', async () => {
    const o = await payingOrg(3 * PER_MINUTE, 'spent');
    await t.db.query(`update billing_pool_usage set used = used - 2 where organization_id = $1 and mode = 'live' and quota = 'voice_minutes'`, [o.orgId]);
    const placed = await t.rest('POST', '/v1/voice/calls', { key: o.liveKey, body: { from: o.from, to: '+14155550100' } });
    expect(placed.status, placed.text).toBe(201);
    expect(placed.body.data.max_duration).toBe(300);
    await callReaches(t, o.liveKey, placed.body.data.id, 'in_progress', 15_000);
    clock.advance(210_000);
    expect((await t.rest('POST', `/v1/voice/calls/${placed.body.data.id}/hangup`, { key: o.liveKey })).status).toBe(200);
    expect(await balanceOf(o)).toBe(PER_MINUTE);
    expect(await ledgerOf(placed.body.data.id)).toEqual([{ reserved: -3 * PER_MINUTE, settled: [`capture:${PER_MINUTE}`] }]);
  }, 30_000);
});
