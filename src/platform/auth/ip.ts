/**
 * Client addresses and IP allowlists. IPv4-mapped IPv6 (`::ffff:1.2.3.4`) is folded to IPv4 on
 * both sides, so an allowlist entry matches however the socket reports the address.
 * `X-Forwarded-For` is honoured only when the direct peer is a configured trusted proxy.
 */
import net from 'node:net';

export function normalizeIp(raw: string): string {
  let ip = raw.trim();
  if (ip.startsWith('[')) ip = ip.slice(1, ip.indexOf(']'));
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(ip)) return ip.slice(0, ip.lastIndexOf(':'));
  return ip.toLowerCase();
}

export type CidrEntry = { address: string; prefix: number; family: 'ipv4' | 'ipv6' };

/** Parses `1.2.3.4`, `10.0.0.0/8`, `2001:db8::/32`, `::ffff:10.0.0.0/104`; undefined when invalid. */
export function parseCidr(entry: string): CidrEntry | undefined {
  const [addrPart, prefixPart, ...rest] = entry.trim().split('/');
  if (rest.length > 0 || !addrPart) return undefined;
  let address = addrPart.toLowerCase();
  let family = net.isIPv4(address) ? 'ipv4' : net.isIPv6(address) ? 'ipv6' : undefined;
  if (!family) return undefined;
  const max = family === 'ipv4' ? 32 : 128;
  if (prefixPart !== undefined && !/^\d{1,3}$/.test(prefixPart)) return undefined;
  let prefix = prefixPart === undefined ? max : Number(prefixPart);
  if (prefix > max) return undefined;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (family === 'ipv6' && mapped && prefix >= 96) {
    address = mapped[1]!;
    family = 'ipv4';
    prefix -= 96;
  }
  return { address, prefix, family: family as 'ipv4' | 'ipv6' };
}

export function buildBlockList(entries: readonly string[]): net.BlockList {
  const list = new net.BlockList();
  for (const e of entries) {
    const c = parseCidr(e);
    if (c) list.addSubnet(c.address, c.prefix, c.family);
  }
  return list;
}

export function ipMatches(list: net.BlockList, ip: string): boolean {
  const n = normalizeIp(ip);
  const family = net.isIPv4(n) ? 'ipv4' : net.isIPv6(n) ? 'ipv6' : undefined;
  return family ? list.check(n, family) : false;
}

/** The client's address: the socket peer, or the right-most untrusted X-Forwarded-For hop behind trusted proxies. */
export function clientIp(remoteAddress: string | undefined, forwardedFor: string | undefined, trusted: net.BlockList, hasTrusted: boolean): string | undefined {
  if (!remoteAddress) return undefined;
  let ip = normalizeIp(remoteAddress);
  if (!forwardedFor || !hasTrusted || !ipMatches(trusted, ip)) return ip;
  const hops = forwardedFor.split(',').map((h) => normalizeIp(h)).filter((h) => net.isIP(h) !== 0);
  for (let i = hops.length - 1; i >= 0; i--) {
    ip = hops[i]!;
    if (!ipMatches(trusted, ip)) return ip;
  }
  return ip;
}
