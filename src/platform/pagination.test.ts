import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock.ts';
import { ServiceError } from './errors.ts';
import { newId } from './ids.ts';
import { CursorCodec, DEFAULT_LIMIT, MAX_LIMIT, validateLimit, type ListKey } from './pagination.ts';
import type { TenantRef } from './db/tenant.ts';

const SECRET = 'unit-test-secret-0123456789abcdef';
const TTL = 3600;
const orgA: TenantRef = { organizationId: 'org_01aaaaaaaaaaaaaaaaaaaaaaaa', mode: 'test' };
const orgB: TenantRef = { organizationId: 'org_01bbbbbbbbbbbbbbbbbbbbbbbb', mode: 'test' };
const keys: ListKey = { list: 'api_keys', filters: { mode: null } };

function setup() {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
  return { clock, codec: new CursorCodec(SECRET, TTL, clock) };
}

/** Runs `fn` and returns the ServiceError it throws (fails the test when it does not throw one). */
function errorOf(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    return e as ServiceError;
  }
  throw new Error('expected a ServiceError, nothing was thrown');
}

function expectInvalidCursor(fn: () => unknown): void {
  const e = errorOf(fn);
  expect(e.code).toBe('INVALID_CURSOR');
  expect(e.status).toBe(400);
}

/** Changes one character, always to a different character of the base64url alphabet. */
function flip(s: string, at: number): string {
  const ch = s[at]!;
  return s.slice(0, at) + (ch === 'A' ? 'B' : 'A') + s.slice(at + 1);
}

describe('CursorCodec', () => {
  it('round-trips the id to continue after', () => {
    const { codec } = setup();
    const id = newId('key');
    const cursor = codec.encode(orgA, keys, id);
    expect(typeof cursor).toBe('string');
    expect(codec.decode(orgA, keys, cursor)).toBe(id);
  });

  it('binds filters independent of key order', () => {
    const { codec } = setup();
    const id = newId('key');
    const cursor = codec.encode(orgA, { list: 'x', filters: { a: 1, b: 'two' } }, id);
    expect(codec.decode(orgA, { list: 'x', filters: { b: 'two', a: 1 } }, cursor)).toBe(id);
  });

  it('rejects a cursor whose payload was altered', () => {
    const { codec } = setup();
    const cursor = codec.encode(orgA, keys, newId('key'));
    const [payload, sig] = cursor.split('.') as [string, string];
    // A forged payload pointing at another id, with the original signature.
    const data = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...data, a: newId('key') })).toString('base64url');
    expectInvalidCursor(() => codec.decode(orgA, keys, `${forged}.${sig}`));
    // A later expiry, with the original signature.
    const extended = Buffer.from(JSON.stringify({ ...data, x: (data.x as number) + 10 * TTL })).toString('base64url');
    expectInvalidCursor(() => codec.decode(orgA, keys, `${extended}.${sig}`));
    // Any single changed character.
    for (const at of [0, Math.floor(payload.length / 2), payload.length - 1]) {
      expectInvalidCursor(() => codec.decode(orgA, keys, `${flip(payload, at)}.${sig}`));
    }
  });

  it('rejects a cursor whose signature was altered', () => {
    const { codec } = setup();
    const cursor = codec.encode(orgA, keys, newId('key'));
    const [payload, sig] = cursor.split('.') as [string, string];
    for (const at of [0, Math.floor(sig.length / 2), sig.length - 1]) {
      expectInvalidCursor(() => codec.decode(orgA, keys, `${payload}.${flip(sig, at)}`));
    }
    expectInvalidCursor(() => codec.decode(orgA, keys, `${payload}.${sig.slice(0, -1)}`));
    expectInvalidCursor(() => codec.decode(orgA, keys, `${payload}.${sig}A`));
    expectInvalidCursor(() => codec.decode(orgA, keys, `${payload}.`));
  });

  it('rejects a cursor signed with another secret', () => {
    const { clock, codec } = setup();
    const other = new CursorCodec('another-secret-0123456789abcdef', TTL, clock);
    expectInvalidCursor(() => codec.decode(orgA, keys, other.encode(orgA, keys, newId('key'))));
  });

  it('rejects malformed cursors', () => {
    const { codec } = setup();
    const good = codec.encode(orgA, keys, newId('key'));
    for (const bad of ['', '.', 'abc', 'abc.def', `${good}.x`, `.${good}`, good.replace('.', ''), 'null', '{}', '%%%.%%%']) {
      expectInvalidCursor(() => codec.decode(orgA, keys, bad));
    }
  });

  it('rejects correctly signed payloads that are not cursors (no crash)', () => {
    // Signs like the codec does, to reach the checks behind the signature.
    const { codec } = setup();
    const sign = (payload: string) => createHmac('sha256', SECRET).update(`cursor:${payload}`).digest('base64url').slice(0, 32);
    const signed = (text: string) => {
      const payload = Buffer.from(text).toString('base64url');
      return `${payload}.${sign(payload)}`;
    };
    const good = codec.encode(orgA, keys, 'key_x');
    expect(signed(Buffer.from(good.split('.')[0]!, 'base64url').toString('utf8'))).toBe(good);
    for (const text of ['not json', 'null', '42', '"s"', '[]', '{}', '{"a":1,"b":"x","x":1}', '{"a":"key_x","b":"x"}']) {
      expectInvalidCursor(() => codec.decode(orgA, keys, signed(text)));
    }
  });

  it('expires after the TTL', () => {
    const { clock, codec } = setup();
    const id = newId('key');
    const cursor = codec.encode(orgA, keys, id);
    clock.advance((TTL - 1) * 1000);
    expect(codec.decode(orgA, keys, cursor)).toBe(id);
    clock.advance(2000);
    const e = errorOf(() => codec.decode(orgA, keys, cursor));
    expect(e.code).toBe('INVALID_CURSOR');
    expect(e.status).toBe(400);
    expect(e.message).toMatch(/expired/);
  });

  it('is bound to the tenant', () => {
    const { codec } = setup();
    const cursor = codec.encode(orgA, keys, newId('key'));
    expectInvalidCursor(() => codec.decode(orgB, keys, cursor));
  });

  it('is bound to the mode', () => {
    const { codec } = setup();
    const cursor = codec.encode(orgA, keys, newId('key'));
    expectInvalidCursor(() => codec.decode({ ...orgA, mode: 'live' }, keys, cursor));
  });

  it('is bound to the list', () => {
    const { codec } = setup();
    const cursor = codec.encode(orgA, keys, newId('key'));
    expectInvalidCursor(() => codec.decode(orgA, { ...keys, list: 'audit_logs' }, cursor));
  });

  it('is bound to the filters', () => {
    const { codec } = setup();
    const cursor = codec.encode(orgA, { list: 'api_keys', filters: { mode: 'test' } }, newId('key'));
    expectInvalidCursor(() => codec.decode(orgA, { list: 'api_keys', filters: { mode: 'live' } }, cursor));
    expectInvalidCursor(() => codec.decode(orgA, { list: 'api_keys', filters: { mode: null } }, cursor));
    expectInvalidCursor(() => codec.decode(orgA, { list: 'api_keys' }, cursor));
    expectInvalidCursor(() => codec.decode(orgA, { list: 'api_keys', filters: { mode: 'test', extra: 1 } }, cursor));
  });

  it('builds pages from limit + 1 rows', () => {
    const { codec } = setup();
    const rows = Array.from({ length: 4 }, () => ({ id: newId('key') })).reverse();
    const first = codec.keyset(orgA, keys, { limit: 3 });
    expect(first).toEqual({ take: 4, after: undefined, before: undefined, backward: false });
    const full = codec.page(orgA, keys, first, rows);
    expect(full.items).toEqual(rows.slice(0, 3));
    expect(full.hasMore).toBe(true);
    expect(full.hasPrevious).toBe(false);
    expect(codec.decode(orgA, keys, full.nextCursor!)).toBe(rows[2]!.id);
    expect(codec.decode(orgA, keys, full.cursorFor(rows[0]!.id))).toBe(rows[0]!.id);

    const last = codec.page(orgA, keys, first, rows.slice(0, 3));
    expect(last.items).toHaveLength(3);
    expect(last.hasMore).toBe(false);
    expect(last.nextCursor).toBeNull();

    const empty = codec.page(orgA, keys, first, []);
    expect(empty.items).toEqual([]);
    expect(empty.hasMore).toBe(false);
    expect(empty.nextCursor).toBeNull();

    // After a cursor there is something before the page: the cursor's own item.
    const after = codec.keyset(orgA, keys, { limit: 3, cursor: full.nextCursor });
    expect(after.after).toBe(rows[2]!.id);
    expect(codec.page(orgA, keys, after, rows.slice(3)).hasPrevious).toBe(true);
  });

  it('pages backward: rows fetched oldest first come back newest first, with what lies on each side', () => {
    const { codec } = setup();
    const newestFirst = Array.from({ length: 6 }, () => ({ id: newId('key') })).reverse();
    const oldestFirst = [...newestFirst].reverse();
    // `last: 2` without a cursor: the two oldest, and more before them.
    const fromEnd = codec.keyset(orgA, keys, { limit: 2, backward: true });
    expect(fromEnd).toEqual({ take: 3, after: undefined, before: undefined, backward: true });
    const tail = codec.page(orgA, keys, fromEnd, oldestFirst.slice(0, 3));
    expect(tail.items).toEqual(newestFirst.slice(4));
    expect(tail).toMatchObject({ hasPrevious: true, hasMore: false, nextCursor: null });
    // `last: 2, before: <the tail's first>`: the two just newer than it, newest first.
    const before = codec.keyset(orgA, keys, { limit: 2, before: tail.cursorFor(tail.items[0]!.id) });
    expect(before).toMatchObject({ before: newestFirst[4]!.id, backward: true, after: undefined });
    const middle = codec.page(orgA, keys, before, oldestFirst.slice(2, 5));
    expect(middle.items).toEqual(newestFirst.slice(2, 4));
    expect(middle.hasPrevious).toBe(true);
    expect(middle.hasMore).toBe(true);
    expect(codec.decode(orgA, keys, middle.nextCursor!)).toBe(newestFirst[3]!.id);
    // The first page going backward: nothing newer is left.
    expect(codec.page(orgA, keys, before, oldestFirst.slice(4, 6)).hasPrevious).toBe(false);
  });

  it('refuses a page after one cursor and before another', () => {
    const { codec } = setup();
    const cursor = codec.encode(orgA, keys, newId('key'));
    expect(() => codec.keyset(orgA, keys, { cursor, before: cursor })).toThrow(ServiceError);
  });
});

describe('validateLimit', () => {
  it('defaults to 20 and accepts 1 to 100', () => {
    expect(DEFAULT_LIMIT).toBe(20);
    expect(MAX_LIMIT).toBe(100);
    expect(validateLimit(undefined)).toBe(20);
    expect(validateLimit(null)).toBe(20);
    expect(validateLimit(1)).toBe(1);
    expect(validateLimit(50)).toBe(50);
    expect(validateLimit(100)).toBe(100);
  });

  it('rejects everything else with 400 VALIDATION_ERROR on field limit', () => {
    for (const bad of [0, -1, 101, 1000, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const e = errorOf(() => validateLimit(bad));
      expect(e.code, String(bad)).toBe('VALIDATION_ERROR');
      expect(e.status).toBe(400);
      expect(e.details.field).toBe('limit');
    }
  });
});
