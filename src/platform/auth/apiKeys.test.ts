import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey, modeOfKey } from './apiKeys.ts';

describe('hashApiKey', () => {
  it('is HMAC-SHA256 of the key under the secret, in hex, whichever secret came before', () => {
    const key = generateApiKey('test');
    const reference = (secret: string) => createHmac('sha256', secret).update(key).digest('hex');
    for (const secret of ['first-secret-0123456789abcdef', 'second-secret-ünïcode', 'first-secret-0123456789abcdef']) {
      expect(hashApiKey(secret, key)).toBe(reference(secret));
    }
    expect(hashApiKey('first-secret-0123456789abcdef', key)).not.toBe(hashApiKey('second-secret-ünïcode', key));
    expect(modeOfKey(key)).toBe('test');
  });
});
