/**
 * Webhook signatures. Two schemes on every delivery:
 * - `X-Service-Signature`: hex HMAC-SHA256 of the raw body, keyed with the endpoint's signing
 *   secret (the whole `whsec_…` string as UTF-8), as the specification describes.
 * - Standard Webhooks: `webhook-id`, `webhook-timestamp` (Unix seconds) and
 *   `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed with the base64
 *   bytes after `whsec_`, so receivers can reject replays by timestamp and id.
 */
import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** A secret's two HMAC keys, prepared once (a delivery worker signs with the same secrets over and over). */
export type SigningKeys = { service: KeyObject; standard: KeyObject };

export function signingKeys(secret: string): SigningKeys {
  return {
    service: createSecretKey(Buffer.from(secret, 'utf8')),
    standard: createSecretKey(Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64')),
  };
}

export function signedHeaders(secret: string | SigningKeys, deliveryId: string, now: Date, body: string): Record<string, string> {
  const keys = typeof secret === 'string' ? signingKeys(secret) : secret;
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    'X-Service-Signature': createHmac('sha256', keys.service).update(body).digest('hex'),
    'webhook-id': deliveryId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': `v1,${createHmac('sha256', keys.standard).update(`${deliveryId}.${timestamp}.${body}`).digest('base64')}`,
  };
}
