/**
 * Callbacks in Twilio's format: a StatusCallback or SmsUrl given through this surface is stored
 * marked `#format=twilio` (webhooks.formats.ts), and the webhooks context delivers it with its
 * fan-out, retry schedule and log as every callback, but form-encoded with Twilio's parameters and
 * signed with `X-Twilio-Signature` under the account's auth token (tokens.ts), so the customer's
 * `twilio.validateRequest` accepts it.
 */
import type { TenantRef } from '../platform/db/tenant.ts';
import type { OutboxEvent, RelayTx } from '../platform/events/relay.ts';
import { withCallbackFormat, type CallbackFormat, type CallbackFormats } from '../modules/webhooks/webhooks.formats.ts';
import { twilioSignature } from './signature.ts';
import type { TwilioTokens } from './tokens.ts';
import { accountSid } from './sids.ts';

export const TWILIO_FORMAT = 'twilio';
export const FORM_TYPE = 'application/x-www-form-urlencoded';

/** A callback URL given through this surface, as the resource stores it. */
export const twilioCallbackUrl = (url: string, options: Record<string, string> = {}) => withCallbackFormat(url, TWILIO_FORMAT, options);

/** Renderers by resource type: the parameters Twilio posts for the event, or null for none. */
export type TwilioRenderer = (tx: RelayTx, event: OutboxEvent, account: string, options: URLSearchParams) => Promise<Record<string, string> | null>;

/** What carries out the answer to a callback (messaging TwiML for an SmsUrl). */
type Answers = { answered: NonNullable<CallbackFormat['answered']> };

export class TwilioCallbackFormat implements CallbackFormat {
  readonly contentType = FORM_TYPE;
  readonly #tokens: TwilioTokens;
  readonly #renderers: Record<string, TwilioRenderer>;
  readonly #answers: Answers;

  /** `renderers`: by resource type (messages.ts, calls.ts: routes.ts's twilioRenderers); `answers` carries out an SmsUrl's answer (twiml/messaging.ts). */
  constructor(tokens: TwilioTokens, renderers: Record<string, TwilioRenderer>, answers: Answers) {
    this.#tokens = tokens;
    this.#renderers = renderers;
    this.#answers = answers;
  }

  async render(tx: RelayTx, event: OutboxEvent, options: URLSearchParams): Promise<string | null> {
    const renderer = this.#renderers[event.resourceType];
    if (!renderer) return null;
    const params = await renderer(tx, event, accountSid(event.organizationId, event.mode), options);
    return params ? new URLSearchParams(params).toString() : null;
  }

  async headers(tenant: TenantRef, url: string, payload: string): Promise<Record<string, string>> {
    const token = await this.#tokens.signingToken(tenant);
    return token ? { 'X-Twilio-Signature': twilioSignature(token, url, new URLSearchParams(payload)) } : {};
  }

  answered(tenant: TenantRef, deliveryId: string, url: string, payload: string, answer: { status: number; contentType: string | undefined; body: string }): Promise<void> {
    return this.#answers.answered(tenant, deliveryId, url, payload, answer);
  }
}

/** Registers the Twilio format with the webhooks context's callback formats. */
export function installTwilioCallbacks(formats: CallbackFormats, tokens: TwilioTokens, renderers: Record<string, TwilioRenderer>, answers: Answers): void {
  formats.add(TWILIO_FORMAT, new TwilioCallbackFormat(tokens, renderers, answers));
}
