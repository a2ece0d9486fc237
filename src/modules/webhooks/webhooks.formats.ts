/**
 * Per-resource callbacks in another surface's wire format. A resource's callback URL (a message's
 * `webhook_url`, a number's `sms_webhook_url`, a call's `webhook_url`) whose fragment is
 * `#format=<name>` (then `&<options>`, what the format reads: which events a call reports, say)
 * is delivered in the format registered under that name instead of the native
 * signed JSON: the Twilio-compatible surface stores the StatusCallback and SmsUrl it is given with
 * `#format=twilio`, so they are sent form-encoded with `X-Twilio-Signature`. A fragment is never
 * sent over HTTP: the attempt goes to the URL without it. Fan-out, retries, the dead-letter queue
 * and the deliveries' log are the same for every format (webhooks.fanout.ts, webhooks.delivery.ts).
 */
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { OutboxEvent, RelayTx } from '../../platform/events/relay.ts';

export type CallbackFormat = {
  /** The callback's body for `event`, or null when this format sends no callback for it. */
  render(tx: RelayTx, event: OutboxEvent, options: URLSearchParams): Promise<string | null>;
  /** Headers of one attempt of `payload` to `url` (the fragment removed): its signature. */
  headers(tenant: TenantRef, url: string, payload: string): Promise<Record<string, string>>;
  /** The body's Content-Type. */
  contentType: string;
  /**
   * What the customer's endpoint (`url`, the fragment removed) answered to a successful (2xx) attempt, for a format whose
   * callbacks are answered with instructions (Twilio's SmsUrl answers TwiML). Runs before the
   * attempt is recorded, so a crash in between runs it again with the same `deliveryId`: what it
   * does must be keyed by it (an Idempotency-Key per instruction). Its failure is the customer's
   * document, which the format reports itself; the delivery still succeeded.
   */
  answered?(tenant: TenantRef, deliveryId: string, url: string, payload: string, answer: { status: number; contentType: string | undefined; body: string }): Promise<void>;
};

const MARKER = /#format=([a-z0-9-]+)(?:&([^#]*))?$/;

/** `url` marked to be delivered in format `name` with `options` (any fragment it had replaced). */
export function withCallbackFormat(url: string, name: string, options: Record<string, string> = {}): string {
  const hash = url.indexOf('#');
  const extra = new URLSearchParams(options).toString();
  return `${hash < 0 ? url : url.slice(0, hash)}#format=${name}${extra ? `&${extra}` : ''}`;
}

/** The URL a callback URL names, without its format marker (what a surface shows its client). */
export function withoutCallbackFormat(url: string): string {
  return url.replace(MARKER, '');
}

export class CallbackFormats {
  readonly #byName = new Map<string, CallbackFormat>();

  add(name: string, format: CallbackFormat): void {
    this.#byName.set(name, format);
  }

  /** The format a callback URL is marked with (and the URL to post to), or undefined: native. */
  of(url: string): { format: CallbackFormat; target: string; options: URLSearchParams } | undefined {
    const m = MARKER.exec(url);
    const format = m ? this.#byName.get(m[1]!) : undefined;
    return format ? { format, target: url.slice(0, m!.index), options: new URLSearchParams(m![2] ?? '') } : undefined;
  }
}
