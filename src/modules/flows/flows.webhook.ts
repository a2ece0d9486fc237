/**
 * The webhook trigger's signature (`X-Provider-Signature` of `POST /v1/providers/flows/callbacks`):
 *
 *   X-Provider-Signature: t=<unix seconds>,flow=<flow id>,id=<delivery id>,v1=<hex HMAC-SHA256>
 *
 * The HMAC is of `<delivery id>.<t>.<raw body>` (the content the service's own outgoing webhooks
 * sign in their Standard Webhooks signature: `webhook-id.webhook-timestamp.body`), keyed with the
 * flow's webhook secret (the whole `whsec_…` string, as for `X-Service-Signature`), in hex as
 * Stripe's `v1`. Elements are comma-separated `key=value` in any order; several `v1` may be given
 * (one must match); unknown keys are ignored. A call signed further than the tolerance from now is
 * refused, and a delivery id starts at most one execution of the flow (flows/executions.service.ts).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ServiceError } from '../../platform/errors.ts';

export const SIGNATURE_FORMAT = 't=<unix seconds>,flow=<flow id>,id=<delivery id>,v1=<hex HMAC-SHA256 of "<delivery id>.<t>.<raw body>" keyed with the flow\'s webhook secret>';

export type WebhookSignature = { timestamp: number; flowId: string; deliveryId: string; signatures: string[] };

const DELIVERY_ID = /^[\x21-\x2b\x2d-\x3c\x3e-\x7e]{1,200}$/; // printable ASCII but `,` and `=`
const FLOW_ID = /^[a-z]{2,6}_[0-9a-z]{1,64}$/;

const unauthorized = (message: string, details: Record<string, unknown> = {}) =>
  new ServiceError('UNAUTHORIZED', message, { header: 'X-Provider-Signature', ...details });

/** Reads the header (its format only); throws UNAUTHORIZED when it is missing or malformed. */
export function parseWebhookSignature(header: string | undefined): WebhookSignature {
  const malformed = () => unauthorized(`X-Provider-Signature must be ${SIGNATURE_FORMAT}`, { expected: SIGNATURE_FORMAT });
  if (!header || header.length > 2048) throw malformed();
  const values = new Map<string, string[]>();
  for (const part of header.split(',')) {
    const at = part.indexOf('=');
    if (at <= 0) throw malformed();
    const key = part.slice(0, at).trim();
    values.set(key, [...(values.get(key) ?? []), part.slice(at + 1).trim()]);
  }
  const one = (key: string) => (values.get(key)?.length === 1 ? values.get(key)![0]! : undefined);
  const t = one('t');
  const flowId = one('flow');
  const deliveryId = one('id');
  const signatures = values.get('v1') ?? [];
  if (!t || !/^\d{1,12}$/.test(t) || !flowId || !FLOW_ID.test(flowId) || !deliveryId || !DELIVERY_ID.test(deliveryId)) throw malformed();
  if (signatures.length === 0 || signatures.length > 8 || !signatures.every((s) => /^[0-9a-f]{64}$/.test(s))) throw malformed();
  return { timestamp: Number(t), flowId, deliveryId, signatures };
}

/** The hex `v1` of a call (what a sender computes). */
export function webhookSignatureOf(secret: string, deliveryId: string, timestamp: number, rawBody: string): string {
  return createHmac('sha256', secret).update(`${deliveryId}.${timestamp}.${rawBody}`).digest('hex');
}

/**
 * Checks a parsed signature against the flow's secret, then its timestamp against `now`: one `v1`
 * must match (constant-time), and the signed time must be within `toleranceSeconds` of now.
 */
export function checkWebhookSignature(sig: WebhookSignature, secret: string, rawBody: string, now: Date, toleranceSeconds: number): void {
  const expected = Buffer.from(webhookSignatureOf(secret, sig.deliveryId, sig.timestamp, rawBody), 'hex');
  if (!sig.signatures.some((s) => timingSafeEqual(expected, Buffer.from(s, 'hex')))) {
    throw unauthorized(`X-Provider-Signature does not match: sign "<delivery id>.<t>.<raw body>" with the flow's webhook secret (${SIGNATURE_FORMAT})`);
  }
  const skew = Math.round(now.getTime() / 1000) - sig.timestamp;
  if (Math.abs(skew) > toleranceSeconds) {
    throw unauthorized(`X-Provider-Signature was signed ${Math.abs(skew)} s ${skew > 0 ? 'ago' : 'ahead of now'}; calls are accepted within ${toleranceSeconds} s of their signed time (t)`,
      { timestamp: sig.timestamp, tolerance_seconds: toleranceSeconds });
  }
}
