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
import { accountSid, toSid } from './sids.ts';
import { renderCall } from './calls.ts';

export const TWILIO_FORMAT = 'twilio';
export const FORM_TYPE = 'application/x-www-form-urlencoded';

/** A callback URL given through this surface, as the resource stores it. */
export const twilioCallbackUrl = (url: string, options: Record<string, string> = {}) => withCallbackFormat(url, TWILIO_FORMAT, options);

/** Twilio's message statuses for the native status events that call back. */
const MESSAGE_STATUS: Record<string, string> = {
  'message.queued': 'queued', 'message.sent': 'sent', 'message.delivered': 'delivered', 'message.failed': 'failed', 'message.read': 'read',
};

function messageErrorCode(code: unknown): string {
  return typeof code === 'string' && /^\d{5}$/.test(code) ? code : '30008';
}

/** Renderers by resource type: the parameters Twilio posts for the event, or null for none. */
export type TwilioRenderer = (tx: RelayTx, event: OutboxEvent, account: string, options: URLSearchParams) => Promise<Record<string, string> | null>;

const renderMessage: TwilioRenderer = async (tx, event, account) => {
  const d = event.data;
  const sid = toSid(event.resourceId);
  const base = { AccountSid: account, ApiVersion: '2010-04-01', MessageSid: sid, SmsSid: sid, From: String(d.from ?? ''), To: String(d.to ?? '') };
  if (event.type === 'message.received') {
    // The number's SmsUrl: the inbound message itself, as Twilio posts it.
    const rows = await tx.query<{ body: string | null; segments: number | null }>('select body, segments from messages where id = $1', [event.resourceId]);
    return {
      ...base, SmsMessageSid: sid, Body: rows[0]?.body ?? '', NumMedia: '0', NumSegments: String(rows[0]?.segments ?? 1),
      SmsStatus: 'received', MessagingServiceSid: '',
    };
  }
  const status = MESSAGE_STATUS[event.type];
  if (!status) return null;
  return { ...base, MessageStatus: status, SmsStatus: status, ...(status === 'failed' ? { ErrorCode: messageErrorCode(d.error_code) } : {}) };
};

export class TwilioCallbackFormat implements CallbackFormat {
  readonly contentType = FORM_TYPE;
  readonly #tokens: TwilioTokens;
  readonly #renderers: Record<string, TwilioRenderer>;

  constructor(tokens: TwilioTokens, renderers: Record<string, TwilioRenderer> = {}) {
    this.#tokens = tokens;
    this.#renderers = { message: renderMessage, call: renderCall, ...renderers };
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
}

/** Registers the Twilio format with the webhooks context's callback formats. */
export function installTwilioCallbacks(formats: CallbackFormats, tokens: TwilioTokens, renderers: Record<string, TwilioRenderer> = {}): void {
  formats.add(TWILIO_FORMAT, new TwilioCallbackFormat(tokens, renderers));
}
