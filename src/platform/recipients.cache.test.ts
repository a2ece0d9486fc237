/**
 * normalizePhone parses a number with libphonenumber once: its answer is recognized as E.164
 * afterwards, however many other numbers came in between (a campaign's audience is normalized
 * when it is frozen, then again by each send's consent check).
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';

const parsed = vi.hoisted(() => ({ calls: 0 }));
vi.mock('libphonenumber-js', async (importActual) => {
  const actual = await importActual<typeof import('libphonenumber-js')>();
  return { ...actual, parsePhoneNumberFromString: (...args: Parameters<typeof actual.parsePhoneNumberFromString>) => { parsed.calls++; return actual.parsePhoneNumberFromString(...args); } };
});
const { normalizePhone } = await import('./recipients.ts');

/** `n` distinct valid US numbers, as a contact list might hold them. */
const numbers = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `+1415${String(2_000_000 + from + i)}`);

describe('normalizePhone parses each number once', () => {
  beforeEach(() => { parsed.calls = 0; });

  it('answers its own answers again without parsing, for more numbers than its recent-inputs cache keeps', () => {
    const audience = numbers(30_000);
    const frozen = audience.map((p) => normalizePhone(p));
    expect(frozen).toEqual(audience);
    expect(parsed.calls).toBe(30_000);
    // The consent checks of the sends, in the same order.
    for (const address of frozen) expect(normalizePhone(address!)).toBe(address);
    expect(parsed.calls).toBe(30_000);
  });

  it('still parses inputs that are not in E.164 form, and still rejects invalid numbers', () => {
    expect(normalizePhone('+1 (415) 555-2671')).toBe('+14155552671');
    expect(normalizePhone('+1415555267')).toBeUndefined();
    expect(normalizePhone('+1415555267')).toBeUndefined();
    expect(parsed.calls).toBe(2);
  });
});
