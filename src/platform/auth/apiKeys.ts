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

let hmacKey: { secret: string; key: KeyObject; hashes: Map<string, string> } | undefined;
/** Hashes remembered per secret: every request presents its key, and its HMAC was ~4 % of a sandbox call's CPU. */
const HASHES_KEPT = 10_000;

/**
 * HMAC-SHA256 of `key` under `secret`, hex. The secret's KeyObject is made once, not per request,
 * and the last HASHES_KEPT keys' hashes are remembered (the least recently presented goes first).
 */
export function hashApiKey(secret: string, key: string): string {
  if (hmacKey?.secret !== secret) hmacKey = { secret, key: createSecretKey(Buffer.from(secret, 'utf8')), hashes: new Map() };
  const { hashes } = hmacKey;
  let hash = hashes.get(key);
  if (hash !== undefined) {
    hashes.delete(key);
  } else {
    hash = createHmac('sha256', hmacKey.key).update(key).digest('hex');
    if (hashes.size >= HASHES_KEPT) hashes.delete(hashes.keys().next().value!);
  }
  hashes.set(key, hash);
  return hash;
}

export function modeOfKey(key: string): Mode | undefined {
  const m = API_KEY_PATTERN.exec(key);
  return m ? (m[1] as Mode) : undefined;
}
