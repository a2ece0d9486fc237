/** Webhook tool calls are signed like webhook deliveries: `X-Service-Signature` = hex HMAC-SHA256 of the raw body. */
import { createHmac, randomBytes } from 'node:crypto';

export function newToolSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export function toolSignature(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}
