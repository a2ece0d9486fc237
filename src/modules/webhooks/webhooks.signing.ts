/**
 * Webhook signatures. Two schemes on every delivery:
 * - `X-Service-Signature`: hex HMAC-SHA256 of the raw body, keyed with the endpoint's signing
 *   secret (the whole `whsec_…` string as UTF-8), as the specification describes.
 * - Standard Webhooks: `webhook-id`, `webhook-timestamp` (Unix seconds) and
 *   `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed with the base64
 *   bytes after `whsec_`, so receivers can reject replays by timestamp and id.
 */
import { createHmac, randomBytes } from 'node:crypto';

export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export function serviceSignature(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

export function standardSignature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export function signedHeaders(secret: string, deliveryId: string, now: Date, body: string): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    'X-Service-Signature': serviceSignature(secret, body),
    'webhook-id': deliveryId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': standardSignature(secret, deliveryId, timestamp, body),
  };
}
