/**
 * The sandbox's hosted checkout page (test mode, and live mode with BILLING_LIVE_SANDBOX): the
 * `checkoutUrl` of a sandbox session. Its form posts `{ session_id, action: "complete" | "cancel",
 * card_number }` to `POST /v1/providers/payments-sandbox-checkout/callbacks`; the session id is the
 * bearer of the page, as with a hosted payment page. Completing charges nothing yet: the provider
 * then sends the signed `checkout.session.completed` webhook, which activates the subscription.
 */
import { z } from 'zod';
import { ServiceError } from '../../platform/errors.ts';
import { parseInput } from '../../platform/operations.ts';
import type { SandboxPaymentsProvider } from '../../providers/payments/sandbox.ts';
import type { BillingService } from './billing.service.ts';

const pageInput = z.object({
  session_id: z.string().trim().min(1).max(200),
  action: z.enum(['complete', 'cancel']),
  card_number: z.string().trim().max(32).nullish(),
});

export async function handleCheckoutPage(billing: BillingService, sandbox: SandboxPaymentsProvider, rawBody: string): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = JSON.parse(rawBody || '{}');
  } catch {
    throw new ServiceError('VALIDATION_ERROR', 'Body must be JSON', {}, { status: 400 });
  }
  const input = parseInput(pageInput, body);
  const session = await billing.session(input.session_id);
  if (session.provider !== sandbox.name) throw new ServiceError('NOT_FOUND', `No sandbox checkout session ${input.session_id}`, { session_id: input.session_id });
  await billing.assertOpen(session);
  if (input.action === 'cancel') {
    await billing.cancelSession(session.id);
    return { session_id: session.id, status: 'cancelled', redirect_url: session.cancelUrl };
  }
  if (!input.card_number) throw new ServiceError('MISSING_REQUIRED_FIELD', 'card_number is required', { field: 'card_number' });
  const account = await billing.current({ organizationId: session.organizationId, mode: session.mode } as never);
  const result = sandbox.completeCheckout({ id: session.id, organizationId: session.organizationId, mode: session.mode, planId: session.planId, customerId: account.customerId ?? null }, input.card_number);
  if (result.status === 'declined') {
    throw new ServiceError('PAYMENT_REQUIRED', result.message, { decline_code: result.declineCode, session_id: session.id });
  }
  return { session_id: session.id, status: 'complete', redirect_url: session.successUrl };
}
