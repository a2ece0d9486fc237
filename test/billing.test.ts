/**
 * Billing plans, subscriptions and checkout end to end over HTTP against the real database, with
 * the payments sandbox: the plan catalog, the role matrix, hosted checkout (magic cards that
 * decline, expiry → CHECKOUT_EXPIRED), signed provider webhooks (delivered twice by the sandbox,
 * five times by hand, out of order, badly signed), subscription states driving
 * SUBSCRIPTION_INACTIVE, a live plan change moving the organization's rate limits, and GraphQL twins.
 */
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually, expectError, expectGqlError } from './helpers/assertions.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 20, 12));
let t: TestApp;
let org: TestOrg;

const URLS = { successUrl: 'https://app.example.com/billing/ok', cancelUrl: 'https://app.example.com/billing/cancel' };
const PAGE = '/v1/providers/payments-sandbox-checkout/callbacks';
const HOOK = '/v1/providers/payments-sandbox/callbacks';

beforeAll(async () => {
  t = await startTestApp({
    clock,
    env: { BILLING_LIVE_SANDBOX: 'true', BILLING_CHECKOUT_TTL_SECONDS: '600', SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES: '2', SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS: '10' },
  });
  org = await t.createOrg('enterprise', 'Billing org');
});
afterAll(async () => {
  await t?.close();
});

async function account(orgId: string, mode = 'test') {
  const { rows } = await t.db.query('select * from billing_accounts where organization_id = $1 and mode = $2', [orgId, mode]);
  return rows[0];
}

async function startCheckout(key: string, priceId = 'price_growth_monthly'): Promise<string> {
  const res = await t.rest('POST', '/v1/billing/checkout', { key, body: { priceId, ...URLS } });
  expect(res.status, res.text).toBe(200);
  const url = new URL(res.body.data.checkoutUrl);
  expect(url.pathname).toBe(PAGE);
  return url.searchParams.get('session_id')!;
}

/** Checkout completed on the hosted page with a card, then both sandbox webhook deliveries processed. */
async function subscribe(key: string, priceId: string, card = '4242424242424242') {
  const sessionId = await startCheckout(key, priceId);
  const page = await t.rest('POST', PAGE, { body: { session_id: sessionId, action: 'complete', card_number: card } });
  expect(page.status, page.text).toBe(200);
  expect(page.body.data).toMatchObject({ status: 'complete', redirect_url: URLS.successUrl });
  // The session turns complete in the transaction that applies the provider's webhook.
  await eventually('the completion webhook', async () => {
    const { rows } = await t.db.query(`select status from checkout_sessions where id = $1`, [sessionId]);
    return rows[0].status === 'complete' ? true : undefined;
  });
  await new Promise((r) => setTimeout(r, 60));
  return sessionId;
}

function signed(payload: string, at = clock.now()): string {
  return Stripe.webhooks.generateTestHeaderString({ payload, secret: t.config.providerSecret('payments_sandbox'), timestamp: Math.floor(at.getTime() / 1000) });
}

function subscriptionEvent(id: string, subscriptionId: string, status: string, created: Date, extra: Record<string, unknown> = {}) {
  return JSON.stringify({
    id, object: 'event', type: 'customer.subscription.updated', created: Math.floor(created.getTime() / 1000),
    data: { object: { id: subscriptionId, object: 'subscription', status, cancel_at_period_end: false, current_period_start: 1_790_000_000, current_period_end: 1_792_600_000, metadata: {}, ...extra } },
  });
}

describe('plans', () => {
  it('lists the four plans with the spec shape; enterprise has custom pricing', async () => {
    const res = await t.rest('GET', '/v1/billing/plans', { key: org.testKey });
    expect(res.status).toBe(200);
    expect(res.body.data.map((p: any) => p.id)).toEqual(['starter', 'growth', 'business', 'enterprise']);
    for (const p of res.body.data) {
      expect(Object.keys(p).sort()).toEqual(['currency', 'features', 'id', 'name', 'price_id', 'price_monthly']);
      expect(Object.keys(p.features).sort()).toEqual(['agents', 'channels', 'messages_included', 'support', 'voice_minutes']);
    }
    const ent = res.body.data[3];
    expect(ent.price_monthly).toBeNull();
    expect(ent.features.messages_included).toBe('unlimited');
    expect(res.body.data[0].price_monthly).toBe(49);
    expect(Number.isInteger(res.body.data[1].features.messages_included)).toBe(true);
    expect(res.headers.get('x-ratelimit-limit')).toBe('120');
  });

  it('GraphQL twin: billingPlans', async () => {
    const res = await t.gql('{ billingPlans { id priceId priceMonthly features { messagesIncluded channels agents voiceMinutes support } } }', {}, { key: org.testKey });
    expect(res.body.errors).toBeUndefined();
    const plans = res.body.data.billingPlans;
    expect(plans.map((p: any) => p.id)).toEqual(['starter', 'growth', 'business', 'enterprise']);
    expect(plans[3]).toMatchObject({ priceMonthly: null, features: { messagesIncluded: null, agents: null } });
  });
});

describe('current subscription and roles', () => {
  it('starts as a trial of the organization plan without a payment method', async () => {
    const fresh = await t.createOrg('starter', 'Fresh');
    const res = await t.rest('GET', '/v1/billing/plan', { key: fresh.testKey });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ plan_id: 'starter', name: 'Starter', status: 'trialing', cancel_at_period_end: false, payment_method: null });
    const start = Date.parse(res.body.data.current_period_start);
    expect(Date.parse(res.body.data.current_period_end)).toBeGreaterThan(start);
  });

  it('owner and billing manage billing; admin reads; developer and viewer neither', async () => {
    const billing = await t.createKey(org.orgId, 'billing');
    const admin = await t.createKey(org.orgId, 'admin');
    const developer = await t.createKey(org.orgId, 'developer');
    const viewer = await t.createKey(org.orgId, 'viewer');
    for (const key of [billing, admin]) expect((await t.rest('GET', '/v1/billing/plan', { key })).status).toBe(200);
    for (const key of [developer, viewer]) {
      expectError(await t.rest('GET', '/v1/billing/plan', { key }), 403, 'INSUFFICIENT_PERMISSIONS');
      expectError(await t.rest('GET', '/v1/billing/credits', { key }), 403, 'INSUFFICIENT_PERMISSIONS');
      expect((await t.rest('GET', '/v1/billing/plans', { key })).status).toBe(200);
    }
    expectError(await t.rest('POST', '/v1/billing/checkout', { key: admin, body: { priceId: 'price_growth_monthly', ...URLS } }), 403, 'INSUFFICIENT_PERMISSIONS');
    expectError(await t.rest('POST', '/v1/billing/credits/topup', { key: admin, body: { amount: 1000 } }), 403, 'INSUFFICIENT_PERMISSIONS');
    expect((await t.rest('POST', '/v1/billing/checkout', { key: billing, body: { priceId: 'price_growth_monthly', ...URLS } })).status).toBe(200);
    const token = await t.mintToken(org.orgId, 'books@example.com', 'billing');
    expect((await t.rest('POST', '/v1/billing/checkout', { token, body: { priceId: 'price_business_monthly', ...URLS } })).status).toBe(200);
  });
});

describe('checkout', () => {
  it('validates the price and the URLs', async () => {
    expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { priceId: 'price_nope', ...URLS } }), 422, 'VALIDATION_ERROR');
    expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { priceId: 'price_enterprise_custom', ...URLS } }), 422, 'VALIDATION_ERROR');
    expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { successUrl: URLS.successUrl, cancelUrl: URLS.cancelUrl } }), 422, 'MISSING_REQUIRED_FIELD');
    expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { priceId: 'price_growth_monthly', successUrl: 'javascript:alert(1)', cancelUrl: URLS.cancelUrl } }), 422, 'VALIDATION_ERROR');
  });

  it('a magic declining card is refused on the page; a good card activates the plan once, though the webhook arrives twice', async () => {
    const o = await t.createOrg('enterprise', 'Checkout');
    const sessionId = await startCheckout(o.testKey, 'price_growth_monthly');
    for (const [card, code] of [['4000000000000002', 'card_declined'], ['4000000000009995', 'insufficient_funds'], ['4000000000000069', 'expired_card']] as const) {
      const declined = await t.rest('POST', PAGE, { body: { session_id: sessionId, action: 'complete', card_number: card } });
      expect(expectError(declined, 402, 'PAYMENT_REQUIRED').error.details.decline_code).toBe(code);
    }
    expect((await account(o.orgId)).status).toBe('trialing');
    const page = await t.rest('POST', PAGE, { body: { session_id: sessionId, action: 'complete', card_number: '4242 4242 4242 4242' } });
    expect(page.status, page.text).toBe(200);
    await eventually('two deliveries', async () => {
      const a = await account(o.orgId);
      return a.status === 'active' ? a : undefined;
    });
    await new Promise((r) => setTimeout(r, 100));
    const plan = await t.rest('GET', '/v1/billing/plan', { key: o.testKey });
    expect(plan.body.data).toMatchObject({ plan_id: 'growth', name: 'Growth', status: 'active', cancel_at_period_end: false, payment_method: { type: 'card', brand: 'visa', last4: '4242' } });
    const { rows: events } = await t.db.query(`select data from events where organization_id = $1 and type = 'billing.subscription_updated'`, [o.orgId]);
    expect(events).toHaveLength(1);
    expect(events[0].data).toMatchObject({ plan_id: 'growth', previous_status: 'trialing', status: 'active' });
    const { rows: seen } = await t.db.query('select count(*)::int as n from billing_provider_events where organization_id = $1', [o.orgId]);
    expect(seen[0].n).toBe(1);
    // The test-mode subscription moves the organization's test plan, which test keys act on; the live plan stays.
    const { rows: orgRow } = await t.db.query('select plan, test_plan from organizations where id = $1', [o.orgId]);
    expect(orgRow[0]).toEqual({ plan: 'enterprise', test_plan: 'growth' });
    // A completed session cannot be paid again.
    expectError(await t.rest('POST', PAGE, { body: { session_id: sessionId, action: 'complete', card_number: '4242424242424242' } }), 409, 'CONFLICT');
  });

  it('an expired session is CHECKOUT_EXPIRED (410); a cancelled one sends the customer back', async () => {
    const sessionId = await startCheckout(org.testKey);
    clock.advance(601_000);
    expectError(await t.rest('POST', PAGE, { body: { session_id: sessionId, action: 'complete', card_number: '4242424242424242' } }), 410, 'CHECKOUT_EXPIRED');
    const { rows } = await t.db.query('select status from checkout_sessions where id = $1', [sessionId]);
    expect(rows[0].status).toBe('expired');
    const other = await startCheckout(org.testKey);
    const cancel = await t.rest('POST', PAGE, { body: { session_id: other, action: 'cancel' } });
    expect(cancel.body.data).toMatchObject({ status: 'cancelled', redirect_url: URLS.cancelUrl });
    expectError(await t.rest('POST', PAGE, { body: { session_id: 'cs_test_unknown', action: 'cancel' } }), 404, 'NOT_FOUND');
  });

  it('GraphQL twin: createCheckout', async () => {
    const res = await t.gql('mutation($i: CheckoutInput!) { createCheckout(input: $i) { checkoutUrl sessionId expiresAt } }',
      { i: { priceId: 'price_business_monthly', ...URLS } }, { key: org.testKey });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.createCheckout.checkoutUrl).toContain(res.body.data.createCheckout.sessionId);
    expectGqlError(await t.gql('mutation($i: CheckoutInput!) { createCheckout(input: $i) { checkoutUrl } }',
      { i: { priceId: 'price_business_monthly', ...URLS } }, { key: await t.createKey(org.orgId, 'developer') }), 'INSUFFICIENT_PERMISSIONS');
  });
});

describe('checkout field names (the spec writes priceId, the plans list price_id)', () => {
  const SNAKE = { success_url: URLS.successUrl, cancel_url: URLS.cancelUrl };

  it('takes either spelling of each field, and answers every field in one style and its snake_case twin', async () => {
    const res = await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { price_id: 'price_growth_monthly', ...SNAKE } });
    expect(res.status, res.text).toBe(200);
    const d = res.body.data;
    expect(Object.keys(d).sort()).toEqual(['checkoutUrl', 'checkout_url', 'expiresAt', 'expires_at', 'sessionId', 'session_id']);
    expect([d.checkout_url, d.session_id, d.expires_at]).toEqual([d.checkoutUrl, d.sessionId, d.expiresAt]);
    expect(new URL(d.checkoutUrl).searchParams.get('session_id')).toBe(d.sessionId);
    const mixed = await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { priceId: 'price_growth_monthly', success_url: URLS.successUrl, cancelUrl: URLS.cancelUrl } });
    expect(mixed.status, mixed.text).toBe(200);
  });

  it('an error names the field as the client sent it', async () => {
    const snake = expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { price_id: 'price_growth_monthy', ...SNAKE } }), 422, 'VALIDATION_ERROR');
    expect(snake.error.details).toMatchObject({ field: 'price_id', value: 'price_growth_monthy', did_you_mean: 'price_growth_monthly' });
    expect(snake.error.message).toMatch(/^price_id: unknown price price_growth_monthy; .*did you mean price_growth_monthly\?$/);
    const camel = expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { priceId: 'price_nope', ...URLS } }), 422, 'VALIDATION_ERROR');
    expect(camel.error.details.field).toBe('priceId');
    // Nothing given: each missing field once, with its other spelling.
    const none = expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: {} }), 422, 'MISSING_REQUIRED_FIELD');
    expect(none.error.message).toBe('3 problems: priceId is required (or price_id); successUrl is required (or success_url); cancelUrl is required (or cancel_url)');
    // Two different values for one field.
    const both = expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { priceId: 'price_growth_monthly', price_id: 'price_business_monthly', ...URLS } }), 422, 'VALIDATION_ERROR');
    expect(both.error.details.field).toBe('price_id');
    // And a field of neither spelling is unknown, with the likely one.
    const typo = expectError(await t.rest('POST', '/v1/billing/checkout', { key: org.testKey, body: { priceID: 'price_growth_monthly', price_id: 'price_growth_monthly', ...SNAKE } }), 422, 'VALIDATION_ERROR');
    expect(typo.error.details).toMatchObject({ field: 'priceID', did_you_mean: 'priceId' });
  });
});

describe('plans per mode', () => {
  async function testPlan(key: string) {
    const r = await t.rest('GET', '/v1/settings/organization', { key });
    return r.body.data.organization.plan as string;
  }

  it('a completed test checkout puts the test keys on the plan: rate limits follow, live stays', async () => {
    const o = await t.createOrg('starter', 'Trying business');
    const hipaa = (key: string) => t.rest('PUT', '/v1/settings/hipaa', { key, body: { enabled: true, compliance_officer: { name: 'Dana Privacy', email: 'privacy@example.com' } } });
    expect((await t.rest('PUT', '/v1/settings/hipaa/baa', { key: o.liveKey, body: { status: 'signed', signed_date: '2026-11-01', document_url: 'https://docs.example.com/baa.pdf' } })).status).toBe(200);
    expect(expectError(await hipaa(o.liveKey), 403, 'FORBIDDEN').error.details).toMatchObject({ reason: 'plan', plan: 'starter' });
    expect((await t.rest('GET', '/v1/billing/plan', { key: o.testKey })).headers.get('x-ratelimit-limit')).toBe('60');
    await subscribe(o.testKey, 'price_business_monthly');
    expect(await testPlan(o.testKey)).toBe('business');
    expect(await testPlan(o.liveKey)).toBe('starter');
    const plan = await t.rest('GET', '/v1/billing/plan', { key: o.testKey });
    expect(plan.body.data).toMatchObject({ plan_id: 'business', status: 'active' });
    expect(plan.headers.get('x-ratelimit-limit')).toBe('90');
    expect((await t.rest('GET', '/v1/billing/plan', { key: o.liveKey })).headers.get('x-ratelimit-limit')).toBe('60');
    // HIPAA settings govern live data: a test key may not change them whatever its plan, and the
    // live key is still on starter.
    expect(expectError(await hipaa(o.testKey), 403, 'FORBIDDEN').error.details).toMatchObject({ reason: 'test_mode_key' });
    expect(expectError(await hipaa(o.liveKey), 403, 'FORBIDDEN').error.details).toMatchObject({ reason: 'plan', plan: 'starter' });
  });

  it('an owner changes the plan of a subscription (REST): provider, subscription, organization and an event, once', async () => {
    const o = await t.createOrg('starter', 'Changer');
    // No subscription yet: the answer says how to get one.
    const none = expectError(await t.rest('PUT', '/v1/billing/plan', { key: o.testKey, body: { plan_id: 'growth' } }), 402, 'PAYMENT_REQUIRED');
    expect(none.error.details).toMatchObject({ reason: 'no_subscription', price_id: 'price_growth_monthly', checkout: 'POST /v1/billing/checkout' });
    await subscribe(o.testKey, 'price_growth_monthly');
    const billing = await t.createKey(o.orgId, 'billing');
    expectError(await t.rest('PUT', '/v1/billing/plan', { key: billing, body: { plan_id: 'business' } }), 403, 'INSUFFICIENT_PERMISSIONS');
    const bad = expectError(await t.rest('PUT', '/v1/billing/plan', { key: o.testKey, body: { plan_id: 'platinum' } }), 422, 'VALIDATION_ERROR');
    expect(bad.error.details.expected).toEqual(['starter', 'growth', 'business', 'enterprise']);
    expectError(await t.rest('PUT', '/v1/billing/plan', { key: o.testKey, body: { plan_id: 'enterprise' } }), 422, 'VALIDATION_ERROR');
    expect(await testPlan(o.testKey)).toBe('growth');

    const res = await t.rest('PUT', '/v1/billing/plan', { key: o.testKey, body: { plan_id: 'business' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ plan_id: 'business', name: 'Business', status: 'active', payment_method: { last4: '4242' } });
    expect(await testPlan(o.testKey)).toBe('business');
    expect(await testPlan(o.liveKey)).toBe('starter');
    // The sandbox reports the change as Stripe does (twice): nothing more happens.
    await eventually('the provider reports the change', async () => {
      const { rows } = await t.db.query(`select count(*)::int as n from billing_provider_events where organization_id = $1 and type = 'customer.subscription.updated'`, [o.orgId]);
      return rows[0].n > 0 ? true : undefined;
    });
    await new Promise((r) => setTimeout(r, 100));
    const { rows: events } = await t.db.query(`select data from events where organization_id = $1 and type = 'billing.subscription_updated' order by id`, [o.orgId]);
    expect(events.map((e: any) => [e.data.previous_plan_id, e.data.plan_id])).toEqual([['starter', 'growth'], ['growth', 'business']]);
    expect((await t.rest('GET', '/v1/billing/plan', { key: o.testKey })).body.data).toMatchObject({ plan_id: 'business', status: 'active' });
    // The same plan again changes nothing.
    expect((await t.rest('PUT', '/v1/billing/plan', { key: o.testKey, body: { plan_id: 'business' } })).status).toBe(200);
    const { rows: after } = await t.db.query(`select count(*)::int as n from events where organization_id = $1 and type = 'billing.subscription_updated'`, [o.orgId]);
    expect(after[0].n).toBe(2);
  });

  it('GraphQL twin: changePlan', async () => {
    const o = await t.createOrg('starter', 'Changer GraphQL');
    const change = (key: string, planId: string) => t.gql('mutation($p: String!) { changePlan(planId: $p) { planId status } }', { p: planId }, { key });
    expectGqlError(await change(o.testKey, 'growth'), 'PAYMENT_REQUIRED');
    await subscribe(o.testKey, 'price_growth_monthly');
    expectGqlError(await change(await t.createKey(o.orgId, 'admin'), 'business'), 'INSUFFICIENT_PERMISSIONS');
    const res = await change(o.testKey, 'business');
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.changePlan).toEqual({ planId: 'business', status: 'active' });
    expect(await testPlan(o.testKey)).toBe('business');
  });
});

describe('provider webhooks', () => {
  it('the same event delivered 5 times at once changes the subscription once', async () => {
    const o = await t.createOrg('enterprise', 'Hooks');
    await subscribe(o.testKey, 'price_growth_monthly');
    const a = await account(o.orgId);
    const payload = subscriptionEvent('evt_test_pastdue_1', a.subscription_id, 'past_due', clock.now());
    const results = await Promise.all(Array.from({ length: 5 }, () => t.rest('POST', HOOK, { rawBody: payload, headers: { 'Content-Type': 'application/json', 'X-Provider-Signature': signed(payload) } })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(results.filter((r) => r.body.data.duplicate === false)).toHaveLength(1);
    const after = await account(o.orgId);
    expect(after.status).toBe('past_due');
    expect(after.sequence).toBe(a.sequence + 1);
    const { rows } = await t.db.query(`select count(*)::int as n from events where organization_id = $1 and type = 'billing.subscription_updated' and data->>'status' = 'past_due'`, [o.orgId]);
    expect(rows[0].n).toBe(1);
    // Stripe's own header name is accepted as well.
    const again = await t.rest('POST', HOOK, { rawBody: payload, headers: { 'Content-Type': 'application/json', 'Stripe-Signature': signed(payload) } });
    expect(again.body.data.duplicate).toBe(true);
  });

  it('refuses bad and stale signatures', async () => {
    const payload = subscriptionEvent('evt_test_bad', 'sub_test_x', 'active', clock.now());
    expectError(await t.rest('POST', HOOK, { rawBody: payload, headers: { 'X-Provider-Signature': signed(payload).replace(/v1=./, 'v1=0') } }), 401, 'UNAUTHORIZED');
    expectError(await t.rest('POST', HOOK, { rawBody: payload }), 401, 'UNAUTHORIZED');
    expectError(await t.rest('POST', HOOK, { rawBody: payload, headers: { 'X-Provider-Signature': signed(payload, new Date(clock.now().getTime() - 600_000)) } }), 401, 'UNAUTHORIZED');
    expectError(await t.rest('POST', HOOK, { rawBody: `${payload} `, headers: { 'X-Provider-Signature': signed(payload) } }), 401, 'UNAUTHORIZED');
  });

  it('an older event arriving late is ignored; cancellation makes paid operations SUBSCRIPTION_INACTIVE', async () => {
    const o = await t.createOrg('enterprise', 'Cancel');
    await subscribe(o.testKey, 'price_business_monthly');
    const now = clock.now();
    const cancelled = JSON.stringify({ ...JSON.parse(subscriptionEvent('evt_test_del', (await account(o.orgId)).subscription_id, 'canceled', now)), type: 'customer.subscription.deleted' });
    const late = subscriptionEvent('evt_test_late', (await account(o.orgId)).subscription_id, 'active', new Date(now.getTime() - 1000), { cancel_at_period_end: true });
    expect((await t.rest('POST', HOOK, { rawBody: cancelled, headers: { 'X-Provider-Signature': signed(cancelled) } })).status).toBe(200);
    const lateRes = await t.rest('POST', HOOK, { rawBody: late, headers: { 'X-Provider-Signature': signed(late) } });
    expect(lateRes.body.data.duplicate).toBe(false);
    const plan = await t.rest('GET', '/v1/billing/plan', { key: o.testKey });
    expect(plan.body.data).toMatchObject({ status: 'cancelled', cancel_at_period_end: false, plan_id: 'business' });
    expectError(await t.rest('POST', '/v1/billing/credits/topup', { key: o.testKey, body: { amount: 1000 } }), 403, 'SUBSCRIPTION_INACTIVE');
    expectError(await t.rest('PUT', '/v1/billing/credits/auto-reload', { key: o.testKey, body: { enabled: true, threshold: 100, amount: 1000 } }), 403, 'SUBSCRIPTION_INACTIVE');
    // A new checkout brings it back.
    await subscribe(o.testKey, 'price_growth_monthly');
    expect((await account(o.orgId)).status).toBe('active');
  });

  it('a live plan change moves the organization plan and its rate limits at once', async () => {
    const o = await t.createOrg('starter', 'Upgrader');
    const before = await t.rest('GET', '/v1/billing/plan', { key: o.liveKey });
    expect(before.headers.get('x-ratelimit-limit')).toBe('60');
    await subscribe(o.liveKey, 'price_business_monthly', '5555555555554444');
    const { rows } = await t.db.query('select plan from organizations where id = $1', [o.orgId]);
    expect(rows[0].plan).toBe('business');
    const after = await t.rest('GET', '/v1/billing/plan', { key: o.liveKey });
    expect(after.body.data).toMatchObject({ plan_id: 'business', status: 'active', payment_method: { brand: 'mastercard', last4: '4444' } });
    expect(after.headers.get('x-ratelimit-limit')).toBe('90');
  });
});
