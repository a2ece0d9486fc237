/**
 * The sandbox's hosted checkout page (test mode, and live mode with BILLING_LIVE_SANDBOX): the
 * `checkoutUrl` of a sandbox session, `GET /v1/providers/payments-sandbox-checkout/callbacks
 * ?session_id=…`, served by this service. A person sees the plan and its price, enters a test card
 * and pays (or cancels); the page posts `{ session_id, action: "complete" | "cancel", card_number }`
 * to the same path and sends the browser to the answer's `redirect_url` (the session's
 * `successUrl` or `cancelUrl`), or shows why the card was declined. The session id is the bearer
 * of the page, as with a hosted payment page. Completing charges nothing yet: the provider then
 * sends the signed `checkout.session.completed` webhook, which activates the subscription and
 * moves the plan of the session's mode.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { ServiceError } from '../../platform/errors.ts';
import { parseInput } from '../../platform/operations.ts';
import { SANDBOX_CARDS, type SandboxPaymentsProvider } from '../../providers/payments/sandbox.ts';
import { planById } from './billing.plans.ts';
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

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

type Page = { status: number; html: string; headers: Record<string, string> };

/** The page of a session: the payment form while it is open, else what became of it. */
export async function renderCheckoutPage(billing: BillingService, sandbox: SandboxPaymentsProvider, query: URLSearchParams): Promise<Page> {
  const id = query.get('session_id') ?? '';
  const nonce = randomBytes(16).toString('base64');
  const page = (status: number, title: string, body: string): Page => ({
    status,
    html: document(nonce, title, body),
    headers: {
      // Nothing but this page's own script and style, and requests to this service.
      'Content-Security-Policy': `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
      // The session id is in the address: never sent on to another site.
      'Referrer-Policy': 'no-referrer',
      'X-Frame-Options': 'DENY',
    },
  });
  const session = id && id.length <= 200 ? await billing.session(id).catch(() => undefined) : undefined;
  if (!session || session.provider !== sandbox.name) {
    return page(404, 'Checkout not found', '<h1>Checkout not found</h1><p>There is no checkout session at this address. Start a checkout again from the application.</p>');
  }
  try {
    await billing.assertOpen(session);
  } catch (e) {
    const expired = e instanceof ServiceError && e.code === 'CHECKOUT_EXPIRED';
    const done = session.status === 'complete';
    return page(expired ? 410 : 409, expired ? 'Checkout expired' : 'Checkout closed',
      expired ? '<h1>This checkout expired</h1><p>Start a checkout again from the application.</p>'
        : done ? `<h1>Already paid</h1><p>This checkout is complete. <a href="${escape(session.successUrl)}">Back to the application</a></p>`
          : `<h1>Checkout cancelled</h1><p><a href="${escape(session.cancelUrl)}">Back to the application</a></p>`);
  }
  const plan = planById(session.planId);
  const price = plan?.price_monthly != null ? `$${plan.price_monthly.toFixed(2)} per month` : 'custom pricing';
  const cards = Object.entries(SANDBOX_CARDS).filter(([, c]) => !c.decline && !c.chargesFail).map(([n]) => n.replace(/(\d{4})(?=\d)/g, '$1 '));
  return page(200, `Subscribe to ${plan?.name ?? session.planId}`, `
  <p class="mode">Test mode — payments sandbox: no card is charged.</p>
  <h1>Subscribe to ${escape(plan?.name ?? session.planId)}</h1>
  <p class="price">${escape(price)}</p>
  <form id="pay" data-session="${escape(session.id)}">
    <label for="card">Card number</label>
    <input id="card" name="card_number" inputmode="numeric" autocomplete="cc-number" placeholder="4242 4242 4242 4242" required maxlength="23" />
    <p class="hint">Test cards: ${cards.map((c) => `<code>${c}</code>`).join(', ')}; others decline as Stripe's test cards do.</p>
    <p id="error" role="alert" hidden></p>
    <button id="submit" type="submit">Pay and subscribe</button>
    <button id="cancel" type="button" class="secondary">Cancel</button>
  </form>
  <script nonce="${nonce}">
    const form = document.getElementById('pay');
    const error = document.getElementById('error');
    async function send(action) {
      error.hidden = true;
      for (const b of form.querySelectorAll('button')) b.disabled = true;
      const body = { session_id: form.dataset.session, action };
      if (action === 'complete') body.card_number = document.getElementById('card').value;
      try {
        const res = await fetch(location.pathname, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
        const answer = await res.json();
        if (res.ok) { location.assign(answer.data.redirect_url); return; }
        error.textContent = answer.error.message;
      } catch (e) {
        error.textContent = 'The payment could not be sent: ' + e.message;
      }
      error.hidden = false;
      for (const b of form.querySelectorAll('button')) b.disabled = false;
    }
    form.addEventListener('submit', (e) => { e.preventDefault(); send('complete'); });
    document.getElementById('cancel').addEventListener('click', () => send('cancel'));
  </script>`);
}

function document(nonce: string, title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <meta name="robots" content="noindex" />
  <title>${escape(title)}</title>
  <style nonce="${nonce}">
    body{font:16px/1.5 system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a}
    .mode{background:#fff3c4;padding:.4rem .7rem;border-radius:.3rem;font-size:.9rem}
    .price{font-size:1.3rem;margin-top:-.5rem}
    label{display:block;font-weight:600;margin-top:1rem}
    input{width:100%;box-sizing:border-box;font-size:1.1rem;padding:.5rem;margin:.3rem 0}
    .hint{font-size:.85rem;color:#555}
    [role=alert]{color:#b00020}
    button{font-size:1rem;padding:.6rem 1.2rem;margin:.5rem .5rem 0 0;cursor:pointer}
    .secondary{background:none;border:1px solid #999}
  </style>
</head>
<body>${body}
</body>
</html>
`;
}
