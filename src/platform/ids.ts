/**
 * Type-prefixed, time-ordered ids (`org_01jd…`): 48-bit millisecond time + 80 random bits in
 * Crockford base32 (a ULID), lower-cased. Ids sort by creation time, which keyset pagination uses,
 * and the same string is the Relay global id: the prefix tells the GraphQL type.
 */
import { randomBytes } from 'node:crypto';

/** The platform's own prefixes; every module declares its own in its manifest's `ids`. */
export const ID_PREFIXES = {
  org: 'Organization',
  usr: 'User',
  mem: 'TeamMember',
  key: 'ApiKey',
  aud: 'AuditLogEntry',
  use: 'UsageEntry',
  req: 'Request',
  evt: 'Event',
  job: 'Job',
} as const;

/**
 * Prefixes the modules add: their manifests' `ids`, derived into this interface by the module list
 * (`src/modules/index.ts`), so `newId` accepts them; the platform names none of them.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ModuleIdPrefixes {}
export type IdPrefix = keyof typeof ID_PREFIXES | keyof ModuleIdPrefixes;

const TYPE_NAMES = new Map<string, string>(Object.entries(ID_PREFIXES));

/** Registers module prefixes (the module list does, before anything runs); a prefix names one type. */
export function registerIdPrefixes(prefixes: Readonly<Record<string, string>>): void {
  for (const [prefix, type] of Object.entries(prefixes)) {
    if (!/^[a-z]{2,6}$/.test(prefix)) throw new Error(`id prefix ${prefix} must be 2-6 lower-case letters`);
    const known = TYPE_NAMES.get(prefix);
    if (known && known !== type) throw new Error(`id prefix ${prefix} already names ${known}`);
    TYPE_NAMES.set(prefix, type);
  }
}

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
let lastTime = 0;

export function encode(bytes: Uint8Array): string {
  // 16 bytes → 26 base32 characters, most significant first (the top 2 bits of the first character
  // are zero): 128 bits read 5 at a time from the end, without BigInt on this hot path.
  const chars = new Array<string>(26);
  let acc = 0;
  let bits = 0;
  let at = 25;
  for (let i = bytes.length - 1; i >= 0; i--) {
    acc |= bytes[i]! << bits;
    bits += 8;
    while (bits >= 5) {
      chars[at--] = ALPHABET[acc & 31]!;
      acc >>>= 5;
      bits -= 5;
    }
  }
  chars[at] = ALPHABET[acc & 31]!;
  return chars.join('');
}

/** Random bytes drawn from a pooled buffer: one system call per 4 KiB instead of one per id. */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let poolAt = POOL_BYTES;
/** The last id's 80 random bits (10 bytes), incremented in place for ids in the same millisecond. */
const random = new Uint8Array(10);

function refillRandom(): void {
  if (poolAt + 10 > pool.length) {
    pool = randomBytes(POOL_BYTES);
    poolAt = 0;
  }
  random.set(pool.subarray(poolAt, poolAt + 10));
  poolAt += 10;
}

/** 40 bits (5 bytes from `at`) as 8 base32 characters. */
function encode40(at: number): string {
  let v = random[at]! * 0x100000000 + ((random[at + 1]! << 24) >>> 0) + (random[at + 2]! << 16) + (random[at + 3]! << 8) + random[at + 4]!;
  let out = '';
  for (let i = 0; i < 8; i++) {
    out = ALPHABET[v % 32]! + out;
    v = Math.floor(v / 32);
  }
  return out;
}

/**
 * Forgets the time of the last id made, so the next id carries its own time again. For a test
 * runner that runs several files in one process, each with its own clock as separate processes
 * would have (test/helpers/testApp.ts): a file whose manual clock ran days ahead would otherwise
 * give the next file's ids that later time, and whatever orders by id (cursors, the billing sweep's
 * scan) would see them as made in the future.
 */
export function resetIdClock(): void {
  lastTime = 0;
}

/**
 * Monotonic within a process: ids made in the same millisecond still sort in creation order. The
 * same characters as `encode` of the 16 bytes (48-bit time, 80 random bits): the time is exactly
 * the first 10 characters and the random bits the last 16, so each part is encoded on its own.
 */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  if (now <= lastTime) {
    now = lastTime;
    for (let i = random.length - 1; i >= 0; i--) {
      random[i] = (random[i]! + 1) & 0xff;
      if (random[i] !== 0) break;
    }
  } else {
    refillRandom();
  }
  lastTime = now;
  // Ids made in the same millisecond (a turn makes eight) share the time part: encoded once.
  if (now !== timeTextOf) {
    let t = now;
    let time = '';
    for (let i = 0; i < 10; i++) {
      time = ALPHABET[t % 32]! + time;
      t = Math.floor(t / 32);
    }
    timeTextOf = now;
    timeText = time;
  }
  return `${prefix}_${timeText}${encode40(0)}${encode40(5)}`;
}

/** The millisecond whose time part `timeText` is. */
let timeTextOf = -1;
let timeText = '';

/**
 * The smallest id of `prefix` made at or after `ms` (its time part with nothing after it): every id
 * made earlier sorts before it, so `id < idFloor(prefix, t)` selects ids made before `t` by their
 * primary key index.
 */
export function idFloor(prefix: IdPrefix, ms: number): string {
  let t = Math.max(0, Math.floor(ms));
  let time = '';
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  return `${prefix}_${time}`;
}

/** The 26 base32 characters after the prefix and `_`. */
const ID_BODY = '[0-9a-hjkmnp-tv-z]{26}';
const ID_PATTERN = new RegExp(`^([a-z]+)_(${ID_BODY})$`);

/** The pattern of `prefix`'s ids (`^msg_[0-9a-hjkmnp-tv-z]{26}$`), or undefined when no type uses that prefix. */
export function idPatternOf(prefix: string): string | undefined {
  return TYPE_NAMES.has(prefix) ? `^${prefix}_${ID_BODY}$` : undefined;
}

export function prefixOf(id: string): IdPrefix | undefined {
  const m = ID_PATTERN.exec(id);
  if (!m) return undefined;
  return TYPE_NAMES.has(m[1]!) ? (m[1] as IdPrefix) : undefined;
}

export function typeNameOfId(id: string): string | undefined {
  const p = prefixOf(id);
  return p ? TYPE_NAMES.get(p) : undefined;
}
