/**
 * Twilio SIDs for this service's ids, stable and reversible: a native id is a prefixed ULID (128
 * bits, 26 base32 characters), a SID is Twilio's two-letter prefix and the same 128 bits as 32 hex
 * digits (`msg_01jd…` ⇄ `SM0192…`). An account SID names an organization in one mode: the
 * organization id's bits, with the top bit set for test mode (a ULID's top bit is zero until the
 * year 10889).
 */
import type { Mode } from '../platform/db/tenant.ts';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const VALUE = new Map([...ALPHABET].map((c, i) => [c, i]));
const NATIVE = /^([a-z]+)_([0-9a-hjkmnp-tv-z]{26})$/;
const SID = /^([A-Z]{2})([0-9a-f]{32})$/;

/** The SID prefix of each native id prefix this surface shows. */
export const SID_PREFIXES = {
  msg: 'SM', call: 'CA', num: 'PN', ver: 'VE', org: 'AC', key: 'SK', conf: 'CF',
} as const;
export type SidPrefix = (typeof SID_PREFIXES)[keyof typeof SID_PREFIXES];

function ulidHex(body: string): string {
  let v = 0n;
  for (const c of body) v = (v << 5n) | BigInt(VALUE.get(c)!);
  return v.toString(16).padStart(32, '0');
}

function hexUlid(hex: string): string {
  let v = BigInt(`0x${hex}`);
  let out = '';
  for (let i = 0; i < 26; i++) {
    out = ALPHABET[Number(v & 31n)]! + out;
    v >>= 5n;
  }
  return out;
}

/** The SID of a native id (`msg_…` → `SM…`). Throws on an id that is not a prefixed ULID. */
export function toSid(id: string): string {
  const m = NATIVE.exec(id);
  const prefix = m && SID_PREFIXES[m[1] as keyof typeof SID_PREFIXES];
  if (!m || !prefix) throw new Error(`no SID for id ${id}`);
  return prefix + ulidHex(m[2]!);
}

/**
 * The native id a SID stands for, when it has the expected prefix and shape (`SM…` → `msg_…`);
 * undefined otherwise (the caller answers 404 as Twilio does for an unknown SID).
 */
export function fromSid(sid: string, native: keyof typeof SID_PREFIXES): string | undefined {
  const m = SID.exec(sid);
  if (!m || m[1] !== SID_PREFIXES[native] || native === 'org') return undefined;
  // The top two bits of a ULID are zero: a larger value names nothing.
  if (parseInt(m[2]![0]!, 16) > 3) return undefined;
  return `${native}_${hexUlid(m[2]!)}`;
}

/** The account SID of an organization in a mode. */
export function accountSid(organizationId: string, mode: Mode): string {
  const m = NATIVE.exec(organizationId);
  if (!m || m[1] !== 'org') throw new Error(`no account SID for ${organizationId}`);
  const hex = ulidHex(m[2]!);
  const first = parseInt(hex.slice(0, 2), 16) | (mode === 'test' ? 0x80 : 0);
  return `AC${first.toString(16).padStart(2, '0')}${hex.slice(2)}`;
}

/** The organization and mode an account SID names, or undefined for anything else. */
export function parseAccountSid(sid: string): { organizationId: string; mode: Mode } | undefined {
  const m = SID.exec(sid);
  if (!m || m[1] !== 'AC') return undefined;
  const first = parseInt(m[2]!.slice(0, 2), 16);
  const mode: Mode = first & 0x80 ? 'test' : 'live';
  const hex = (first & 0x7f).toString(16).padStart(2, '0') + m[2]!.slice(2);
  if (parseInt(hex[0]!, 16) > 3) return undefined;
  return { organizationId: `org_${hexUlid(hex)}`, mode };
}
