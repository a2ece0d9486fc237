/**
 * API key material: `svc_<mode>_sk_` + 40 base62 characters. Only an HMAC-SHA256 keyed with
 * APP_SECRET is stored, so a database dump alone does not let anyone test guesses offline.
 */
import { createHmac, createSecretKey, randomInt, type KeyObject } from 'node:crypto';
import type { Mode } from '../db/tenant.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const API_KEY_PATTERN = /^svc_(live|test)_sk_[0-9A-Za-z]{40}$/;

export function keyPrefix(mode: Mode): string {
  return `svc_${mode}_sk_`;
}

export function generateApiKey(mode: Mode): string {
  let body = '';
  for (let i = 0; i < 40; i++) body += BASE62[randomInt(62)];
  return keyPrefix(mode) + body;
}

let hmacKey: { secret: string; key: KeyObject } | undefined;

/** HMAC-SHA256 of `key` under `secret`, hex. The secret's KeyObject is made once, not per request. */
export function hashApiKey(secret: string, key: string): string {
  if (hmacKey?.secret !== secret) hmacKey = { secret, key: createSecretKey(Buffer.from(secret, 'utf8')) };
  return createHmac('sha256', hmacKey.key).update(key).digest('hex');
}

export function modeOfKey(key: string): Mode | undefined {
  const m = API_KEY_PATTERN.exec(key);
  return m ? (m[1] as Mode) : undefined;
}
