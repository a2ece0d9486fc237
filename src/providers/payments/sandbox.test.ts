import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../platform/clock.ts';
import { SandboxPaymentsProvider } from './sandbox.ts';
import { WebhookSignatureError } from './types.ts';

const session = { id: 'cs_test_1', organizationId: 'org_1', mode: 'test', planId: 'growth', customerId: null };

function sandbox(deliveries = 3) {
  const clock = new ManualClock(Date.UTC(2026, 0, 31, 9));
  const p = new SandboxPaymentsProvider({ clock, webhookSecret: 'whsec_test', baseUrl: 'http://localhost:4000/', deliveries, latencyMs: 1 });
  const received: { raw: string; signature: string }[] = [];
  p.deliverTo(async (raw, signature) => { received.push({ raw, signature }); });
  return { p, clock, received };
}

describe('payments sandbox', () => {
  it('declines the documented magic cards and completes with a good one, delivering the signed event several times', async () => {
    const { p, clock, received } = sandbox(3);
    expect(p.completeCheckout(session, '4000000000000002')).toMatchObject({ status: 'declined', declineCode: 'card_declined' });
    expect(p.completeCheckout(session, '1234123412341234')).toMatchObject({ status: 'declined', declineCode: 'invalid_number' });
    const done = p.completeCheckout(session, '4242424242424242');
    expect(done).toMatchObject({ status: 'complete', paymentMethod: { brand: 'visa', last4: '4242' } });
    // The first signature loads stripe's module: under load that can take longer than the deliveries' 3 ms.
    for (const end = Date.now() + 5_000; received.length < 3 && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 10));
    expect(received).toHaveLength(3);
    expect(new Set(received.map((r) => r.raw)).size).toBe(1);
    const verified = await p.verifyWebhook(received[0]!.raw, received[0]!.signature, clock.now());
    expect(verified.event).toMatchObject({ kind: 'checkout.completed', organizationId: 'org_1', planId: 'growth', periodStart: clock.now() });
    if (verified.event.kind === 'checkout.completed') expect(verified.event.periodEnd.toISOString()).toBe('2026-02-28T09:00:00.000Z');
    await expect(p.verifyWebhook(received[0]!.raw, received[0]!.signature, new Date(clock.now().getTime() + 301_000))).rejects.toBeInstanceOf(WebhookSignatureError);
    await expect(p.verifyWebhook(received[0]!.raw.replace('growth', 'business'), received[0]!.signature, clock.now())).rejects.toBeInstanceOf(WebhookSignatureError);
    p.close();
  });

  it('charges once per idempotency key; a card that attaches but fails charges declines', async () => {
    const { p } = sandbox();
    const ok = p.completeCheckout(session, '4242424242424242');
    const bad = p.completeCheckout(session, '4000000000000341');
    if (ok.status !== 'complete' || bad.status !== 'complete') throw new Error('expected complete');
    const req = { customerId: ok.customerId, paymentMethodId: ok.paymentMethod.id, amount: 500, currency: 'usd', description: 'x', idempotencyKey: 'k1' };
    const first = await p.charge(req);
    expect(first.status).toBe('succeeded');
    expect(await p.charge(req)).toEqual(first);
    expect(await p.charge({ ...req, paymentMethodId: bad.paymentMethod.id, idempotencyKey: 'k2' })).toMatchObject({ status: 'declined', declineCode: 'card_declined' });
    p.close();
  });
});
