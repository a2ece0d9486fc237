/**
 * `X-Twilio-Signature`: base64 HMAC-SHA1, keyed with the auth token, of the full URL followed by
 * every POST parameter's name and value, names sorted (a repeated name once per distinct value,
 * values sorted),
 * as Twilio computes it and `twilio.validateRequest` checks it.
 */
import { createHmac } from 'node:crypto';

export function twilioSignature(authToken: string, url: string, params: URLSearchParams | Record<string, string | string[]>): string {
  const entries = params instanceof URLSearchParams ? groupParams(params) : params;
  let data = url;
  for (const name of Object.keys(entries).sort()) {
    const value = entries[name]!;
    for (const v of Array.isArray(value) ? [...new Set(value)].sort() : [value]) data += name + v;
  }
  return createHmac('sha1', authToken).update(Buffer.from(data, 'utf8')).digest('base64');
}

function groupParams(params: URLSearchParams): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of params) (out[k] ??= []).push(v);
  return out;
}
