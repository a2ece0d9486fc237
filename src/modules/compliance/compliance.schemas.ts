/** Inputs of the compliance (10DLC) endpoints, snake_case as on the wire. */
import { isSupportedCountry } from 'libphonenumber-js/max';
import { z } from 'zod';
import { emailSchema, phoneSchema } from '../../platform/recipients.ts';
import { pageInput } from '../../platform/inputs.ts';
import { ENTITY_TYPES, OPT_IN_TYPES, USE_CASES, VERTICALS } from '../../providers/compliance/types.ts';
import { BRAND_STATUSES, TEN_DLC_STATUSES } from './compliance.entities.ts';

const text = (max: number) => z.string().trim().min(1).max(max);
const keywords = z.array(z.string().trim().regex(/^[A-Za-z0-9]{1,20}$/, 'keywords are 1-20 letters or digits').transform((k) => k.toUpperCase())).max(20);

export const createBrandInput = z.object({
  company_name: text(255),
  ein: z.string().trim().regex(/^\d{2}-?\d{7}$/, 'must be an EIN: 9 digits written NN-NNNNNNN').transform((e) => `${e.replace('-', '').slice(0, 2)}-${e.replace('-', '').slice(2)}`),
  country: z.string().trim().transform((value, ctx) => {
    const code = value.toUpperCase();
    if (!/^[A-Z]{2}$/.test(code) || !isSupportedCountry(code)) {
      ctx.addIssue({ code: 'custom', message: 'must be an ISO 3166-1 alpha-2 country code, such as US' });
      return z.NEVER;
    }
    return code;
  }),
  entity_type: z.enum(ENTITY_TYPES),
  vertical: z.enum(VERTICALS),
  stock_symbol: z.string().trim().regex(/^[A-Z.]{1,10}$/, 'must be an upper-case ticker such as ACME').nullish(),
  website: z.url({ protocol: /^https?$/ }).max(2048).nullish(),
  contact_email: emailSchema,
  contact_phone: phoneSchema,
}).superRefine((b, ctx) => {
  if (b.entity_type === 'public_profit' && !b.stock_symbol) ctx.addIssue({ code: 'custom', path: ['stock_symbol'], message: 'is required for public_profit brands' });
});
export type CreateBrandInput = z.infer<typeof createBrandInput>;

export const createTenDlcInput = z.object({
  brand_id: text(100),
  use_case: z.enum(USE_CASES as [string, ...string[]]).transform((u) => u as (typeof USE_CASES)[number]),
  description: text(4096).refine((d) => d.length >= 40, 'must be at least 40 characters'),
  sample_messages: z.array(text(1024).refine((m) => m.length >= 20, 'sample messages are at least 20 characters')).min(1).max(5),
  message_flow: text(4096).refine((d) => d.length >= 40, 'must be at least 40 characters'),
  opt_in_type: z.enum(OPT_IN_TYPES),
  opt_in_keywords: keywords.default([]),
  opt_out_keywords: keywords.default(['STOP']),
  help_keywords: keywords.default(['HELP']),
  number_ids: z.array(z.string().trim().min(1).max(100)).min(1).max(100).refine((ids) => new Set(ids).size === ids.length, 'must not repeat a number'),
});
export type CreateTenDlcInput = z.infer<typeof createTenDlcInput>;

export const listBrandsInput = pageInput.extend({ status: z.enum(BRAND_STATUSES).nullish() });
export type ListBrandsInput = z.infer<typeof listBrandsInput>;
export const listTenDlcInput = pageInput.extend({ status: z.enum(TEN_DLC_STATUSES).nullish(), brand_id: z.string().min(1).nullish() });
export type ListTenDlcInput = z.infer<typeof listTenDlcInput>;
