import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { encode, ID_PREFIXES, newId, prefixOf, registerIdPrefixes, typeNameOfId, type IdPrefix } from './ids.ts';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const BODY = /^[0-9a-hjkmnp-tv-z]{26}$/;

/** The millisecond time carried by the first 10 characters (50 bits, the top 2 always zero). */
function timeOf(id: string): number {
  const body = id.slice(id.indexOf('_') + 1);
  let t = 0;
  for (const ch of body.slice(0, 10)) {
    const v = ALPHABET.indexOf(ch);
    expect(v).toBeGreaterThanOrEqual(0);
    t = t * 32 + v;
  }
  return t;
}

// Ids made by earlier tests (other files too: workers keep their modules from file to file, and
// manual clocks run days ahead) push the process-wide monotonic counter forward, so explicit
// timestamps here start an hour past where it stands and only ever increase.
let base = timeOf(newId('key')) + 3_600_000;
const nextBase = () => (base += 60_000);

describe('newId', () => {
  it('is the prefix, an underscore and a 26-character lower-case Crockford base32 body', () => {
    const id = newId('key');
    expect(id.startsWith('key_')).toBe(true);
    const body = id.slice('key_'.length);
    expect(body).toHaveLength(26);
    expect(body).toMatch(BODY);
    // 128 bits in 26 characters: the first character carries only 3 bits.
    expect(ALPHABET.indexOf(body[0]!)).toBeLessThan(8);
  });

  it('works for every registered prefix', () => {
    for (const p of Object.keys(ID_PREFIXES) as IdPrefix[]) {
      const id = newId(p);
      expect(id).toMatch(new RegExp(`^${p}_[0-9a-hjkmnp-tv-z]{26}$`));
      expect(prefixOf(id)).toBe(p);
    }
  });

  it('encodes the given millisecond in its leading characters', () => {
    const t = nextBase();
    const id = newId('msg', t);
    expect(timeOf(id)).toBe(t);
  });

  it('sorts by creation time across milliseconds', () => {
    const t = nextBase();
    const a = newId('msg', t);
    const b = newId('msg', t + 1);
    const c = newId('msg', t + 1000);
    expect(a < b).toBe(true);
    expect(b < c).toBe(true);
    expect([c, a, b].sort()).toEqual([a, b, c]);
  });

  it('is strictly increasing for many ids made in the same millisecond', () => {
    const t = nextBase();
    const ids = Array.from({ length: 5000 }, () => newId('evt', t));
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) {
      expect(ids[i - 1]! < ids[i]!, `${ids[i - 1]} < ${ids[i]}`).toBe(true);
    }
    expect(ids.every((id) => timeOf(id) === t)).toBe(true);
    // The random part counts up by exactly one per id (carrying across bytes), read back as the
    // 128-bit value `encode` writes.
    const value = (id: string) => [...id.slice(4)].reduce((v, ch) => v * 32n + BigInt(ALPHABET.indexOf(ch)), 0n);
    for (let i = 1; i < ids.length; i++) expect(value(ids[i]!) - value(ids[i - 1]!)).toBe(1n);
    const bytes = new Uint8Array(16);
    let v = value(ids[0]!);
    for (let i = 15; i >= 0; i--, v >>= 8n) bytes[i] = Number(v & 255n);
    expect(`evt_${encode(bytes)}`).toBe(ids[0]);
  });

  it('is strictly increasing with the real clock too (many per millisecond)', () => {
    const ids = Array.from({ length: 2000 }, () => newId('req'));
    const sorted = [...ids].sort();
    expect(sorted).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('stays increasing when the clock steps backwards', () => {
    const t = nextBase();
    const a = newId('job', t);
    const b = newId('job', t - 5000);
    expect(a < b).toBe(true);
  });

  it('uses random bits: two ids in a fresh millisecond differ in more than the counter', () => {
    const x = newId('con', nextBase());
    const y = newId('con', nextBase());
    expect(x.slice(-16)).not.toBe(y.slice(-16));
  });
});

describe('prefixOf / typeNameOfId', () => {
  it('returns the prefix and the GraphQL type of well-formed ids', () => {
    expect(prefixOf(newId('org'))).toBe('org');
    expect(typeNameOfId(newId('org'))).toBe('Organization');
    expect(typeNameOfId(newId('key'))).toBe('ApiKey');
    expect(typeNameOfId(newId('mem'))).toBe('TeamMember');
    expect(typeNameOfId(newId('aud'))).toBe('AuditLogEntry');
    for (const [p, type] of Object.entries(ID_PREFIXES)) {
      expect(typeNameOfId(newId(p as IdPrefix))).toBe(type);
    }
  });

  it('knows a module prefix once it is registered (the module list registers the manifests\' ids), and refuses a second meaning', () => {
    const id = `tstx_${newId('key').slice(4)}`;
    expect(typeNameOfId(id)).toBeUndefined();
    registerIdPrefixes({ tstx: 'TestThing' });
    expect(prefixOf(id)).toBe('tstx');
    expect(typeNameOfId(id)).toBe('TestThing');
    expect(() => registerIdPrefixes({ tstx: 'OtherThing' })).toThrow(/already names TestThing/);
    expect(() => registerIdPrefixes({ org: 'Org2' })).toThrow(/already names Organization/);
  });

  it('rejects unknown prefixes and malformed bodies', () => {
    const body = newId('key').slice(4);
    const bad = [
      `zzz_${body}`, // unknown prefix
      `Key_${body}`, // upper-case prefix
      `key_${body.toUpperCase()}`, // upper-case body
      `key_${body.slice(1)}`, // 25 characters
      `key_${body}0`, // 27 characters
      `key_${body.slice(0, -1)}u`, // u is not in Crockford base32
      `key_${body.slice(0, -1)}i`,
      `key_${body.slice(0, -1)}l`,
      `key_${body.slice(0, -1)}o`,
      `key${body}`, // no separator
      `key-${body}`,
      `_${body}`,
      body,
      '',
      ' key_' + body,
      'key_' + body + '\n',
      'constructor_' + body, // inherited from Object.prototype, not a prefix
    ];
    for (const id of bad) {
      expect(prefixOf(id), JSON.stringify(id)).toBeUndefined();
      expect(typeNameOfId(id), JSON.stringify(id)).toBeUndefined();
    }
  });
});

describe('encode', () => {
  /** The 128-bit value in base32, most significant digit first, computed with BigInt. */
  function reference(bytes: Uint8Array): string {
    let value = 0n;
    for (const b of bytes) value = (value << 8n) | BigInt(b);
    let out = '';
    for (let i = 0; i < 26; i++) {
      out = ALPHABET[Number(value & 31n)] + out;
      value >>= 5n;
    }
    return out;
  }

  it('matches the 128-bit base32 value for edge and random inputs', () => {
    const inputs = [new Uint8Array(16), new Uint8Array(16).fill(255), Uint8Array.from({ length: 16 }, (_, i) => i), ...Array.from({ length: 500 }, () => randomBytes(16))];
    for (const bytes of inputs) expect(encode(bytes)).toBe(reference(bytes));
  });
});
