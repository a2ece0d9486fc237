/**
 * Which IP addresses an outbound request (webhook delivery) may connect to. Anything that is not
 * a public unicast destination is blocked: loopback, private, CGNAT, link-local (cloud metadata at
 * 169.254.169.254), unique-local, multicast, reserved and documentation ranges, and every IPv6
 * spelling that embeds such an IPv4 address (mapped, translated, NAT64, 6to4). Unknown input is
 * treated as blocked, so a parsing gap fails closed.
 */
import net from 'node:net';

const BLOCKED_V4: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation (TEST-NET-1)
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, including 255.255.255.255 broadcast
];

const BLOCKED_V6: readonly (readonly [string, number])[] = [
  ['::', 96], // unspecified, loopback and deprecated IPv4-compatible ::a.b.c.d
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): a path into a private network
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF special purpose, including Teredo 2001::/32 (tunnels to arbitrary IPv4)
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
  ['fc00::', 7], // unique-local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // deprecated site-local
  ['ff00::', 8], // multicast
];

const blockedV4 = new net.BlockList();
for (const [address, prefix] of BLOCKED_V4) blockedV4.addSubnet(address, prefix, 'ipv4');

const blockedV6 = new net.BlockList();
for (const [address, prefix] of BLOCKED_V6) blockedV6.addSubnet(address, prefix, 'ipv6');

/** Global unicast: the only IPv6 space that holds public destinations today. */
const globalUnicastV6 = new net.BlockList();
globalUnicastV6.addSubnet('2000::', 3, 'ipv6');

const loopback = new net.BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** `[::1]` → `::1`, `fe80::1%eth0` → `fe80::1`. */
function bareIp(ip: string): string {
  let s = ip.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone !== -1) s = s.slice(0, zone);
  return s.toLowerCase();
}

/** The eight 16-bit groups of a valid IPv6 address (which `net.isIPv6` has already accepted). */
function ipv6Groups(ip: string): number[] {
  let text = ip;
  const tail: number[] = [];
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    tail.push((a << 8) | b, (c << 8) | d);
    text = text.slice(0, dotted.index);
    // `::1.2.3.4` leaves `::`, `::ffff:1.2.3.4` leaves `::ffff:`; a lone trailing ':' is the separator.
    if (text.endsWith(':') && !text.endsWith('::')) text = text.slice(0, -1);
  }
  const parse = (part: string): number[] => (part === '' ? [] : part.split(':').map((h) => parseInt(h, 16)));
  const gap = text.indexOf('::');
  let head: number[];
  if (gap === -1) {
    head = parse(text);
  } else {
    const left = parse(text.slice(0, gap));
    const right = parse(text.slice(gap + 2));
    const zeros = 8 - tail.length - left.length - right.length;
    head = [...left, ...new Array<number>(zeros).fill(0), ...right];
  }
  return [...head, ...tail];
}

function ipv4FromGroups(high: number, low: number): string {
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

/**
 * The IPv4 address an IPv6 address stands for, when it is one of the forms that routes to (or is
 * treated by the OS as) that IPv4 address: mapped ::ffff:a.b.c.d, translated ::ffff:0:a.b.c.d,
 * NAT64 64:ff9b::a.b.c.d, and 6to4 2002:AABB:CCDD::.
 */
function embeddedIpv4(groups: readonly number[]): string | undefined {
  const g = (i: number): number => groups[i] ?? 0;
  const zeroUpTo = (n: number): boolean => groups.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(5) && g(5) === 0xffff) return ipv4FromGroups(g(6), g(7));
  if (zeroUpTo(4) && g(4) === 0xffff && g(5) === 0) return ipv4FromGroups(g(6), g(7));
  if (g(0) === 0x64 && g(1) === 0xff9b && groups.slice(2, 6).every((x) => x === 0)) return ipv4FromGroups(g(6), g(7));
  if (g(0) === 0x2002) return ipv4FromGroups(g(1), g(2));
  return undefined;
}

/** True when an outbound connection to `ip` must be refused. Accepts `[v6]` and zone ids. */
export function isBlockedAddress(ip: string): boolean {
  const bare = bareIp(ip);
  const family = net.isIP(bare);
  if (family === 4) return blockedV4.check(bare, 'ipv4');
  if (family !== 6) return true;
  const v4 = embeddedIpv4(ipv6Groups(bare));
  // Mapped, translated and NAT64 forms are the IPv4 address itself; a 6to4 address is delivered by
  // a relay to its embedded IPv4 address. Either way the IPv4 verdict is the verdict.
  if (v4 !== undefined) return blockedV4.check(v4, 'ipv4');
  if (blockedV6.check(bare, 'ipv6')) return true;
  return !globalUnicastV6.check(bare, 'ipv6');
}

/** 127.0.0.0/8 or ::1 — what the WEBHOOKS_ALLOW_LOOPBACK switch may let through. */
export function isLoopbackAddress(ip: string): boolean {
  const bare = bareIp(ip);
  const family = net.isIP(bare);
  if (family === 0) return false;
  return loopback.check(bare, family === 4 ? 'ipv4' : 'ipv6');
}
