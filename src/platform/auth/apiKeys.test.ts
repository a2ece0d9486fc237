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

  it('gives each of more keys than it remembers its own hash, again after they were forgotten', () => {
    const secret = 'memo-secret-0123456789abcdef';
    const keys = Array.from({ length: 10_050 }, () => generateApiKey('live'));
    const reference = (key: string) => createHmac('sha256', secret).update(key).digest('hex');
    for (const key of keys) expect(hashApiKey(secret, key)).toBe(reference(key));
    // The first ones were forgotten (10,000 kept), the last ones are remembered: both hash the same.
    for (const key of [...keys.slice(0, 60), ...keys.slice(-60)]) expect(hashApiKey(secret, key)).toBe(reference(key));
    expect(hashApiKey('another-secret-0123456789ab', keys[0]!)).not.toBe(reference(keys[0]!));
  });
});
