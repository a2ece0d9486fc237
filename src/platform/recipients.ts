/**
 * Recipient addresses: E.164 phone numbers (SMS, WhatsApp, RCS, Viber) and email addresses, as
 * plain checks for the service and as zod fields that raise the spec's INVALID_PHONE_NUMBER and
 * INVALID_EMAIL through `params.code` (see parseInput in platform/operations.ts).
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { z } from 'zod';

/** The sandbox's documented magic numbers (+15005550001 … +15005550009 and the rest of the block). */
const SANDBOX_NUMBER = /^\+1500555\d{4}$/;
/** A leading '+', then digits with the usual visual separators (spaces, dashes, dots, parentheses). */
const PHONE_TEXT = /^\+[0-9][0-9 ().-]*$/;
/** E.164: at most 15 digits after the '+'. */
const E164 = /^\+[1-9]\d{1,14}$/;

/**
 * The E.164 form of a phone number, or undefined when it is not a valid number. The input must
 * start with '+' (no national formats); spaces, dashes, dots and parentheses are tolerated and removed.
 */
export function normalizePhone(input: string): string | undefined {
  // Parsing with libphonenumber costs tens of microseconds; the same numbers come back often.
  if (canonical.has(input)) return input;
  if (normalized.has(input)) return normalized.get(input);
  const result = parsePhone(input);
  if (normalized.size >= NORMALIZED_MAX) normalized.delete(normalized.keys().next().value!);
  normalized.set(input, result);
  if (result !== undefined) {
    if (canonical.size >= CANONICAL_MAX) canonical.clear();
    canonical.add(result);
  }
  return result;
}

/** Recently normalized inputs (insertion order; the oldest is dropped first). */
const normalized = new Map<string, string | undefined>();
const NORMALIZED_MAX = 10_000;
/**
 * Numbers normalizePhone answered: each is its own E.164 form, so it is answered again without
 * parsing. They come back as recipients: a campaign normalizes its whole audience when it freezes
 * it, then each send's consent check normalizes the same addresses again, far more of them than
 * the cache above keeps (a 100,000-recipient campaign parsed every number twice). Strings only,
 * emptied when full.
 */
const canonical = new Set<string>();
const CANONICAL_MAX = 250_000;

function parsePhone(input: string): string | undefined {
  const text = input.trim();
  if (!PHONE_TEXT.test(text)) return undefined;
  const compact = text.replace(/[ ().-]/g, '');
  if (SANDBOX_NUMBER.test(compact)) return compact;
  if (!E164.test(compact)) return undefined;
  const parsed = parsePhoneNumberFromString(compact);
  if (!parsed || !parsed.isValid()) return undefined;
  return parsed.number;
}

const EMAIL_MAX = 254;
const LOCAL_PART_MAX = 64;
/** Dot-atom local part of RFC 5322 (no quoted strings, no comments). */
const LOCAL_PART = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const DOMAIN_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
/** Top-level domain: letters, or an IDN in punycode. */
const TLD = /^(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9-]{1,59})$/;

/** Practical email syntax: `local@domain.tld`, ASCII, no spaces, at most 254 characters, valid DNS labels. */
export function isEmail(input: string): boolean {
  if (input.length === 0 || input.length > EMAIL_MAX) return false;
  const at = input.lastIndexOf('@');
  if (at <= 0 || at === input.length - 1) return false;
  const local = input.slice(0, at);
  const domain = input.slice(at + 1);
  if (local.length > LOCAL_PART_MAX || !LOCAL_PART.test(local)) return false;
  if (domain.length > 253) return false;
  const labels = domain.split('.');
  if (labels.length < 2) return false;
  if (!labels.every((l) => DOMAIN_LABEL.test(l))) return false;
  return TLD.test(labels[labels.length - 1]!);
}

/** A phone number field: any string in, its E.164 form out; INVALID_PHONE_NUMBER otherwise. */
export const phoneSchema = z.string().transform((value, ctx) => {
  const e164 = normalizePhone(value);
  if (e164 === undefined) {
    ctx.addIssue({ code: 'custom', params: { code: 'INVALID_PHONE_NUMBER' }, message: 'must be a valid phone number in E.164 format, such as +14155552671' });
    return z.NEVER;
  }
  return e164;
});

/** An email field: trimmed and lower-cased; INVALID_EMAIL when the syntax is wrong. */
export const emailSchema = z.string().transform((value, ctx) => {
  const email = value.trim();
  if (!isEmail(email)) {
    ctx.addIssue({ code: 'custom', params: { code: 'INVALID_EMAIL' }, message: 'must be a valid email address' });
    return z.NEVER;
  }
  return email.toLowerCase();
});
