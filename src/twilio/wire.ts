/**
 * Twilio's wire conventions: RFC 2822 dates, application/x-www-form-urlencoded bodies (a repeated
 * parameter, such as MediaUrl or StatusCallbackEvent, arrives once per value), and page-based lists
 * with `next_page_uri`.
 */
import type { Page } from '../platform/pagination.ts';
import { TwilioError } from './errors.ts';

/** `Thu, 30 Jul 2015 20:12:31 +0000`, or null. */
export function rfc2822(d: Date | null | undefined): string | null {
  return d ? d.toUTCString().replace('GMT', '+0000') : null;
}

/**
 * What the ledger charged, as Twilio writes a price: a negative decimal string in major units
 * (`-0.0075`… here cents, so two decimals: `-0.75`), with the currency upper-cased; null (and the
 * account's `USD`) until charged.
 */
export function twilioPrice(charge: { amount: number; currency: string } | null | undefined): { price: string | null; price_unit: string } {
  if (!charge) return { price: null, price_unit: 'USD' };
  return { price: (-charge.amount / 100).toFixed(2), price_unit: charge.currency.toUpperCase() };
}

export type FormValues = Record<string, string | string[]>;

/**
 * Reads parameters (a form body or a query string): only the names in `allowed` (else 400 20001,
 * "unknown parameter"); a name in `repeated` collects every value in order, any other name may be
 * given once.
 */
export function readParams(params: URLSearchParams, allowed: readonly string[], repeated: readonly string[] = []): FormValues {
  const out: FormValues = {};
  for (const [name, value] of params) {
    const known = allowed.includes(name) || repeated.includes(name);
    if (!known) throw new TwilioError(400, 20001, `Unknown parameter: ${name}`);
    if (repeated.includes(name)) {
      ((out[name] ??= []) as string[]).push(value);
    } else if (name in out) {
      throw new TwilioError(400, 20001, `Parameter ${name} may be given once`);
    } else {
      out[name] = value;
    }
  }
  return out;
}

/** A body's parameters: refused unless it is a form (Twilio's APIs take no JSON). */
export function formBody(text: string, contentType: string | undefined): URLSearchParams {
  if (text.trim() === '') return new URLSearchParams();
  if (!contentType || !/^application\/x-www-form-urlencoded\b/i.test(contentType)) {
    throw new TwilioError(400, 20001, `Content-Type must be application/x-www-form-urlencoded, got ${contentType ?? 'none'}`);
  }
  return new URLSearchParams(text);
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 1000;

/** PageSize, Page and PageToken of a list request (PageToken is this service's cursor). */
export function pageParams(q: FormValues): { pageSize: number; page: number; cursor: string | undefined } {
  const size = q.PageSize === undefined ? DEFAULT_PAGE_SIZE : Number(q.PageSize);
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) throw new TwilioError(400, 20001, `PageSize must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  const page = q.Page === undefined ? 0 : Number(q.Page);
  if (!Number.isInteger(page) || page < 0) throw new TwilioError(400, 20001, 'Page must be a non-negative integer');
  if (page > 0 && q.PageToken === undefined) throw new TwilioError(400, 20001, 'Page past the first needs the PageToken of the previous page\'s next_page_uri');
  return { pageSize: size, page, cursor: typeof q.PageToken === 'string' ? q.PageToken : undefined };
}

/**
 * A 2010-04-01 list page. The service's lists page by cursor, at most 100 items at a time: a
 * larger PageSize is answered with at most 100 and the next page continues from there.
 */
export function listPage<T>(key: string, path: string, filters: Record<string, string>, request: { pageSize: number; page: number }, page: Page<T>, present: (item: T) => unknown) {
  const query = (extra: Record<string, string>) => `${path}?${new URLSearchParams({ ...filters, PageSize: String(request.pageSize), ...extra })}`;
  const start = request.page * request.pageSize;
  const items = page.items.map(present);
  return {
    [key]: items,
    end: start + Math.max(items.length - 1, 0),
    first_page_uri: query({ Page: '0' }),
    next_page_uri: page.hasMore && page.nextCursor ? query({ Page: String(request.page + 1), PageToken: page.nextCursor }) : null,
    page: request.page,
    page_size: request.pageSize,
    previous_page_uri: null,
    start,
    uri: query(request.page > 0 ? { Page: String(request.page) } : {}),
  };
}
