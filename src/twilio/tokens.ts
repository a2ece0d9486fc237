/**
 * Auth tokens that can sign callbacks. An auth token is an API key of this service, stored only
 * hashed; a Twilio callback must be signed with it (`X-Twilio-Signature` is keyed with the auth
 * token, and the customer's `twilio.validateRequest` checks it with theirs). So the keys made by
 * `admin twilio credentials` are not random: their material is an HMAC-SHA512 of the key's id
 * under APP_SECRET, encoded as a key (`svc_<mode>_sk_` + 40 base62 characters). The database still
 * holds only the key's hash; the service re-derives the token when it signs. Whoever holds
 * APP_SECRET could derive these tokens, as they could open every sealed secret (webhook signing
 * secrets) and test key guesses against the hashes: APP_SECRET is already the root of them all.
 *
 * An account's callbacks are signed with its newest unrevoked derived key (the last credentials
 * issued; revoking it moves to the one before). Other keys authenticate on this surface like any
 * key, but an account without a derived key sends its Twilio-format callbacks unsigned.
 */
import { createHmac } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Mode, TenantRef } from '../platform/db/tenant.ts';
import { sqlClient, sqlQuery } from '../platform/db/sql.ts';
import { hashApiKey, keyPrefix } from '../platform/auth/apiKeys.ts';
import type { Role } from '../platform/tenancy/tenancy.entities.ts';
import { accountSid, toSid } from './sids.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** The auth token of the API key `keyId` (derived, never stored). */
export function derivedAuthToken(appSecret: string, keyId: string, mode: Mode): string {
  let v = BigInt(`0x${createHmac('sha512', appSecret).update(`twilio-auth-token-v1:${keyId}`).digest('hex')}`);
  let body = '';
  for (let i = 0; i < 40; i++) {
    body += BASE62[Number(v % 62n)];
    v /= 62n;
  }
  return keyPrefix(mode) + body;
}

/** How long an account's signing token is remembered (a revocation takes effect after it). */
const CACHE_MS = 5_000;

export class TwilioTokens {
  readonly #orm: MikroORM;
  readonly #appSecret: string;
  readonly #cache = new Map<string, { token: string | null; at: number }>();

  constructor(deps: { orm: MikroORM; appSecret: string }) {
    this.#orm = deps.orm;
    this.#appSecret = deps.appSecret;
  }

  /** The token the account's callbacks are signed with, or null when it has no derived key. */
  async signingToken(tenant: TenantRef): Promise<string | null> {
    const key = `${tenant.organizationId}:${tenant.mode}`;
    const cached = this.#cache.get(key);
    if (cached && Date.now() - cached.at < CACHE_MS) return cached.token;
    const rows = await sqlQuery<{ id: string; key_hash: string }>(sqlClient(this.#orm),
      'select id, key_hash from api_keys where organization_id = $1 and mode = $2 and revoked_at is null order by created_at desc, id desc',
      [tenant.organizationId, tenant.mode]);
    let token: string | null = null;
    for (const r of rows) {
      const candidate = derivedAuthToken(this.#appSecret, r.id, tenant.mode);
      if (hashApiKey(this.#appSecret, candidate) === r.key_hash) {
        token = candidate;
        break;
      }
    }
    if (this.#cache.size > 10_000) this.#cache.clear();
    this.#cache.set(key, { token, at: Date.now() });
    return token;
  }
}

/** Twilio credentials for an account: a new API key whose material is derived (its auth token). */
export async function issueTwilioCredentials(
  settings: { adminCreateApiKey(org: string, mode: Mode, role: Role, name: string | null, material?: (id: string) => string): Promise<{ key: string; apiKey: { id: string } }> },
  appSecret: string, organizationId: string, mode: Mode, role: Role,
) {
  const r = await settings.adminCreateApiKey(organizationId, mode, role, 'Twilio auth token', (id) => derivedAuthToken(appSecret, id, mode));
  return { account_sid: accountSid(organizationId, mode), auth_token: r.key, api_key_sid: toSid(r.apiKey.id), role, mode, organization_id: organizationId };
}
