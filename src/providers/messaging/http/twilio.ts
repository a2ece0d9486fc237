/**
 * Twilio Programmable Messaging through the `twilio` SDK: `messages.create` (From or
 * MessagingServiceSid, To, Body, MediaUrl for MMS, StatusCallback to this service), status
 * callbacks and inbound messages (form-encoded, signed `X-Twilio-Signature`) verified by the SDK's
 * `validateRequest`. Reference: https://www.twilio.com/docs/messaging/api/message-resource,
 * https://www.twilio.com/docs/usage/webhooks/webhooks-security.
 *
 * `apiBaseUrl` (deployment setting MESSAGING_TWILIO_API_URL) replaces `https://api.twilio.com`
 * through a custom HTTP client (the SDK's documented `httpClient` option): a regional proxy, or a
 * local fake in tests.
 */
import { createHash } from 'node:crypto';
import twilio from 'twilio';
import type { ReportedStatus } from '../types.ts';
import { headerOf, type CarrierCallbackRequest, type VerifiedCallback } from './callbacks.ts';
import { failureOf, HttpCarrierConnector, VendorFailure, type HttpConnectorDeps, type MediaMessage } from './connector.ts';

export type TwilioConnectorSettings = {
  id: string;
  accountSid: string;
  authToken: string;
  messagingServiceSid: string | null;
  apiBaseUrl?: string | undefined;
  timeoutMs?: number;
};

/** RequestClient sending every request to `base` instead of Twilio's hosts (path and query kept). */
class BaseUrlClient extends twilio.RequestClient {
  readonly #base: URL;
  constructor(base: string, timeout: number) {
    super({ timeout, autoRetry: false });
    this.#base = new URL(base);
  }

  override request<TData>(opts: Parameters<twilio.RequestClient['request']>[0]) {
    const uri = new URL(opts.uri);
    uri.protocol = this.#base.protocol;
    uri.host = this.#base.host;
    return super.request<TData>({ ...opts, uri: uri.href } as typeof opts & { data?: TData });
  }
}

const STATUSES: Record<string, ReportedStatus | null> = {
  accepted: null, scheduled: null, queued: null, sending: null, canceled: 'failed',
  sent: 'sent', delivered: 'delivered', read: 'delivered', undelivered: 'failed', failed: 'failed',
};

export class TwilioConnector extends HttpCarrierConnector {
  readonly #s: TwilioConnectorSettings;
  readonly #client: twilio.Twilio;

  constructor(settings: TwilioConnectorSettings, deps: HttpConnectorDeps) {
    super(settings.id, deps);
    this.#s = settings;
    const timeout = settings.timeoutMs ?? 10_000;
    this.#client = twilio(settings.accountSid, settings.authToken, {
      autoRetry: false, timeout,
      ...(settings.apiBaseUrl ? { httpClient: new BaseUrlClient(settings.apiBaseUrl, timeout) } : {}),
    });
  }

  protected async submit(m: MediaMessage): Promise<string> {
    try {
      const created = await this.#client.messages.create({
        to: m.to,
        ...(this.#s.messagingServiceSid ? { messagingServiceSid: this.#s.messagingServiceSid } : { from: m.from }),
        ...(m.body ? { body: m.body } : {}),
        ...(m.mediaUrls.length > 0 ? { mediaUrl: m.mediaUrls } : {}),
        statusCallback: this.callbacks.status,
      });
      return created.sid;
    } catch (e) {
      if (e instanceof twilio.RestException) {
        throw failureOf(e.status, e.code ? `TWILIO_${e.code}` : `TWILIO_HTTP_${e.status}`, `Twilio answered ${e.status}: ${e.message}`);
      }
      const status = (e as { response?: { status?: number } }).response?.status;
      if (typeof status === 'number') throw failureOf(status, `TWILIO_HTTP_${status}`, `Twilio answered ${status}`);
      throw e;
    }
  }
}

/** Verifies a Twilio callback with the SDK's `validateRequest` (HMAC-SHA1 of the URL and the sorted form fields). */
export function verifyTwilioCallback(authToken: string, req: CarrierCallbackRequest): VerifiedCallback | null {
  const signature = headerOf(req.headers, 'x-twilio-signature');
  if (!signature) return null;
  const form = Object.fromEntries(new URLSearchParams(req.rawBody));
  // Repeated fields (MediaUrl… are numbered, so none in practice) keep their first value.
  if (!twilio.validateRequest(authToken, signature, req.url, form)) return null;
  const key = `twilio:${createHash('sha256').update(signature).update('\n').update(req.rawBody).digest('hex')}`;
  if (req.event === 'status') {
    const sid = form.MessageSid ?? form.SmsSid;
    const status = form.MessageStatus ?? form.SmsStatus;
    if (!sid || !status) throw new VendorFailure('TWILIO_BAD_CALLBACK', 'A status callback without MessageSid or MessageStatus', 'permanent');
    const mapped = STATUSES[status] ?? null;
    return {
      key,
      events: [{ kind: 'status', providerMessageId: sid, status: mapped, ...(mapped === 'failed' ? { errorCode: form.ErrorCode ? `TWILIO_${form.ErrorCode}` : `TWILIO_${status.toUpperCase()}` } : {}) }],
    };
  }
  const media = Number(form.NumMedia ?? 0);
  const mediaUrls = Array.from({ length: Number.isFinite(media) ? Math.min(media, 10) : 0 }, (_v, i) => form[`MediaUrl${i}`]).filter((u): u is string => !!u);
  return {
    key,
    events: [{ kind: 'inbound', providerMessageId: form.MessageSid ?? form.SmsSid ?? null, from: form.From ?? '', to: form.To ?? '', body: form.Body ?? '', mediaUrls }],
  };
}
