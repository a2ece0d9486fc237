/** Input schemas of the verify context, shared by GraphQL and REST (snake_case wire shape). */
import { z } from 'zod';
import { pageInput } from '../../platform/inputs.ts';
import { CODE_LENGTH, LOCALES, normalizeLocale, type Locale } from './verify.codes.ts';
import { VERIFICATION_STATUSES, VERIFY_CHANNELS } from './verify.states.ts';

export const MAX_ATTEMPTS = { min: 1, max: 10, default: 5 } as const;
export const CODE_TTL_SECONDS = { min: 60, max: 86_400, default: 600 } as const;

const localeSchema = z.string().transform((value, ctx) => {
  const locale = normalizeLocale(value);
  if (!locale) {
    ctx.addIssue({ code: 'custom', params: { code: 'VALIDATION_ERROR' }, message: `locale must be one of ${LOCALES.join(', ')} (a region such as es-MX is accepted)` });
    return z.NEVER;
  }
  return locale;
});

const codeLength = z.number().int().min(CODE_LENGTH.min).max(CODE_LENGTH.max);
const maxAttempts = z.number().int().min(MAX_ATTEMPTS.min).max(MAX_ATTEMPTS.max);

export type SendVerificationInput = {
  /** E.164 for sms and whatsapp, an email address for email; checked by the service per channel. */
  to: string;
  channel: (typeof VERIFY_CHANNELS)[number];
  max_attempts?: number | null;
  code_length?: number | null;
  locale?: Locale | null;
};

export const sendVerificationInput: z.ZodType<SendVerificationInput> = z.object({
  to: z.string().trim().min(1).max(320),
  channel: z.enum(VERIFY_CHANNELS),
  max_attempts: maxAttempts.nullish(),
  code_length: codeLength.nullish(),
  locale: localeSchema.nullish(),
});

export const checkVerificationInput = z.object({
  verification_id: z.string().trim().min(1).max(100),
  // A string, never a number: a number would lose a code's leading zeros.
  code: z.string().trim().min(1).max(32),
});
export type CheckVerificationInput = z.infer<typeof checkVerificationInput>;

export const listVerificationsInput = pageInput.extend({
  status: z.enum(VERIFICATION_STATUSES).nullish(),
  channel: z.enum(VERIFY_CHANNELS).nullish(),
  to: z.string().trim().min(1).max(320).nullish(),
});
export type ListVerificationsInput = z.infer<typeof listVerificationsInput>;

/** Fields left out keep their value; null puts a field back to its default. */
export const updateVerifySettingsInput = z.object({
  code_ttl_seconds: z.number().int().min(CODE_TTL_SECONDS.min).max(CODE_TTL_SECONDS.max).nullish(),
  code_length: codeLength.nullish(),
  max_attempts: maxAttempts.nullish(),
  app_name: z.string().trim().min(1).max(30)
    .regex(/^[\p{L}\p{N}][\p{L}\p{N} .&'_-]*$/u, 'letters, digits, spaces and . & \' _ - only (it is shown inside the message)').nullish(),
});
export type UpdateVerifySettingsInput = z.infer<typeof updateVerifySettingsInput>;
