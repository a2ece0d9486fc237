/**
 * Input schemas of the numbers context, shared by GraphQL and REST (snake_case wire shapes).
 * parseInput maps an omitted required field to MISSING_REQUIRED_FIELD and `params.code`
 * refinements to INVALID_PHONE_NUMBER; webhook URLs are checked by the service (INVALID_WEBHOOK_URL).
 */
import { isSupportedCountry } from 'libphonenumber-js/max';
import { z } from 'zod';
import { prefixOf } from '../../platform/ids.ts';
import { NUMBER_CAPABILITIES, NUMBER_TYPES } from '../../providers/numbers/types.ts';
import { phoneSchema } from '../../platform/recipients.ts';
import { pageInput } from '../../platform/inputs.ts';
import { PORT_STATUSES, type VoiceRoute } from './numbers.entities.ts';

/** Letters in `contains` stand for their keypad digits (vanity numbers: `FLOWERS` → 3569377). */
const KEYPAD: Record<string, string> = Object.fromEntries(
  ['ABC', 'DEF', 'GHI', 'JKL', 'MNO', 'PQRS', 'TUV', 'WXYZ'].flatMap((letters, i) => [...letters].map((l) => [l, String(i + 2)])),
);

const country = z.string().trim().transform((value, ctx) => {
  const code = value.toUpperCase();
  if (!/^[A-Z]{2}$/.test(code) || !isSupportedCountry(code)) {
    ctx.addIssue({ code: 'custom', message: 'must be a supported ISO 3166-1 alpha-2 country code, such as US or GB' });
    return z.NEVER;
  }
  return code;
});

/** `sms,voice` (REST) or `['sms', 'voice']` (GraphQL): every listed capability is required. */
const capabilities = z.preprocess(
  (v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim().toLowerCase()) : v),
  z.array(z.enum(NUMBER_CAPABILITIES)).max(NUMBER_CAPABILITIES.length).transform((caps) => [...new Set(caps)].sort()),
);

export const searchNumbersInput = z.object({
  country,
  type: z.enum(NUMBER_TYPES).nullish(),
  capabilities: capabilities.nullish(),
  area_code: z.string().trim().regex(/^\d{1,6}$/, 'must be 1 to 6 digits').nullish(),
  contains: z.string().trim().min(1).max(15)
    .regex(/^[0-9*A-Za-z]+$/, 'must be digits, letters (keypad) and * (any one digit)')
    .transform((s) => s.toUpperCase().replace(/[A-Z]/g, (l) => KEYPAD[l]!))
    .nullish(),
  /** Range-checked by the service (400 VALIDATION_ERROR), like list limits. */
  limit: z.number().int().nullish(),
});
export type SearchNumbersInput = z.infer<typeof searchNumbersInput>;

const webhookUrl = z.string().trim().min(1).max(2048);
const agentId = z.string().trim().refine((id) => prefixOf(id) === 'agt', 'must be an agent id (agt_…)');

/**
 * Where an inbound call to the number goes (live SIP trunks): an IVR flow, a voicemail box, or
 * forwarded to another number. Null (or absent) leaves inbound calls to `agent_id`, if any.
 */
export const voiceRoute = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ivr'), ivr_id: z.string().trim().refine((id) => prefixOf(id) === 'ivr', 'must be an IVR flow id (ivr_…)') }).strict(),
  z.object({ type: z.literal('voicemail'), voicemail_id: z.string().trim().refine((id) => prefixOf(id) === 'vmail', 'must be a voicemail box id (vmail_…)') }).strict(),
  z.object({ type: z.literal('forward'), to: phoneSchema }).strict(),
]) satisfies z.ZodType<VoiceRoute>;
export type { VoiceRoute };

export const buyNumberInput = z.object({
  number: phoneSchema,
  friendly_name: z.string().trim().min(1).max(64).nullish(),
  sms_webhook_url: webhookUrl.nullish(),
  voice_webhook_url: webhookUrl.nullish(),
  agent_id: agentId.nullish(),
});
export type BuyNumberInput = z.infer<typeof buyNumberInput>;

/**
 * The settings a purchase takes, and `voice_route`: absent leaves a field as it is; null removes it
 * (friendly_name returns to the formatted number).
 */
export const updateNumberInput = buyNumberInput.omit({ number: true }).extend({ voice_route: voiceRoute.nullish() });
export type UpdateNumberInput = z.infer<typeof updateNumberInput>;

export const listNumbersInput = pageInput.extend({
  country: country.nullish(),
  capabilities: capabilities.nullish(),
});
export type ListNumbersInput = z.infer<typeof listNumbersInput>;

export const MAX_PORT_NUMBERS = 100;

export const createPortInput = z.object({
  numbers: z.array(phoneSchema).min(1).max(MAX_PORT_NUMBERS).refine((list) => new Set(list).size === list.length, 'must not repeat a number'),
  current_carrier: z.string().trim().min(1).max(100),
  authorization_name: z.string().trim().min(1).max(200),
  account_number: z.string().trim().min(1).max(64).nullish(),
  pin: z.string().trim().regex(/^[0-9A-Za-z]{1,20}$/, 'must be 1 to 20 letters or digits').nullish(),
});
export type CreatePortInput = z.infer<typeof createPortInput>;

export const listPortsInput = pageInput.extend({ status: z.enum(PORT_STATUSES).nullish() });
export type ListPortsInput = z.infer<typeof listPortsInput>;
