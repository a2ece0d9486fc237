/** Input schemas of the billing context (REST wire shapes; GraphQL converts to them). */
import { z } from 'zod';
import { cents, pageInput } from '../../platform/inputs.ts';

const minor = cents(z.number().int().min(0).max(100_000_000_00));
const httpUrl = z.string().trim().min(1).max(2048).refine((u) => {
  try {
    const p = new URL(u).protocol;
    return p === 'https:' || p === 'http:';
  } catch {
    return false;
  }
}, 'must be an http(s) URL');

export const checkoutInput = z.object({
  priceId: z.string().trim().min(1).max(200),
  successUrl: httpUrl,
  cancelUrl: httpUrl,
});
export type CheckoutInput = z.infer<typeof checkoutInput>;

/** `amount` in minor units: at least 100 (1.00) and at most 1,000,000.00 per top-up. */
export const topUpInput = z.object({ amount: cents(z.number().int().min(100).max(100_000_000)) });
export type TopUpInput = z.infer<typeof topUpInput>;

export const autoReloadInput = z.object({
  enabled: z.boolean(),
  threshold: minor.nullish(),
  amount: cents(z.number().int().min(100).max(100_000_000)).nullish(),
});
export type AutoReloadInput = z.infer<typeof autoReloadInput>;

const isoDate = z.string().trim().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be an ISO 8601 date (YYYY-MM-DD)')
  .refine((s) => !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) && new Date(`${s}T00:00:00Z`).toISOString().startsWith(s), 'must be a valid date');

export const usageHistoryInput = z.object({
  start_date: isoDate,
  end_date: isoDate,
  granularity: z.enum(['day', 'month']).nullish(),
});
export type UsageHistoryInput = z.infer<typeof usageHistoryInput>;

export const listInvoicesInput = pageInput;
export type ListInvoicesInput = z.infer<typeof listInvoicesInput>;
