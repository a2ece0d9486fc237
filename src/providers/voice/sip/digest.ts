/**
 * HTTP digest authentication as SIP uses it (RFC 3261 §22, RFC 2617; RFC 8760 adds SHA-256):
 * answers a `WWW-Authenticate` (401) or `Proxy-Authenticate` (407) challenge with the
 * `Authorization` / `Proxy-Authorization` value for a request.
 */
import { createHash, randomBytes } from 'node:crypto';

export type DigestChallenge = { realm: string; nonce: string; algorithm: string; qop: string[]; opaque: string | undefined };

/** Parses `Digest realm="x", nonce="y", qop="auth,auth-int", algorithm=MD5, opaque="z"`. */
export function parseChallenge(value: string): DigestChallenge | undefined {
  const m = /^\s*Digest\s+(.*)$/is.exec(value);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  for (const p of m[1]!.matchAll(/([a-zA-Z-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]+))/g)) params[p[1]!.toLowerCase()] = p[2] ?? p[3] ?? '';
  if (params.realm === undefined || params.nonce === undefined) return undefined;
  return {
    realm: params.realm, nonce: params.nonce, algorithm: (params.algorithm ?? 'MD5').toUpperCase(),
    qop: (params.qop ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean), opaque: params.opaque,
  };
}

const HASHES: Record<string, string> = { MD5: 'md5', 'SHA-256': 'sha256' };

export function supported(challenge: DigestChallenge): boolean {
  return challenge.algorithm in HASHES && (challenge.qop.length === 0 || challenge.qop.includes('auth'));
}

/**
 * The credentials for one request. `cnonce` and `nc` are inputs so a test can reproduce a
 * capture; by default a random cnonce and nonce count 1.
 */
export function digestAuthorization(input: {
  challenge: DigestChallenge; method: string; uri: string; username: string; password: string; cnonce?: string; nc?: number;
}): string {
  const { challenge: c, method, uri, username, password } = input;
  const algo = HASHES[c.algorithm];
  if (!algo) throw new Error(`digest algorithm ${c.algorithm} is not supported`);
  const h = (s: string) => createHash(algo).update(s).digest('hex');
  const ha1 = h(`${username}:${c.realm}:${password}`);
  const ha2 = h(`${method}:${uri}`);
  const parts = [`username="${username}"`, `realm="${c.realm}"`, `nonce="${c.nonce}"`, `uri="${uri}"`];
  if (c.qop.includes('auth')) {
    const cnonce = input.cnonce ?? randomBytes(8).toString('hex');
    const nc = (input.nc ?? 1).toString(16).padStart(8, '0');
    parts.push(`response="${h(`${ha1}:${c.nonce}:${nc}:${cnonce}:auth:${ha2}`)}"`, 'qop=auth', `nc=${nc}`, `cnonce="${cnonce}"`);
  } else {
    parts.push(`response="${h(`${ha1}:${c.nonce}:${ha2}`)}"`);
  }
  parts.push(`algorithm=${c.algorithm}`);
  if (c.opaque !== undefined) parts.push(`opaque="${c.opaque}"`);
  return `Digest ${parts.join(', ')}`;
}
