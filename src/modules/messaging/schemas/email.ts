/** Email: `POST /v1/messages/email`. */
import { z } from 'zod';
import { emailSchema, isEmail } from '../../../platform/recipients.ts';
import { MESSAGE_LIMITS, missing, invalid, isBlank, compact, optional, requiredText, commonFields, type Path, type Metadata } from './shared.ts';

export type SendEmailInput = {
  to: string[];
  subject: string;
  html?: string;
  text?: string;
  from?: string;
  reply_to?: string;
  webhook_url?: string;
  metadata?: Metadata;
};

/** `to`: one address or an array of 1–50; lower-cased, duplicates dropped. */
const emailRecipients = z.unknown().optional().transform((value, ctx): string[] => {
  if (value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0)) {
    missing(ctx, [], 'to is required');
    return z.NEVER;
  }
  const single = typeof value === 'string';
  const list: unknown[] | undefined = single ? [value] : Array.isArray(value) ? value : undefined;
  if (list === undefined) {
    invalid(ctx, [], 'must be an email address or an array of email addresses');
    return z.NEVER;
  }
  if (list.length > MESSAGE_LIMITS.emailRecipients) {
    invalid(ctx, [], `must have at most ${MESSAGE_LIMITS.emailRecipients} recipients (got ${list.length})`);
    return z.NEVER;
  }
  const out: string[] = [];
  for (const [i, item] of list.entries()) {
    const path: Path = single ? [] : [i];
    if (typeof item !== 'string') {
      invalid(ctx, path, 'must be an email address');
      return z.NEVER;
    }
    const address = item.trim();
    if (!isEmail(address)) {
      invalid(ctx, path, `${JSON.stringify(item)} is not a valid email address`, 'INVALID_EMAIL');
      return z.NEVER;
    }
    out.push(address.toLowerCase());
  }
  return [...new Set(out)];
});

export const sendEmailInput: z.ZodType<SendEmailInput> = z.object({
  to: emailRecipients,
  subject: requiredText(MESSAGE_LIMITS.emailSubject).refine((s) => !/[\r\n]/.test(s), 'must be a single line'),
  html: optional(z.string()),
  text: optional(z.string()),
  from: optional(emailSchema),
  reply_to: optional(emailSchema),
  webhook_url: commonFields.webhook_url,
  metadata: commonFields.metadata,
}).transform((v, ctx): SendEmailInput => {
  const html = isBlank(v.html) ? undefined : v.html;
  const textPart = isBlank(v.text) ? undefined : v.text;
  if (html === undefined && textPart === undefined) {
    missing(ctx, ['text'], 'html and/or text is required');
    return z.NEVER;
  }
  const htmlBytes = html === undefined ? 0 : Buffer.byteLength(html);
  const textBytes = textPart === undefined ? 0 : Buffer.byteLength(textPart);
  if (htmlBytes + textBytes > MESSAGE_LIMITS.emailContentBytes) {
    invalid(ctx, [htmlBytes >= textBytes ? 'html' : 'text'], 'html and text together must be at most 1 MB', 'MESSAGE_TOO_LONG');
    return z.NEVER;
  }
  return compact({ ...v, subject: v.subject, html, text: textPart });
});
