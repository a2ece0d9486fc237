/**
 * The SSRF vetting of safeHttp.ts: the static check of a webhook URL (scheme, credentials, port,
 * literal addresses, local and malformed names) and the one resolution whose every address is
 * vetted before a delivery connects (the request side, pinned to the vetted address, is in safeHttp.ts).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import net from 'node:net';
import { isBlockedAddress, isLoopbackAddress } from './addresses.ts';

/** `allowLoopback` is the WEBHOOKS_ALLOW_LOOPBACK=1 switch for local development and tests only. */
export type UrlPolicy = { allowLoopback: boolean };

export type VettedAddress = { address: string; family: 4 | 6 };

/** Resolves a host name to all of its addresses (dns.lookup with `all: true` by default). */
export type HostLookup = (host: string) => Promise<VettedAddress[]>;

export type SafeHttpErrorKind = 'blocked_address' | 'invalid_url' | 'timeout' | 'connection' | 'redirect' | 'too_large';

export class SafeHttpError extends Error {
  readonly kind: SafeHttpErrorKind;

  constructor(kind: SafeHttpErrorKind, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SafeHttpError';
    this.kind = kind;
  }
}

/** The hosts the loopback switch applies to, as WHATWG URL spells them (`hostname`) … */
const LOOPBACK_URL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
/** … and as they are resolved (brackets removed). */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '::1']);

/** Names that by definition stay on the machine or the local network, whatever DNS says. */
const LOCAL_NAME = /(^|\.)(localhost|local|localdomain|internal|home\.arpa)$/;
const DNS_LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

type Refusal = { ok: false; reason: string; kind: 'invalid_url' | 'blocked_address' };
type UrlVerdict = { ok: true; url: URL } | Refusal;

function refuse(kind: 'invalid_url' | 'blocked_address', reason: string): Refusal {
  return { ok: false, reason, kind };
}

function hostnameProblem(hostname: string, policy: UrlPolicy): string | undefined {
  const name = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (name.length === 0 || name.length > 253) return 'host name is empty or too long';
  const labels = name.split('.');
  if (!labels.every((label) => DNS_LABEL.test(label))) return 'host name is not a valid DNS name';
  if (policy.allowLoopback && name === 'localhost') return undefined;
  if (LOCAL_NAME.test(name)) return 'host name points to a local network';
  if (labels.length < 2) return 'host name must be a fully qualified domain name';
  return undefined;
}

export function vetUrl(raw: string, policy: UrlPolicy): UrlVerdict {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('invalid_url', 'URL is not valid');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return refuse('invalid_url', 'URL must use https');
  if (url.username !== '' || url.password !== '') return refuse('invalid_url', 'URL must not contain credentials');
  // WHATWG URL has already folded 2130706433, 0x7f000001, 017700000001 and 127.1 into dotted
  // quads and compressed IPv6 (::ffff:127.0.0.1 → ::ffff:7f00:1), so `hostname` is what connects.
  const host = url.hostname;
  const loopbackDev = policy.allowLoopback && LOOPBACK_URL_HOSTS.has(host);
  if (url.protocol === 'http:') {
    if (!loopbackDev) return refuse('invalid_url', 'URL must use https');
    // An explicit port keeps the switch to local test receivers (http://127.0.0.1:<port>).
    if (url.port === '') return refuse('invalid_url', 'a loopback http URL needs an explicit port');
  }
  if (url.port === '0') return refuse('invalid_url', 'URL port is not valid');
  const refused = hostRefusal(host, policy, 'URL');
  return refused ?? { ok: true, url };
}

/**
 * The static host check of vetUrl (no DNS): a literal address must not be blocked (the loopback
 * switch lets 127.0.0.1 and [::1] through), a name must be a fully qualified, non-local DNS name.
 * `host` as WHATWG URL spells it: IPv6 in brackets, IPv4 folded to a dotted quad.
 */
function hostRefusal(host: string, policy: UrlPolicy, what: string): Refusal | undefined {
  const loopbackDev = policy.allowLoopback && LOOPBACK_URL_HOSTS.has(host);
  const literal = host.startsWith('[') ? host.slice(1, -1) : net.isIPv4(host) ? host : undefined;
  if (literal !== undefined) {
    return !loopbackDev && isBlockedAddress(literal) ? refuse('blocked_address', `${what} points to a private, loopback or reserved address`) : undefined;
  }
  const problem = hostnameProblem(host, policy);
  return problem ? refuse(host === 'localhost' || LOCAL_NAME.test(host) ? 'blocked_address' : 'invalid_url', problem) : undefined;
}

export type HostVerdict = { ok: true; host: string; loopback: boolean } | (Refusal & { loopback: boolean });

/**
 * The same static check for a bare host of another protocol (a SIP URI's host: a name, a dotted
 * quad or a bracketed IPv6 address), read the way WHATWG URL reads a host, so `127.1`,
 * `2130706433` and `0x7f.1` are the loopback address they stand for. `host` in the answer is that
 * canonical spelling; `loopback` says whether the host is a loopback one (for the switch's hint).
 */
export function vetHost(raw: string, policy: UrlPolicy): HostVerdict {
  const text = raw.trim();
  const inner = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  // Only a host: no port, credentials, path or zone (each would make URL read another host).
  if (!net.isIPv6(inner) && !/^[A-Za-z0-9.-]+$/.test(inner)) return { ...refuse('invalid_url', 'host is not valid'), loopback: false };
  let host: string;
  try {
    host = new URL(`http://${net.isIPv6(inner) ? `[${inner}]` : inner}/`).hostname;
  } catch {
    return { ...refuse('invalid_url', 'host is not valid'), loopback: false };
  }
  const loopback = LOOPBACK_URL_HOSTS.has(host) || (net.isIPv4(host) && host.startsWith('127.')) || (host.startsWith('[') && isLoopbackAddress(host));
  const refused = hostRefusal(host, policy, 'host');
  return refused ? { ...refused, loopback } : { ok: true, host, loopback };
}

/** What a refused loopback URL's error details say (in test mode the operator can allow them). */
export const LOOPBACK_HINT = {
  allow_loopback: 'WEBHOOKS_ALLOW_LOOPBACK=1',
  hint: 'http://127.0.0.1:<port> and http://localhost:<port> are accepted when the server runs with WEBHOOKS_ALLOW_LOOPBACK=1 (local development and tests only)',
} as const;

function isLoopbackTarget(raw: string): boolean {
  try {
    const { hostname } = new URL(raw);
    return LOOPBACK_URL_HOSTS.has(hostname) || (net.isIPv4(hostname) && hostname.startsWith('127.'));
  } catch {
    return false;
  }
}

/**
 * Static checks at endpoint creation (and again before each delivery); no DNS. A refused loopback
 * URL (when the switch is off) carries `details` naming WEBHOOKS_ALLOW_LOOPBACK.
 */
export function checkWebhookUrl(raw: string, policy: UrlPolicy): { ok: true; url: URL } | { ok: false; reason: string; details: Record<string, string> } {
  const verdict = vetUrl(raw, policy);
  if (verdict.ok) return verdict;
  return { ok: false, reason: verdict.reason, details: !policy.allowLoopback && isLoopbackTarget(raw) ? { ...LOOPBACK_HINT } : {} };
}

async function systemLookup(host: string): Promise<VettedAddress[]> {
  const found = await dnsLookup(host, { all: true, order: 'verbatim' });
  return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
}

/**
 * Resolves `host` once and refuses it when ANY address is blocked (a name with one public and one
 * private address could otherwise be steered to the private one). Returns the first address.
 */
export async function resolveAndVet(host: string, policy: UrlPolicy, lookup: HostLookup = systemLookup): Promise<VettedAddress> {
  const bare = (host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host).toLowerCase();
  const literal = net.isIP(bare);
  let addresses: VettedAddress[];
  if (literal !== 0) {
    addresses = [{ address: bare, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await lookup(bare);
    } catch (e) {
      throw new SafeHttpError('connection', `could not resolve ${host}`, { cause: e });
    }
  }
  const first = addresses[0];
  if (!first) throw new SafeHttpError('connection', `${host} has no addresses`);
  const loopbackDev = policy.allowLoopback && LOOPBACK_HOSTS.has(bare);
  for (const { address } of addresses) {
    if (isBlockedAddress(address) && !(loopbackDev && isLoopbackAddress(address))) {
      throw new SafeHttpError('blocked_address', `${host} resolves to a blocked address`);
    }
  }
  return first;
}
