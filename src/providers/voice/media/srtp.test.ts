import { describe, expect, it } from 'vitest';
import { deriveKey, newSrtpKey, SrtpReceiver, SrtpSender, type SrtpKey } from './srtp.ts';
import { buildRtcpBye, buildRtp } from './rtp.ts';

const hex = (s: string) => Buffer.from(s.replace(/\s/g, ''), 'hex');

describe('SRTP (RFC 3711)', () => {
  it('derives the session keys of the RFC 3711 B.3 test vectors', () => {
    const master: SrtpKey = { suite: 'AES_CM_128_HMAC_SHA1_80', key: hex('E1F97A0D3E018BE0D64FA32C06DE4139'), salt: hex('0EC675AD498AFEEBB6960B3AABE6') };
    expect(deriveKey(master, 0, 16).toString('hex').toUpperCase()).toBe('C61E7A93744F39EE10734AFE3FF7A087');
    expect(deriveKey(master, 2, 14).toString('hex').toUpperCase()).toBe('30CBBC08863D8C85D49DB34A9AE1');
    expect(deriveKey(master, 1, 20).toString('hex').toUpperCase()).toBe('CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4');
  });

  const packet = (sequence: number, payload = Buffer.from('hello, twenty ms of audio')) => buildRtp({ payloadType: 0, marker: false, sequence, timestamp: sequence * 160, ssrc: 0x1234, payload });

  for (const suite of ['AES_CM_128_HMAC_SHA1_80', 'AES_CM_128_HMAC_SHA1_32'] as const) {
    it(`${suite}: protects (encrypted payload, header kept, tag appended) and the receiver opens it`, () => {
      const key = newSrtpKey(suite);
      const tx = new SrtpSender(key);
      const rx = new SrtpReceiver(key);
      const plain = packet(7);
      const secured = tx.protectRtp(plain);
      expect(secured.length).toBe(plain.length + (suite.endsWith('80') ? 10 : 4));
      expect(secured.subarray(0, 12).equals(plain.subarray(0, 12))).toBe(true);
      expect(secured.subarray(12, plain.length).equals(plain.subarray(12))).toBe(false);
      expect(rx.unprotectRtp(secured)?.equals(plain)).toBe(true);
    });
  }

  it('refuses a tampered packet, a replayed one, and one under another key', () => {
    const key = newSrtpKey('AES_CM_128_HMAC_SHA1_80');
    const tx = new SrtpSender(key);
    const rx = new SrtpReceiver(key);
    const a = tx.protectRtp(packet(1));
    const b = tx.protectRtp(packet(2));
    const tampered = Buffer.from(b);
    tampered[14]! ^= 1;
    expect(rx.unprotectRtp(tampered)).toBeUndefined();
    expect(rx.unprotectRtp(b)).toBeDefined();
    expect(rx.unprotectRtp(a)).toBeDefined(); // late but inside the window
    expect(rx.unprotectRtp(b)).toBeUndefined(); // replay
    expect(new SrtpReceiver(newSrtpKey('AES_CM_128_HMAC_SHA1_80')).unprotectRtp(tx.protectRtp(packet(3)))).toBeUndefined();
  });

  it('keeps the rollover counter across a sequence wrap on both sides', () => {
    const key = newSrtpKey('AES_CM_128_HMAC_SHA1_80');
    const tx = new SrtpSender(key);
    const rx = new SrtpReceiver(key);
    for (const seq of [65534, 65535, 0, 1, 2]) expect(rx.unprotectRtp(tx.protectRtp(packet(seq)))?.readUInt16BE(2)).toBe(seq);
  });

  it('SRTCP: encrypts after the sender SSRC, appends E|index and an 80-bit tag; the receiver opens it once', () => {
    const key = newSrtpKey('AES_CM_128_HMAC_SHA1_32');
    const tx = new SrtpSender(key);
    const rx = new SrtpReceiver(key);
    const bye = buildRtcpBye(0xabcdef01);
    const secured = tx.protectRtcp(Buffer.concat([bye, Buffer.from('12345678')]));
    expect(secured.length).toBe(bye.length + 8 + 14);
    expect(secured.readUInt32BE(secured.length - 14)).toBe(0x80000000);
    expect(rx.unprotectRtcp(secured)?.equals(Buffer.concat([bye, Buffer.from('12345678')]))).toBe(true);
    expect(rx.unprotectRtcp(secured)).toBeUndefined();
  });
});
