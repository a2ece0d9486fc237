import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { LocalKeyManagement, parseMasterKeys } from '../../providers/kms/local.ts';
import { OrgKeys, sealedVersion } from './hipaa.keys.ts';

const ref = { table: 'messages', rowId: 'msg_1', column: 'phi' };

describe('PHI cipher (AES-256-GCM, authenticated data bound to organization, table, row and column)', () => {
  const keys = new OrgKeys('org_a', new Map([[1, randomBytes(32)], [2, randomBytes(32)]]), 2);

  it('seals with the newest key version under a fresh 96-bit nonce and opens what it sealed', () => {
    const a = keys.seal(ref, 'blood test on Monday');
    const b = keys.seal(ref, 'blood test on Monday');
    expect(a).not.toBe(b);
    expect(a).not.toContain('blood');
    expect(sealedVersion(a)).toBe(2);
    // nonce (12) + tag (16) + ciphertext (same length as the text)
    expect(Buffer.from(a.split(':')[2]!, 'base64')).toHaveLength(12 + 16 + 'blood test on Monday'.length);
    expect(keys.open(ref, a)).toBe('blood test on Monday');
  });

  it('refuses a ciphertext moved to another row, column, table or organization, or altered', () => {
    const sealed = keys.seal(ref, 'x-ray');
    expect(() => keys.open({ ...ref, rowId: 'msg_2' }, sealed)).toThrow();
    expect(() => keys.open({ ...ref, column: 'body' }, sealed)).toThrow();
    expect(() => keys.open({ ...ref, table: 'contacts' }, sealed)).toThrow();
    const otherOrg = new OrgKeys('org_b', keys.keys, 2);
    expect(() => otherOrg.open(ref, sealed)).toThrow();
    const raw = Buffer.from(sealed.split(':')[2]!, 'base64');
    raw[raw.length - 1]! ^= 1;
    expect(() => keys.open(ref, `phi1:2:${raw.toString('base64')}`)).toThrow();
  });

  it('opens values sealed under an older key version after rotation, and refuses unknown versions', () => {
    const old = new OrgKeys('org_a', new Map([[1, keys.keys.get(1)!]]), 1).seal(ref, 'older');
    expect(keys.open(ref, old)).toBe('older');
    expect(() => new OrgKeys('org_a', new Map([[1, keys.keys.get(1)!]]), 1).open(ref, keys.seal(ref, 'newer'))).toThrow(/key version/);
  });
});

describe('local key management', () => {
  const [k1, k2] = [randomBytes(32), randomBytes(32)];

  it('wraps under the current master key and unwraps only in the same context', async () => {
    const kms = new LocalKeyManagement([{ id: 'k1', key: k1 }]);
    const dataKey = randomBytes(32);
    const wrapped = await kms.wrap(dataKey, 'org_a');
    expect(wrapped.masterKeyId).toBe('k1');
    expect(await kms.unwrap(wrapped, 'org_a')).toEqual(dataKey);
    await expect(kms.unwrap(wrapped, 'org_b')).rejects.toThrow();
  });

  it('after a master key rotation unwraps with the old key and wraps with the new one', async () => {
    const before = new LocalKeyManagement([{ id: 'k1', key: k1 }]);
    const wrapped = await before.wrap(randomBytes(32), 'org_a');
    const after = new LocalKeyManagement(parseMasterKeys(`k2:${k2.toString('base64')},k1:${k1.toString('base64')}`));
    expect(after.currentKeyId()).toBe('k2');
    const dataKey = await after.unwrap(wrapped, 'org_a');
    const rewrapped = await after.wrap(dataKey, 'org_a');
    expect(rewrapped.masterKeyId).toBe('k2');
    await expect(new LocalKeyManagement([{ id: 'k2', key: k2 }]).unwrap(wrapped, 'org_a')).rejects.toThrow(/k1 is not configured/);
  });

  it('refuses malformed master keys', () => {
    expect(() => parseMasterKeys('nokey')).toThrow();
    expect(() => parseMasterKeys(`k:${randomBytes(16).toString('base64')}`)).toThrow(/32 bytes/);
  });
});
