import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseInput } from './operations.ts';
import { ServiceError } from './errors.ts';
import { emailSchema, isEmail, normalizePhone, phoneSchema } from './recipients.ts';

function errorOf(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ServiceError) return e;
    throw e;
  }
  throw new Error('expected a ServiceError');
}

describe('normalizePhone', () => {
  it('accepts valid E.164 numbers of several countries', () => {
    expect(normalizePhone('+14155552671')).toBe('+14155552671');
    expect(normalizePhone('+447911123456')).toBe('+447911123456');
    expect(normalizePhone('+905321234567')).toBe('+905321234567');
    expect(normalizePhone('+4915123456789')).toBe('+4915123456789');
  });

  it('accepts every sandbox magic number +1500555xxxx', () => {
    for (let i = 1; i <= 9; i++) expect(normalizePhone(`+1500555000${i}`)).toBe(`+1500555000${i}`);
    expect(normalizePhone('+15005550000')).toBe('+15005550000');
    expect(normalizePhone('+15005559999')).toBe('+15005559999');
  });

  it('removes spaces, dashes, dots and parentheses and trims', () => {
    expect(normalizePhone(' +1 (415) 555-2671 ')).toBe('+14155552671');
    expect(normalizePhone('+44 7911 123456')).toBe('+447911123456');
    expect(normalizePhone('+1.415.555.2671')).toBe('+14155552671');
    expect(normalizePhone('+1 500 555 0001')).toBe('+15005550001');
  });

  it('rejects numbers without a leading +', () => {
    expect(normalizePhone('14155552671')).toBeUndefined();
    expect(normalizePhone('004414155552671')).toBeUndefined();
    expect(normalizePhone('(415) 555-2671')).toBeUndefined();
  });

  it('rejects invalid, too short, too long and non-numeric input', () => {
    expect(normalizePhone('')).toBeUndefined();
    expect(normalizePhone('+')).toBeUndefined();
    expect(normalizePhone('+1')).toBeUndefined();
    expect(normalizePhone('+12345')).toBeUndefined();
    expect(normalizePhone('+1415555267')).toBeUndefined();
    expect(normalizePhone('+1415555267123456')).toBeUndefined();
    expect(normalizePhone('+0123456789')).toBeUndefined();
    expect(normalizePhone('+1415555CALL')).toBeUndefined();
    expect(normalizePhone('not-a-number')).toBeUndefined();
    expect(normalizePhone('+14155552671 ext. 12')).toBeUndefined();
    expect(normalizePhone('++14155552671')).toBeUndefined();
    expect(normalizePhone('+1500555000')).toBeUndefined();
    expect(normalizePhone('+150055500011')).toBeUndefined();
  });
});

describe('isEmail', () => {
  it('accepts practical addresses', () => {
    for (const ok of ['bounce@sandbox.test', 'a@b.co', 'first.last+tag@sub.example.com', "o'brien@example.ie", 'X_Y-z@EXAMPLE.COM', 'user@xn--bcher-kva.example', 'u@a-b.example.org']) {
      expect(isEmail(ok), ok).toBe(true);
    }
  });

  it('rejects malformed addresses', () => {
    for (const bad of [
      '', 'plain', '@example.com', 'user@', 'user@localhost', 'user@@example.com', 'us er@example.com', 'user@exa mple.com',
      '.user@example.com', 'user.@example.com', 'us..er@example.com', 'user@-example.com', 'user@example-.com', 'user@example..com',
      'user@example.c', 'user@example.123', 'user@.example.com', 'user@example.com.', '"quoted"@example.com', 'user@exa_mple.com',
    ]) {
      expect(isEmail(bad), bad).toBe(false);
    }
  });

  it('limits the address to 254 characters and the local part to 64', () => {
    const domain = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.com`;
    const local = 'x'.repeat(254 - domain.length - 1);
    expect(local.length).toBeLessThanOrEqual(64);
    expect(isEmail(`${local}@${domain}`)).toBe(true);
    expect(isEmail(`${local}y@${domain}`)).toBe(false);
    expect(isEmail(`${'x'.repeat(64)}@example.com`)).toBe(true);
    expect(isEmail(`${'x'.repeat(65)}@example.com`)).toBe(false);
    expect(isEmail(`a@${'b'.repeat(64)}.com`)).toBe(false);
  });
});

describe('phoneSchema and emailSchema', () => {
  const schema = z.object({ to: phoneSchema, email: emailSchema.optional() });

  it('normalizes to E.164 and lower-cases emails', () => {
    expect(parseInput(schema, { to: '+1 415 555 2671', email: '  Bounce@Sandbox.TEST ' })).toEqual({ to: '+14155552671', email: 'bounce@sandbox.test' });
  });

  it('raises INVALID_PHONE_NUMBER with the field', () => {
    const e = errorOf(() => parseInput(schema, { to: '12345' }));
    expect(e.code).toBe('INVALID_PHONE_NUMBER');
    expect(e.details).toMatchObject({ field: 'to' });
  });

  it('raises INVALID_EMAIL with the field', () => {
    const e = errorOf(() => parseInput(schema, { to: '+15005550001', email: 'nope' }));
    expect(e.code).toBe('INVALID_EMAIL');
    expect(e.details).toMatchObject({ field: 'email' });
  });

  it('reports an absent phone as MISSING_REQUIRED_FIELD and a non-string as VALIDATION_ERROR', () => {
    expect(errorOf(() => parseInput(schema, {})).code).toBe('MISSING_REQUIRED_FIELD');
    const e = errorOf(() => parseInput(schema, { to: 14155552671 }));
    expect(e.code).toBe('VALIDATION_ERROR');
    expect(e.details.field).toBe('to');
  });
});
