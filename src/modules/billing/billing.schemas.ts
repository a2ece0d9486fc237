/** Input schemas of the billing context (REST wire shapes; GraphQL converts to them). */
import { z } from 'zod';
import { cents, pageInput } from '../../platform/inputs.ts';
import { PLANS } from '../../platform/tenancy/tenancy.entities.ts';

const minor = cents(z.number().int().min(0).max(100_000_000_00));
const httpUrl = z.string().trim().min(1).max(2048).refine((u) => {
  try {
    const p = new URL(u).protocol;
    return p === 'https:' || p === 'http:';
  } catch {
    return false;
  }
}, 'must be an http(s) URL');

/**
 * The checkout fields under the spec's names (`priceId`, `successUrl`, `cancelUrl`) and their
 * snake_case twins, as the rest of the API and `GET /v1/billing/plans`' `price_id` spell them:
 * either spelling, not two different values. `fields` says which spelling the client used, so an
 * error names the field it sent.
 */
const CHECKOUT_FIELDS = { priceId: 'price_id', successUrl: 'success_url', cancelUrl: 'cancel_url' } as const;
type CheckoutField = keyof typeof CHECKOUT_FIELDS;

const priceId = z.string().trim().min(1).max(200);
const either = (spec: string, twin: string) => ({ description: `Required: ${spec} or ${twin} (the same field in two spellings)` });
export const checkoutInput = z.object({
  priceId: priceId.meta(either('priceId', 'price_id')).optional(),
  price_id: priceId.meta(either('priceId', 'price_id')).optional(),
  successUrl: httpUrl.meta(either('successUrl', 'success_url')).optional(),
  success_url: httpUrl.meta(either('successUrl', 'success_url')).optional(),
  cancelUrl: httpUrl.meta(either('cancelUrl', 'cancel_url')).optional(),
  cancel_url: httpUrl.meta(either('cancelUrl', 'cancel_url')).optional(),
}).superRefine((v, ctx) => {
  for (const [spec, twin] of Object.entries(CHECKOUT_FIELDS) as [CheckoutField, keyof typeof v][]) {
    const a = v[spec];
    const b = v[twin];
    if (a === undefined && b === undefined) {
      ctx.addIssue({ code: 'invalid_type', expected: 'string', input: undefined, path: [spec], message: `${spec} is required (or ${twin})` });
    } else if (a !== undefined && b !== undefined && a !== b) {
      ctx.addIssue({ code: 'custom', path: [twin], message: `${spec} and ${twin} are the same field; send one of them` });
    }
  }
  // Runs beside the fields' own problems, so a missing field is reported with an invalid one.
}, { when: () => true }).transform((v) => {
  const pick = (spec: CheckoutField) => (v[spec] !== undefined ? { value: v[spec], field: spec } : { value: v[CHECKOUT_FIELDS[spec]]!, field: CHECKOUT_FIELDS[spec] });
  const price = pick('priceId');
  const success = pick('successUrl');
  const cancel = pick('cancelUrl');
  return { priceId: price.value, successUrl: success.value, cancelUrl: cancel.value, fields: { priceId: price.field, successUrl: success.field, cancelUrl: cancel.field } };
});
export type CheckoutInput = z.output<typeof checkoutInput>;

/** An owner's plan change: the plan's id as `GET /v1/billing/plans` lists it. */
export const changePlanInput = z.object({ plan_id: z.enum(PLANS) });
export type ChangePlanInput = z.infer<typeof changePlanInput>;

/** `amount` in minor units: at least 100 (1.00) and at most 1,000,000.00 per top-up. */
export const topUpInput = z.object({ amount: cents(z.number().int().min(100).max(100_000_000)) });

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

export const listInvoicesInput = pageInput;
export type ListInvoicesInput = z.infer<typeof listInvoicesInput>;
