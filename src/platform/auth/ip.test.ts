import { describe, expect, it } from 'vitest';
import { buildBlockList, clientIp, ipMatches, normalizeIp, parseCidr } from './ip.ts';

describe('normalizeIp', () => {
  it('folds IPv4-mapped IPv6 to IPv4', () => {
    expect(normalizeIp('::ffff:1.2.3.4')).toBe('1.2.3.4');
    expect(normalizeIp('::FFFF:1.2.3.4')).toBe('1.2.3.4');
    expect(normalizeIp('[::ffff:10.0.0.1]')).toBe('10.0.0.1');
  });

  it('trims, strips brackets and ports, lower-cases IPv6', () => {
    expect(normalizeIp(' 1.2.3.4 ')).toBe('1.2.3.4');
    expect(normalizeIp('1.2.3.4:8080')).toBe('1.2.3.4');
    expect(normalizeIp('[2001:DB8::1]:443')).toBe('2001:db8::1');
    expect(normalizeIp('[::1]')).toBe('::1');
    expect(normalizeIp('2001:DB8::A')).toBe('2001:db8::a');
  });

  it('leaves plain addresses alone', () => {
    expect(normalizeIp('10.0.0.1')).toBe('10.0.0.1');
    expect(normalizeIp('::1')).toBe('::1');
    expect(normalizeIp('2001:db8::1')).toBe('2001:db8::1');
  });
});

describe('parseCidr', () => {
  it('parses single addresses as host ranges', () => {
    expect(parseCidr('1.2.3.4')).toEqual({ address: '1.2.3.4', prefix: 32, family: 'ipv4' });
    expect(parseCidr(' 1.2.3.4 ')).toEqual({ address: '1.2.3.4', prefix: 32, family: 'ipv4' });
    expect(parseCidr('2001:DB8::1')).toEqual({ address: '2001:db8::1', prefix: 128, family: 'ipv6' });
  });

  it('parses IPv4 and IPv6 CIDR ranges', () => {
    expect(parseCidr('10.0.0.0/8')).toEqual({ address: '10.0.0.0', prefix: 8, family: 'ipv4' });
    expect(parseCidr('0.0.0.0/0')).toEqual({ address: '0.0.0.0', prefix: 0, family: 'ipv4' });
    expect(parseCidr('192.168.1.0/24')).toEqual({ address: '192.168.1.0', prefix: 24, family: 'ipv4' });
    expect(parseCidr('2001:db8::/32')).toEqual({ address: '2001:db8::', prefix: 32, family: 'ipv6' });
    expect(parseCidr('::/0')).toEqual({ address: '::', prefix: 0, family: 'ipv6' });
  });

  it('folds IPv4-mapped IPv6 ranges to IPv4', () => {
    expect(parseCidr('::ffff:10.0.0.0/104')).toEqual({ address: '10.0.0.0', prefix: 8, family: 'ipv4' });
    expect(parseCidr('::FFFF:192.168.0.0/112')).toEqual({ address: '192.168.0.0', prefix: 16, family: 'ipv4' });
    expect(parseCidr('::ffff:1.2.3.4')).toEqual({ address: '1.2.3.4', prefix: 32, family: 'ipv4' });
  });

  it('rejects anything else', () => {
    for (const bad of [
      '', ' ', 'abc', 'localhost', '1.2.3', '1.2.3.4.5', '256.1.1.1', '1.2.3.4/', '1.2.3.4/33', '1.2.3.4/-1', '1.2.3.4/abc',
      '1.2.3.4/8/9', '1.2.3.4/1000', '/8', '2001:db8::/129', '2001:db8:::1', '1.2.3.4 /8', '1.2.3.4/ 8', '10.0.0.0/8 ,11.0.0.0/8',
    ]) {
      expect(parseCidr(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });
});

describe('ipMatches', () => {
  const list = buildBlockList(['10.0.0.0/8', '192.168.1.5', '2001:db8::/32', '::ffff:172.16.0.0/108', 'not-an-ip', '1.2.3.4/99']);

  it('matches addresses inside the ranges', () => {
    expect(ipMatches(list, '10.1.2.3')).toBe(true);
    expect(ipMatches(list, '10.255.255.255')).toBe(true);
    expect(ipMatches(list, '192.168.1.5')).toBe(true);
    expect(ipMatches(list, '2001:db8::1')).toBe(true);
    expect(ipMatches(list, '2001:DB8:ffff::1')).toBe(true);
    // ::ffff:172.16.0.0/108 is 172.16.0.0/12
    expect(ipMatches(list, '172.16.0.1')).toBe(true);
    expect(ipMatches(list, '172.31.255.254')).toBe(true);
  });

  it('matches IPv4-mapped client addresses against IPv4 entries', () => {
    expect(ipMatches(list, '::ffff:10.1.2.3')).toBe(true);
    expect(ipMatches(list, '::ffff:192.168.1.5')).toBe(true);
    expect(ipMatches(list, '::ffff:172.20.0.1')).toBe(true);
    expect(ipMatches(list, '::ffff:11.0.0.1')).toBe(false);
  });

  it('does not match addresses outside the ranges, or garbage', () => {
    expect(ipMatches(list, '11.0.0.1')).toBe(false);
    expect(ipMatches(list, '9.255.255.255')).toBe(false);
    expect(ipMatches(list, '192.168.1.6')).toBe(false);
    expect(ipMatches(list, '172.32.0.1')).toBe(false);
    expect(ipMatches(list, '2001:db9::1')).toBe(false);
    expect(ipMatches(list, '::1')).toBe(false);
    expect(ipMatches(list, '1.2.3.4')).toBe(false);
    expect(ipMatches(list, 'not-an-ip')).toBe(false);
    expect(ipMatches(list, '')).toBe(false);
  });

  it('an empty list matches nothing', () => {
    const empty = buildBlockList([]);
    expect(ipMatches(empty, '10.0.0.1')).toBe(false);
    expect(ipMatches(empty, '::1')).toBe(false);
  });
});

describe('clientIp', () => {
  const proxies = buildBlockList(['10.0.0.0/8', '::1']);
  const none = buildBlockList([]);

  it('is undefined without a socket address', () => {
    expect(clientIp(undefined, '203.0.113.7', proxies, true)).toBeUndefined();
  });

  it('is the normalized socket peer without trusted proxies, ignoring X-Forwarded-For', () => {
    expect(clientIp('::ffff:198.51.100.9', undefined, none, false)).toBe('198.51.100.9');
    expect(clientIp('198.51.100.9', '203.0.113.7', none, false)).toBe('198.51.100.9');
    expect(clientIp('10.0.0.1', '203.0.113.7', none, false)).toBe('10.0.0.1');
  });

  it('ignores X-Forwarded-For when the peer is not a trusted proxy', () => {
    expect(clientIp('198.51.100.9', '203.0.113.7', proxies, true)).toBe('198.51.100.9');
    expect(clientIp('::ffff:198.51.100.9', '10.0.0.5, 203.0.113.7', proxies, true)).toBe('198.51.100.9');
  });

  it('is the peer when a trusted proxy sends no X-Forwarded-For', () => {
    expect(clientIp('10.0.0.1', undefined, proxies, true)).toBe('10.0.0.1');
    expect(clientIp('10.0.0.1', '', proxies, true)).toBe('10.0.0.1');
  });

  it('takes the forwarded client behind one trusted proxy', () => {
    expect(clientIp('10.0.0.1', '203.0.113.7', proxies, true)).toBe('203.0.113.7');
    expect(clientIp('::ffff:10.0.0.1', '::ffff:203.0.113.7', proxies, true)).toBe('203.0.113.7');
    expect(clientIp('::1', '2001:DB8::7', proxies, true)).toBe('2001:db8::7');
  });

  it('takes the right-most untrusted hop through several proxies; spoofed left-hand hops are ignored', () => {
    expect(clientIp('10.0.0.1', '1.1.1.1, 203.0.113.7, 10.0.0.2', proxies, true)).toBe('203.0.113.7');
    expect(clientIp('10.0.0.1', '1.1.1.1,203.0.113.7,10.0.0.3,10.0.0.2', proxies, true)).toBe('203.0.113.7');
    expect(clientIp('10.0.0.1', ' 203.0.113.7:5555 , 10.0.0.2 ', proxies, true)).toBe('203.0.113.7');
  });

  it('skips hops that are not addresses', () => {
    expect(clientIp('10.0.0.1', '203.0.113.7, unknown', proxies, true)).toBe('203.0.113.7');
    expect(clientIp('10.0.0.1', 'garbage', proxies, true)).toBe('10.0.0.1');
  });

  it('is the left-most hop when every hop is a trusted proxy', () => {
    expect(clientIp('10.0.0.1', '10.0.0.3, 10.0.0.2', proxies, true)).toBe('10.0.0.3');
  });
});
