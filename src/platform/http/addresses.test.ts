import { describe, expect, it } from 'vitest';
import { isBlockedAddress, isLoopbackAddress } from './addresses.ts';

const BLOCKED_V4 = [
  '0.0.0.0', '0.1.2.3', // unspecified / this network
  '127.0.0.1', '127.1.2.3', '127.255.255.254', // loopback
  '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.0.1', '192.168.255.255', // private
  '100.64.0.1', '100.127.255.255', // CGNAT
  '169.254.169.254', '169.254.0.1', // link-local, metadata
  '224.0.0.1', '239.255.255.250', // multicast
  '240.0.0.1', '255.255.255.255', // reserved, broadcast
  '198.18.0.1', '198.19.255.255', // benchmarking
  '192.0.2.1', '198.51.100.7', '203.0.113.9', // documentation
  '192.0.0.8', '192.88.99.1', // IETF assignments, 6to4 relay
];

const ALLOWED_V4 = [
  '8.8.8.8', '1.1.1.1', '93.184.216.34', '11.0.0.1', '223.255.255.255',
  '172.15.255.255', '172.32.0.0', '100.63.255.255', '100.128.0.0', '169.253.255.255', '169.255.0.0',
  '198.17.255.255', '198.20.0.0', '192.167.255.255', '192.169.0.0', '126.255.255.255', '128.0.0.0',
];

const BLOCKED_V6 = [
  '::', '::1', '[::1]', '0:0:0:0:0:0:0:1', // unspecified, loopback
  '::ffff:127.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:127.0.0.1', '[::ffff:7f00:1]', // mapped loopback
  '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe', '::ffff:0.0.0.0', // mapped private
  '::ffff:0:127.0.0.1', // IPv4-translated
  '::127.0.0.1', '::7f00:1', '::8.8.8.8', '::2', // deprecated IPv4-compatible: the whole ::/96
  '64:ff9b::127.0.0.1', '64:ff9b::7f00:1', '64:ff9b::a9fe:a9fe', '64:ff9b::192.168.1.1', // NAT64
  '64:ff9b:1::1', // local-use NAT64
  '2002:7f00:1::1', '2002:c0a8:101::', '2002:a9fe:a9fe::1', '2002:a00:1::', // 6to4 of blocked IPv4
  '2001::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001:1::1', // Teredo and IETF special purpose
  '2001:db8::1', '3fff::1', // documentation
  'fe80::1', 'fe80::1%eth0', '[fe80::1%25eth0]', 'febf:ffff::1', // link-local
  'fec0::1', // site-local
  'fc00::1', 'fd12:3456:789a::1', // unique-local
  'ff02::1', 'ff0e::101', // multicast
  '100::1', // discard-only
  '4000::1', 'e000::1', // outside global unicast 2000::/3
];

const ALLOWED_V6 = [
  '2606:4700:4700::1111', '2001:4860:4860::8888', '2a00:1450:4001:81c::200e', '2001:200::1',
  '::ffff:8.8.8.8', '::ffff:808:808', '64:ff9b::8.8.8.8', '64:ff9b::5db8:d822', '2002:808:808::1',
];

describe('isBlockedAddress', () => {
  it.each(BLOCKED_V4)('blocks IPv4 %s', (ip) => {
    expect(isBlockedAddress(ip)).toBe(true);
  });

  it.each(ALLOWED_V4)('allows public IPv4 %s', (ip) => {
    expect(isBlockedAddress(ip)).toBe(false);
  });

  it.each(BLOCKED_V6)('blocks IPv6 %s', (ip) => {
    expect(isBlockedAddress(ip)).toBe(true);
  });

  it.each(ALLOWED_V6)('allows public IPv6 %s', (ip) => {
    expect(isBlockedAddress(ip)).toBe(false);
  });

  it.each(['', 'localhost', 'example.com', '2130706433', '0x7f000001', '127.1', '1.2.3.4.5', '::ffff:1.2.3', 'gggg::1'])(
    'fails closed on something that is not a canonical IP: %j',
    (ip) => {
      expect(isBlockedAddress(ip)).toBe(true);
    },
  );
});

describe('isLoopbackAddress', () => {
  it.each(['127.0.0.1', '127.2.3.4', '::1', '[::1]'])('%s is loopback', (ip) => {
    expect(isLoopbackAddress(ip)).toBe(true);
  });

  it.each(['10.0.0.1', '0.0.0.0', '::', 'fe80::1', 'localhost', ''])('%j is not loopback', (ip) => {
    expect(isLoopbackAddress(ip)).toBe(false);
  });
});
