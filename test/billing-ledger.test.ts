/**
 * The credit ledger, usage and invoices end to end against the real database: top-ups through the
 * payments sandbox (PAYMENT_REQUIRED without a payment method or on a decline), 64 concurrent
 * reservations on a balance that covers exactly N, settlement once, the append-only ledger,
 * auto-reload charging exactly once (and disabling itself on a decline), usage aggregated from
 * usage entries (a retried one counted once), and the period job writing one invoice with an
 * immutable PDF however many times it runs at once.
 */
import { extractText, getDocumentProxy } from 'unpdf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { systemScope, type Scope } from '../src/platform/auth/scope.ts';
import { isServiceError } from '../src/platform/errors.ts';
import { recordUsage } from '../src/platform/usage/usage.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually, expectError, expectGqlError } from './helpers/assertions.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 20, 12));
let t: TestApp;

const URLS = { successUrl: 'https://app.example.com/ok', cancelUrl: 'https://app.example.com/cancel' };
const PAGE = '/v1/providers/payments-sandbox-checkout/callbacks';

beforeAll(async () => {
  t = await startTestApp({ clock, workers: true, env: { SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES: '2', SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS: '10' } });
});
afterAll(async () => {
  await t?.close();
});

async function subscribe(key: string, priceId = 'price_growth_monthly', card = '4242424242424242') {
  const res = await t.rest('POST', '/v1/billing/checkout', { key, body: { priceId, ...URLS } });
  const sessionId = new URL(res.body.data.checkoutUrl).searchParams.get('session_id')!;
  expect((await t.rest('POST', PAGE, { body: { session_id: sessionId, action: 'complete', card_number: card } })).status).toBe(200);
  await eventually('the completion webhook', async () => {
    const { rows } = await t.db.query('select status from checkout_sessions where id = $1', [sessionId]);
    return rows[0].status === 'complete' ? true : undefined;
  });
}

async function ledger(orgId: string, mode = 'test') {
  const { rows } = await t.db.query(`select coalesce(sum(amount), 0)::int as sum, count(*) filter (where kind = 'reservation')::int as reservations,
    count(*) filter (where kind = 'topup')::int as topups from credit_ledger_entries where organization_id = $1 and mode = $2`, [orgId, mode]);
  const { rows: acct } = await t.db.query('select balance::int as balance from billing_accounts where organization_id = $1 and mode = $2', [orgId, mode]);
  return { ...rows[0], balance: acct[0]?.balance ?? 0 } as { sum: number; reservations: number; topups: number; balance: number };
}

const scopeOf = (o: TestOrg): Scope => systemScope(o.orgId, 'test', 'enterprise', 'req_test');

describe('credits and top-ups', () => {
  it('shows the credits shape; a top-up without a payment method is PAYMENT_REQUIRED', async () => {
    const o = await t.createOrg('enterprise', 'No card');
    const res = await t.rest('GET', '/v1/billing/credits', { key: o.testKey });
    expect(res.body.data).toEqual({ balance: 0, currency: 'usd', auto_reload: { enabled: false, threshold: 0, amount: 0 }, last_topped_up_at: null });
    expectError(await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } }), 402, 'PAYMENT_REQUIRED');
    expectError(await t.rest('PUT', '/v1/billing/credits/auto-reload', { key: o.testKey, body: { enabled: true, threshold: 100, amount: 1000 } }), 402, 'PAYMENT_REQUIRED');
    expectError(await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 10.5 } }), 422, 'VALIDATION_ERROR');
    expectError(await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: {} }), 422, 'MISSING_REQUIRED_FIELD');
  });

  it('charges the default payment method and appends a top-up entry (REST and GraphQL)', async () => {
    const o = await t.createOrg('enterprise', 'Top-up');
    await subscribe(o.testKey);
    const res = await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 5000 } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ balance: 5000, topped_up: 5000, currency: 'usd' });
    expect(res.body.data.payment_id).toMatch(/^pi_test_/);
    const g = await t.gql('mutation { topUpCredits(amount: 2500) { balance toppedUp currency paymentId } }', {}, { key: o.testKey });
    expect(g.body.data.topUpCredits).toMatchObject({ balance: 7500, toppedUp: 2500, currency: 'usd' });
    const credits = await t.gql('{ credits { balance currency lastToppedUpAt autoReload { enabled } } }', {}, { key: o.testKey });
    expect(credits.body.data.credits).toMatchObject({ balance: 7500, currency: 'usd', lastToppedUpAt: clock.now().toISOString(), autoReload: { enabled: false } });
    expect(await ledger(o.orgId)).toEqual({ sum: 7500, reservations: 0, topups: 2, balance: 7500 });
    const { rows } = await t.db.query(`select count(*)::int as n from events where organization_id = $1 and type = 'billing.credits_topped_up'`, [o.orgId]);
    expect(rows[0].n).toBe(2);
    expectGqlError(await t.gql('mutation { topUpCredits(amount: 2500) { balance } }', {}, { key: await t.createKey(o.orgId, 'admin') }), 'INSUFFICIENT_PERMISSIONS');
  });

  it('a card whose charges decline gives PAYMENT_REQUIRED and leaves the balance alone', async () => {
    const o = await t.createOrg('enterprise', 'Declines');
    await subscribe(o.testKey, 'price_growth_monthly', '4000000000000341');
    const res = await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } });
    expect(expectError(res, 402, 'PAYMENT_REQUIRED').error.details.decline_code).toBe('card_declined');
    expect(await ledger(o.orgId)).toEqual({ sum: 0, reservations: 0, topups: 0, balance: 0 });
  });
});

describe('reservations', () => {
  it('64 concurrent reservations on a balance covering exactly N: N accepted, the rest INSUFFICIENT_CREDITS, balance 0', async () => {
    const o = await t.createOrg('enterprise', 'Race');
    await subscribe(o.testKey);
    const price = 35;
    const n = 20;
    expect((await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: price * n } })).status).toBe(200);
    const credits = t.app.services.credits;
    const results = await Promise.allSettled(Array.from({ length: 64 }, (_, i) => credits.reserve(scopeOf(o), { amount: price, key: `msg_race_${i}`, referenceId: `msg_race_${i}` })));
    const accepted = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    expect(accepted).toHaveLength(n);
    expect(refused).toHaveLength(64 - n);
    expect(refused.every((e) => isServiceError(e) && e.code === 'INSUFFICIENT_CREDITS' && e.status === 402)).toBe(true);
    expect(await ledger(o.orgId)).toEqual({ sum: 0, reservations: n, topups: 1, balance: 0 });
    expect((await t.rest('GET', '/v1/billing/credits', { key: o.testKey })).body.data.balance).toBe(0);

    // Settle: 5 released (each twice, at once), 15 captured; a settled reservation is never settled again.
    const ids = accepted.map((r) => (r as PromiseFulfilledResult<{ reservationId: string }>).value.reservationId);
    const tenant = { organizationId: o.orgId, mode: 'test' as const };
    const released = await Promise.all([...ids.slice(0, 5), ...ids.slice(0, 5)].map((id) => credits.release(tenant, id)));
    expect(released.filter(Boolean)).toHaveLength(5);
    const captured = await Promise.all(ids.map((id) => credits.capture(tenant, id)));
    expect(captured.filter(Boolean)).toHaveLength(15);
    expect(await ledger(o.orgId)).toEqual({ sum: 5 * price, reservations: n, topups: 1, balance: 5 * price });
  });

  it('the same key reserves once; the ledger is append-only', async () => {
    const o = await t.createOrg('enterprise', 'Keys');
    await subscribe(o.testKey);
    await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } });
    const credits = t.app.services.credits;
    const a = await credits.reserve(scopeOf(o), { amount: 100, key: 'msg_same' });
    const b = await credits.reserve(scopeOf(o), { amount: 100, key: 'msg_same' });
    expect(b.reservationId).toBe(a.reservationId);
    expect(await ledger(o.orgId)).toMatchObject({ sum: 900, balance: 900, reservations: 1 });
    await expect(t.db.query(`update credit_ledger_entries set amount = 0 where organization_id = $1`, [o.orgId])).rejects.toThrow(/append-only/);
    await expect(t.db.query(`delete from credit_ledger_entries where organization_id = $1`, [o.orgId])).rejects.toThrow(/append-only/);
    await expect(t.db.query(`update billing_accounts set balance = -1 where organization_id = $1`, [o.orgId])).rejects.toThrow(/check/);
  });
});

describe('batched reservations (campaigns)', () => {
  it('reserves in order while the balance covers the batch; concurrent batches never overdraw', async () => {
    const o = await t.createOrg('enterprise', 'Batches');
    await subscribe(o.testKey);
    await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } });
    const credits = t.app.services.credits;
    const first = await credits.reserveMany(scopeOf(o), [{ amount: 300, key: 'b1' }, { amount: 300, key: 'b2' }, { amount: 500, key: 'b3' }, { amount: 100, key: 'b4' }]);
    expect(first.map((r) => r?.amount ?? null)).toEqual([300, 300, null, null]);
    expect(first[1]!.balance).toBe(400);
    // Already reserved keys come back as they were; the rest continue from the balance.
    const again = await credits.reserveMany(scopeOf(o), [{ amount: 300, key: 'b1' }, { amount: 400, key: 'b5' }]);
    expect(again.map((r) => r?.reservationId ?? null)).toEqual([first[0]!.reservationId, expect.stringMatching(/^cle_/)]);
    expect(await ledger(o.orgId)).toMatchObject({ sum: 0, balance: 0, reservations: 3 });
    await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } });
    const batches = await Promise.all(Array.from({ length: 8 }, (_, b) => credits.reserveMany(scopeOf(o), Array.from({ length: 5 }, (_, i) => ({ amount: 30, key: `c${b}_${i}` })))));
    const accepted = batches.flat().filter(Boolean).length;
    expect(accepted).toBe(33);
    expect(await ledger(o.orgId)).toMatchObject({ sum: 10, balance: 10, reservations: 36 });
  });
});

describe('auto-reload', () => {
  it('many debits crossing the threshold at once charge exactly one reload', async () => {
    const o = await t.createOrg('enterprise', 'Reload');
    await subscribe(o.testKey);
    await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } });
    const put = await t.rest('PUT', '/v1/billing/credits/auto-reload', { key: o.testKey, body: { enabled: true, threshold: 500, amount: 2000 } });
    expect(put.body.data.auto_reload).toEqual({ enabled: true, threshold: 500, amount: 2000 });
    const credits = t.app.services.credits;
    await Promise.all(Array.from({ length: 16 }, (_, i) => credits.reserve(scopeOf(o), { amount: 40, key: `msg_reload_${i}` })));
    const after = await eventually('the reload', async () => {
      const l = await ledger(o.orgId);
      return l.topups === 2 ? l : undefined;
    });
    expect(after).toEqual({ sum: 1000 - 640 + 2000, balance: 1000 - 640 + 2000, reservations: 16, topups: 2 });
    await new Promise((r) => setTimeout(r, 300));
    expect((await ledger(o.orgId)).topups).toBe(2);
    const { rows } = await t.db.query('select auto_reload_token from billing_accounts where organization_id = $1', [o.orgId]);
    expect(rows[0].auto_reload_token).toBeNull();
  });

  it('a declined reload disables auto-reload and emits billing.auto_reload_failed', async () => {
    const o = await t.createOrg('enterprise', 'Reload fails');
    await subscribe(o.testKey);
    await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } });
    await subscribe(o.testKey, 'price_growth_monthly', '4000000000000341');
    expect((await t.rest('GET', '/v1/billing/plan', { key: o.testKey })).body.data.payment_method.last4).toBe('0341');
    await t.rest('PUT', '/v1/billing/credits/auto-reload', { key: o.testKey, body: { enabled: true, threshold: 900, amount: 1000 } });
    await t.app.services.credits.reserve(scopeOf(o), { amount: 200, key: 'msg_fail_reload' });
    const event = await eventually('the failure event', async () => {
      const { rows } = await t.db.query(`select data from events where organization_id = $1 and type = 'billing.auto_reload_failed'`, [o.orgId]);
      return rows[0]?.data;
    });
    expect(event).toMatchObject({ amount: 1000, decline_code: 'card_declined', auto_reload_enabled: false });
    const credits = await t.rest('GET', '/v1/billing/credits', { key: o.testKey });
    expect(credits.body.data).toMatchObject({ balance: 800, auto_reload: { enabled: false } });
  });
});

describe('auto-reload sweeper', () => {
  it('reloads at once when enabled below the threshold; sweeps mark an unmarked account and re-enqueue a lost reload, once across instances', async () => {
    const o = await t.createOrg('enterprise', 'Sweeper');
    await subscribe(o.testKey);
    const topups = async (n: number) => eventually(`${n} top-ups`, async () => {
      const l = await ledger(o.orgId);
      return l.topups === n ? l : undefined;
    });
    const account = async () => (await t.db.query('select auto_reload_token as token, balance::int as balance from billing_accounts where organization_id = $1 and mode = $2', [o.orgId, 'test'])).rows[0];
    // Balance 0 < 500 when enabled: no debit will cross the threshold, the reload starts now.
    const put = await t.rest('PUT', '/v1/billing/credits/auto-reload', { key: o.testKey, body: { enabled: true, threshold: 500, amount: 2000 } });
    expect(put.status, put.text).toBe(200);
    expect(await topups(1)).toMatchObject({ balance: 2000, sum: 2000 });
    expect((await account()).token).toBeNull();

    // Below the threshold with no mark (here: the threshold raised behind the API's back); two
    // instances sweep three times each at once → one reload.
    const other = await startTestApp({ clock, sameDatabaseAs: t, env: { LOG_LEVEL: 'silent' } });
    try {
      await t.db.query('update billing_accounts set auto_reload_threshold = 3000 where organization_id = $1 and mode = $2', [o.orgId, 'test']);
      const enqueued = await Promise.all([t, other, t, other, t, other].map((app) => app.app.services.credits.sweepAutoReload()));
      // (The scheduled sweep of the workers may take it first: then none of these.)
      expect(enqueued.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1);
      expect(await topups(2)).toMatchObject({ balance: 4000 });
      await new Promise((r) => setTimeout(r, 300));
      await Promise.all([t, other].map((app) => app.app.services.credits.sweepAutoReload()));
      expect(await ledger(o.orgId)).toMatchObject({ topups: 2, balance: 4000 });
    } finally {
      await other.close();
    }

    // A mark whose job is under way (picked up just now) is left alone; one left for over 10 minutes
    // (its job lost) is enqueued again and charged once.
    await t.db.query(`update billing_accounts set auto_reload_threshold = 5000, auto_reload_token = 'tok_lost', auto_reload_token_at = $3
      where organization_id = $1 and mode = $2`, [o.orgId, 'test', clock.now()]);
    await Promise.all([1, 2, 3].map(() => t.app.services.credits.sweepAutoReload()));
    await new Promise((r) => setTimeout(r, 300));
    expect(await ledger(o.orgId)).toMatchObject({ topups: 2, balance: 4000 });
    expect((await account()).token).toBe('tok_lost');
    await t.db.query('update billing_accounts set auto_reload_token_at = $3 where organization_id = $1 and mode = $2', [o.orgId, 'test', new Date(clock.now().getTime() - 11 * 60_000)]);
    await Promise.all([1, 2, 3].map(() => t.app.services.credits.sweepAutoReload()));
    expect(await topups(3)).toMatchObject({ balance: 6000, sum: 6000 });
    expect(await account()).toEqual({ token: null, balance: 6000 });
    // Above the threshold again: sweeps do nothing; the reload entries carry their mark as ledger key.
    await t.app.services.credits.sweepAutoReload();
    await new Promise((r) => setTimeout(r, 300));
    expect((await ledger(o.orgId)).topups).toBe(3);
    const { rows } = await t.db.query(`select idempotency_key from credit_ledger_entries where organization_id = $1 and kind = 'topup' order by id`, [o.orgId]);
    expect(rows.map((r) => r.idempotency_key)).toEqual([expect.stringMatching(/^reload:sw_/), expect.stringMatching(/^reload:sw_/), 'reload:tok_lost']);
  });

  it('a reload job for an account topped up in the meantime charges nothing', async () => {
    const o = await t.createOrg('enterprise', 'Topped up');
    await subscribe(o.testKey);
    await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } });
    await t.rest('PUT', '/v1/billing/credits/auto-reload', { key: o.testKey, body: { enabled: true, threshold: 500, amount: 2000 } });
    await t.db.query(`update billing_accounts set auto_reload_token = 'tok_late', auto_reload_token_at = $3 where organization_id = $1 and mode = $2`, [o.orgId, 'test', clock.now()]);
    await t.app.services.credits.runAutoReload(scopeOf(o), 'tok_late');
    expect(await ledger(o.orgId)).toMatchObject({ topups: 1, balance: 1000 });
    const { rows } = await t.db.query('select auto_reload_token from billing_accounts where organization_id = $1 and mode = $2', [o.orgId, 'test']);
    expect(rows[0].auto_reload_token).toBeNull();
  });
});

describe('usage', () => {
  /** `d` moved by `n` calendar months (the test days never fall past the 28th). */
  const month = (d: Date, n: number) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + n, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()));

  it('counts from the organization\'s first second: the first billing call agrees with the history of the same days', async () => {
    const o = await t.createOrg('starter', 'Early sender');
    const created = clock.now();
    // Sends before any billing call (the account is created by the first one, hours later).
    for (let i = 0; i < 3; i++) {
      clock.advance(1000);
      const sent = await t.rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: `+1415555020${i}`, body: 'hello' } });
      expect(sent.status, sent.text).toBe(201);
    }
    clock.advance(5 * 3600_000);
    const res = await t.rest('GET', '/v1/billing/usage', { key: o.testKey });
    expect(res.status, res.text).toBe(200);
    const u = res.body.data;
    expect(u.billing_period.start).toBe(created.toISOString());
    expect(u.billing_period.end).toBe(month(created, 1).toISOString());
    expect(u.messages.sms).toEqual({ sent: 3, included: 5_000 });
    expect(u.messages.total).toBe(3);
    // No plan includes agent invocations (the plan's `agents` is how many agents it may have).
    expect(u.agents).toEqual({ invocations: 0, invocations_included: 0 });
    const day = created.toISOString().slice(0, 10);
    const h = await t.rest('GET', `/v1/billing/usage/history?start_date=${day}&end_date=${day}`, { key: o.testKey });
    expect(h.body.data.map((b: any) => b.messages.total)).toEqual([u.messages.total]);
    const plan = await t.rest('GET', '/v1/billing/plan', { key: o.testKey });
    expect([plan.body.data.current_period_start, plan.body.data.current_period_end]).toEqual([u.billing_period.start, u.billing_period.end]);
  });

  it('an organization older than a month at its first billing call is in the period of now, counted in months from its creation', async () => {
    const o = await t.createOrg('starter', 'Late caller');
    const created = clock.now();
    clock.advance(40 * 86_400_000);
    const u = (await t.rest('GET', '/v1/billing/usage', { key: o.testKey })).body.data;
    expect(u.billing_period).toEqual({ start: month(created, 1).toISOString(), end: month(created, 2).toISOString() });
  });

  it('aggregates usage entries for the current period, counting a retried entry once', async () => {
    const o = await t.createOrg('growth', 'Usage');
    const tenant = { organizationId: o.orgId, mode: 'test' as const };
    await t.rest('GET', '/v1/billing/plan', { key: o.testKey });
    const em = t.app.orm.em.fork();
    const day1 = clock.now();
    const day2 = new Date(day1.getTime() + 86_400_000);
    for (const [i, at] of [[1, day1], [2, day1], [3, day2]] as const) {
      await recordUsage(em, tenant, { context: 'messaging', kind: 'sms.segment', quantity: 2, resourceId: `msg_u${i}`, idempotencyKey: `msg_u${i}:accepted` }, at);
    }
    // A retried job records the same unit again: counted once.
    expect(await recordUsage(em, tenant, { context: 'messaging', kind: 'sms.segment', quantity: 2, resourceId: 'msg_u1', idempotencyKey: 'msg_u1:accepted' }, day1)).toBe(false);
    await recordUsage(em, tenant, { context: 'messaging', kind: 'email.recipient', quantity: 3, resourceId: 'msg_e1', idempotencyKey: 'msg_e1:accepted' }, day1);
    // Voice records its minutes as voice.minutes: counted with the priced unit's voice.minute.
    await recordUsage(em, tenant, { context: 'voice', kind: 'voice.minute', quantity: 4, resourceId: 'call_1', idempotencyKey: 'call_1:minutes' }, day2);
    await recordUsage(em, tenant, { context: 'voice', kind: 'voice.minutes', quantity: 3, resourceId: 'call_2', idempotencyKey: 'call_2:minutes' }, day2);
    await recordUsage(em, { organizationId: o.orgId, mode: 'live' }, { context: 'messaging', kind: 'sms.segment', quantity: 1, resourceId: 'msg_live', idempotencyKey: 'msg_live:accepted' }, day1);
    clock.advance(2 * 86_400_000);
    const res = await t.rest('GET', '/v1/billing/usage', { key: o.testKey });
    expect(res.status, res.text).toBe(200);
    const u = res.body.data;
    expect(Object.keys(u).sort()).toEqual(['agents', 'billing_period', 'messages', 'voice']);
    expect(u.messages.sms).toEqual({ sent: 3, included: 25_000 });
    expect(u.messages.email).toEqual({ sent: 3, included: 25_000 });
    expect(u.messages.whatsapp.sent).toBe(0);
    expect(u.voice).toEqual({ minutes_used: 7, minutes_included: 2_500 });
    expect(u.agents).toEqual({ invocations: 0, invocations_included: 0 });

    const start = day1.toISOString().slice(0, 10);
    const end = day2.toISOString().slice(0, 10);
    const h = await t.rest('GET', `/v1/billing/usage/history?start_date=${start}&end_date=${end}`, { key: o.testKey });
    expect(h.body.data.map((b: any) => [b.start.slice(0, 10), b.messages.sms, b.sms_segments, b.messages.email, b.voice_minutes])).toEqual([[start, 2, 4, 3, 0], [end, 1, 2, 0, 7]]);
    const m = await t.rest('GET', `/v1/billing/usage/history?start_date=${start}&end_date=${end}&granularity=month`, { key: o.testKey });
    expect(m.body.data).toHaveLength(1);
    expect(m.body.data[0]).toMatchObject({ messages: { sms: 3, total: 6 }, voice_minutes: 7 });
    expectError(await t.rest('GET', `/v1/billing/usage/history?start_date=${end}&end_date=${start}`, { key: o.testKey }), 422, 'VALIDATION_ERROR');
    expectError(await t.rest('GET', `/v1/billing/usage/history?end_date=${end}`, { key: o.testKey }), 422, 'MISSING_REQUIRED_FIELD');
    expectError(await t.rest('GET', `/v1/billing/usage/history?start_date=2026-02-30&end_date=${end}`, { key: o.testKey }), 422, 'VALIDATION_ERROR');
    const g = await t.gql('query($s: String!, $e: String!) { billingUsage { messages { channel sent included } voiceMinutesUsed } billingUsageHistory(startDate: $s, endDate: $e) { messagesTotal voiceMinutes } }', { s: start, e: end }, { key: o.testKey });
    expect(g.body.errors).toBeUndefined();
    expect(g.body.data.billingUsage.messages[0]).toEqual({ channel: 'sms', sent: 3, included: 25_000 });
    expect(g.body.data.billingUsageHistory).toEqual([{ messagesTotal: 5, voiceMinutes: 0 }, { messagesTotal: 1, voiceMinutes: 7 }]);
  });
});

describe('periods and invoices', () => {
  it('closes an ended period once across concurrent runs: one invoice with lines and an immutable PDF', async () => {
    const o = await t.createOrg('enterprise', 'Invoiced');
    const other = await t.createOrg('enterprise', 'Other');
    await subscribe(o.testKey, 'price_growth_monthly');
    await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 3000 } });
    const plan = (await t.rest('GET', '/v1/billing/plan', { key: o.testKey })).body.data;
    clock.set(new Date(Date.parse(plan.current_period_end) + 1000));
    const created = await Promise.all([1, 2, 3].map(() => t.app.services.invoices.closeDuePeriods()));
    const { rows: mine } = await t.db.query('select count(*)::int as n from invoices where organization_id = $1', [o.orgId]);
    expect(mine[0].n).toBe(1);
    expect(created.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);

    const list = await t.rest('GET', '/v1/billing/invoices', { key: o.testKey });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data).toHaveLength(1);
    const inv = list.body.data[0];
    expect(inv).toMatchObject({ amount: 19_900 + 3000, currency: 'usd', status: 'paid', period_start: plan.current_period_start, period_end: plan.current_period_end });
    expect(inv.number).toMatch(/^INV-[0-9A-Z]{8}-T-00001$/);
    expect(inv.pdf_url).toBe(`/v1/billing/invoices/${inv.id}/pdf`);
    expect(inv.lines.map((l: any) => [l.kind, l.amount])).toEqual([['plan', 19_900], ['topup', 3000]]);
    const next = (await t.rest('GET', '/v1/billing/plan', { key: o.testKey })).body.data;
    expect(next.current_period_start).toBe(plan.current_period_end);

    const pdf = await fetch(`${t.baseUrl}${inv.pdf_url}`, { headers: { 'X-API-Key': o.testKey } });
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get('content-type')).toBe('application/pdf');
    const bytes = new Uint8Array(await pdf.arrayBuffer());
    expect(Buffer.from(bytes.slice(0, 5)).toString()).toBe('%PDF-');
    const original = Buffer.from(bytes);
    // pdf.js takes (detaches) the buffer it is given: hand it a copy.
    const { text } = await extractText(await getDocumentProxy(new Uint8Array(bytes)), { mergePages: true });
    expect(text).toContain(inv.number);
    expect(text).toContain('Total: 229.00 USD');
    const again = new Uint8Array(await (await fetch(`${t.baseUrl}${inv.pdf_url}`, { headers: { 'X-API-Key': o.testKey } })).arrayBuffer());
    expect(Buffer.compare(Buffer.from(again), original)).toBe(0);
    await expect(t.db.query(`update invoices set amount = 1 where id = $1`, [inv.id])).rejects.toThrow(/immutable/);
    await expect(t.db.query(`update invoices set pdf = 'x' where id = $1`, [inv.id])).rejects.toThrow(/immutable/);

    expectError(await t.rest('GET', inv.pdf_url, { key: other.testKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('GET', inv.pdf_url, { key: o.liveKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('GET', inv.pdf_url, { key: await t.createKey(o.orgId, 'viewer') }), 403, 'INSUFFICIENT_PERMISSIONS');
    expect((await t.rest('GET', inv.pdf_url, { key: await t.createKey(o.orgId, 'billing') })).status).toBe(200);

    const { rows: events } = await t.db.query(`select data from events where organization_id = $1 and type = 'invoice.created'`, [o.orgId]);
    expect(events).toHaveLength(1);
    expect(events[0].data).toMatchObject({ id: inv.id, number: inv.number, amount: inv.amount });

    // The next period closes into the next number; the list pages.
    clock.set(new Date(Date.parse(next.current_period_end) + 1000));
    await t.app.services.invoices.closeDuePeriods();
    const p1 = await t.rest('GET', '/v1/billing/invoices?limit=1', { key: o.testKey });
    expect(p1.body.data[0].number).toMatch(/-00002$/);
    expect(p1.body.data[0].lines.map((l: any) => l.kind)).toEqual(['plan']);
    expect(p1.body.meta.pagination.has_more).toBe(true);
    const p2 = await t.rest('GET', `/v1/billing/invoices?limit=1&cursor=${encodeURIComponent(p1.body.meta.pagination.cursor)}`, { key: o.testKey });
    expect(p2.body.data.map((i: any) => i.id)).toEqual([inv.id]);
    expect(p2.body.meta.pagination.has_more).toBe(false);
    const g = await t.gql('{ invoices(first: 5) { edges { node { id number amount pdfUrl lines { kind amount } } } } }', {}, { key: o.testKey });
    expect(g.body.data.invoices.edges.map((e: any) => e.node.number)).toEqual([p1.body.data[0].number, inv.number]);
  });
});

