/** Live-mode organizations with a card and a chosen credit balance (payments sandbox; BILLING_LIVE_SANDBOX=true). */
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { expect } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import { systemScope } from '../../src/platform/auth/scope.ts';
import type { Plan } from '../../src/platform/tenancy/tenancy.entities.ts';
import { includedOf } from '../../src/modules/billing/billing.plans.ts';
import { eventually } from './assertions.ts';
import { startTestApp, type TestApp, type TestOrg } from './testApp.ts';

/**
 * The app the paid-send tests run: a real SMTP server that takes every message (live email sends are
 * what gets charged), the payments sandbox in live mode with one prompt webhook delivery, the real
 * clock, workers unless `workers: false`. `smtp` adds the server's own hooks (refuse a recipient,
 * record envelopes); `env` adds or overrides settings. The app's close() stops the SMTP server too.
 */
export async function startPayingApp(o: { workers?: boolean; env?: Record<string, string>; smtp?: SMTPServerOptions } = {}): Promise<TestApp> {
  const smtp = new SMTPServer({
    authOptional: true, disabledCommands: ['STARTTLS'], logger: false,
    onData(stream, _session, callback) {
      stream.resume();
      stream.on('end', () => callback());
    },
    ...o.smtp,
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const { port } = smtp.server.address() as AddressInfo;
  const closeSmtp = () => new Promise<void>((resolve) => smtp.close(() => resolve()));
  let t: TestApp;
  try {
    t = await startTestApp({
      workers: o.workers ?? true, clock: systemClock,
      env: { SMTP_URL: `smtp://127.0.0.1:${port}`, BILLING_LIVE_SANDBOX: 'true', SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES: '1', SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS: '0', DB_POOL_SIZE: '8', ...o.env },
    });
  } catch (e) {
    await closeSmtp();
    throw e;
  }
  const closeApp = t.close.bind(t);
  return Object.assign(t, { close: async () => { await closeApp(); await closeSmtp(); } });
}

const URLS = { successUrl: 'https://app.example.com/ok', cancelUrl: 'https://app.example.com/cancel' };

/**
 * A live-mode organization subscribed through the sandbox checkout (so it has a card), with an email
 * sender `sender` and exactly `balance` credits (the smallest top-up is 100: the rest is spent by a
 * reservation made outside any send). Its plan's included messages and voice minutes of the period are already
 * spent (`pool: 'spent'`, the default: every send is charged) or left whole (`'fresh'`).
 */
export async function liveOrgWithBalance(t: TestApp, plan: Plan, balance: number, sender = `news-${plan}-${Date.now()}@acme.test`, pool: 'spent' | 'fresh' = 'spent'): Promise<TestOrg & { sender: string }> {
  const o = await t.createOrg(plan, `Credits ${plan}`);
  const created = await t.rest('POST', '/v1/messages/senders', { key: o.liveKey, body: { channel: 'email', address: sender } });
  expect(created.status, created.text).toBe(201);
  const checkout = await t.rest('POST', '/v1/billing/checkout', { key: o.liveKey, body: { priceId: `price_${plan}_monthly`, ...URLS } });
  expect(checkout.status, checkout.text).toBe(200);
  const sessionId = new URL(checkout.body.data.checkoutUrl).searchParams.get('session_id')!;
  const page = await t.rest('POST', '/v1/providers/payments-sandbox-checkout/callbacks', { body: { session_id: sessionId, action: 'complete', card_number: '4242424242424242' } });
  expect(page.status, page.text).toBe(200);
  await eventually('the checkout webhook', async () => ((await t.rest('GET', '/v1/billing/plan', { key: o.liveKey })).body.data.payment_method ? true : undefined));
  expect((await t.rest('POST', '/v1/billing/credits/topup', { key: o.liveKey, body: { amount: 100 } })).status).toBe(200);
  if (balance < 100) await t.app.services.credits.reserve(systemScope(o.orgId, 'live', plan, 'req_fixture'), { amount: 100 - balance, key: `fixture:${o.orgId}` });
  expect((await t.rest('GET', '/v1/billing/credits', { key: o.liveKey })).body.data.balance).toBe(balance);
  if (pool === 'spent') await spendIncludedMessages(t, o.orgId, plan);
  return { ...o, sender };
}

/** Marks the organization's included messages and voice minutes of the current live period as used (what a month of use would do). */
export async function spendIncludedMessages(t: TestApp, orgId: string, plan: Plan): Promise<void> {
  for (const quota of ['messages', 'voice_minutes'] as const) {
    await t.db.query(`insert into billing_pool_usage (organization_id, mode, quota, period_start, used)
        select organization_id, mode, $3, current_period_start, $2 from billing_accounts where organization_id = $1 and mode = 'live'
        on conflict (organization_id, mode, quota, period_start) do update set used = excluded.used`, [orgId, Math.max(0, includedOf(plan, quota)), quota]);
  }
}
