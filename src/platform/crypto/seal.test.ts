import { createCipheriv, createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Sealer } from './seal.ts';

/** A value sealed the way the Sealer did before it kept its key as a KeyObject (the key as a Buffer per call). */
function sealedWithBufferKey(appSecret: string, purpose: string, plain: string): string {
  const key = createHmac('sha256', appSecret).update(purpose).digest();
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return `v1:${Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64')}`;
}

describe('Sealer', () => {
  it('opens what it sealed, with a fresh nonce each time', () => {
    const sealer = new Sealer('secret-0123456789', 'purpose');
    const a = sealer.seal('{"body":"hi"}');
    const b = sealer.seal('{"body":"hi"}');
    expect(a).not.toBe(b);
    expect(sealer.open(a)).toBe('{"body":"hi"}');
    expect(sealer.open(b)).toBe('{"body":"hi"}');
  });

  it('opens values sealed before (same key, same format) and refuses another purpose\'s', () => {
    const old = sealedWithBufferKey('secret-0123456789', 'purpose', 'stored earlier');
    expect(new Sealer('secret-0123456789', 'purpose').open(old)).toBe('stored earlier');
    expect(() => new Sealer('secret-0123456789', 'other purpose').open(old)).toThrow();
  });
});
