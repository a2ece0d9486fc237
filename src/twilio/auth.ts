/**
 * HTTP Basic as Twilio clients send it, mapped to this service's credentials: the username is the
 * account SID of an organization in one mode (or the SID of one of its API keys), the password an
 * API key of that organization and mode (the "auth token" or the API key's secret). The key is
 * authenticated as on the native surfaces (hashed lookup, revocation, IP allowlist); the username
 * must then name that key's account or that very key, else 401 20003.
 */
import type { Scope } from '../platform/auth/scope.ts';
import { authenticationError } from './errors.ts';
import { accountSid, toSid } from './sids.ts';

export type BasicCredentials = { username: string; password: string };

/** The username and password of an `Authorization: Basic …` header, or undefined. */
export function parseBasic(header: string | undefined): BasicCredentials | undefined {
  const m = header ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  if (colon < 0) return undefined;
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}

/** Throws 20003 unless `username` names the scope's account or its API key. */
export function checkUsername(username: string, scope: Scope): void {
  if (username === accountSid(scope.organizationId, scope.mode)) return;
  if (scope.actor.type === 'api_key' && username === toSid(scope.actor.id)) return;
  throw authenticationError();
}
