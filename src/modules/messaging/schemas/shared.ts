/**
 * The parts every messaging input schema shares: limits, issue helpers that raise the spec's codes
 * through parseInput, field builders (text, URLs, metadata) and the fields common to every send.
 *
 * The input schemas of the messaging context, shared by GraphQL and REST, are one file per channel
 * in this folder (sms, whatsapp, email, rcs, viber), the message list filters (messages.ts) and
 * templates (templates.ts): REST bodies (snake_case, as in the spec) validated and normalized into
 * the shapes the services work with. Unknown keys are refused (parseInput); null counts as absent
 * for optional fields; an omitted required field is MISSING_REQUIRED_FIELD with details.field, and
 * refinements carry `params.code` (INVALID_PHONE_NUMBER, INVALID_EMAIL, INVALID_TEMPLATE,
 * MESSAGE_TOO_LONG, MEDIA_TOO_LARGE).
 */
import { z } from 'zod';
import { SMS_MAX_CHARACTERS } from '../segmentation.ts';

export type MetadataValue = string | number | boolean | null;
export type Metadata = Record<string, MetadataValue>;
export type { MessageDirection, MessageStatus } from '../messaging.entities.ts';

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

export const MB = 1024 * 1024;

export const MESSAGE_LIMITS = {
  smsBody: SMS_MAX_CHARACTERS,
  whatsAppText: 4096,
  whatsAppCaption: 1024,
  emailSubject: 998,
  /** html + text, in UTF-8 bytes. */
  emailContentBytes: MB,
  emailRecipients: 50,
  rcsBody: 3072,
  rcsSuggestions: 11,
  rcsCardSuggestions: 4,
  rcsCardTitle: 200,
  rcsCardDescription: 2000,
  rcsSuggestionText: 25,
  rcsCarouselMin: 2,
  rcsCarouselMax: 10,
  viberBody: 7000,
  viberButtonText: 30,
  metadataKeys: 50,
  metadataBytes: 8 * 1024,
  templateContent: 4096,
  templateName: 100,
  urlLength: 2048,
} as const;

// ---------------------------------------------------------------------------------------------
// Issue helpers
// ---------------------------------------------------------------------------------------------

export type IssueSink = { addIssue(issue: z.core.$ZodSuperRefineIssue): void };
export type Path = (string | number)[];
export type CustomCode = 'INVALID_PHONE_NUMBER' | 'INVALID_EMAIL' | 'INVALID_TEMPLATE' | 'MESSAGE_TOO_LONG' | 'MEDIA_TOO_LARGE';

/** An omitted field: parseInput answers MISSING_REQUIRED_FIELD with details.field = the full path. */
export function missing(ctx: IssueSink, path: Path, message: string, expected: 'string' | 'object' | 'array' = 'string'): void {
  ctx.addIssue({ code: 'invalid_type', expected, input: undefined, path, message });
}

/** A rejected value: VALIDATION_ERROR, or the spec code given. */
export function invalid(ctx: IssueSink, path: Path, message: string, code?: CustomCode): void {
  ctx.addIssue({ code: 'custom', path, message, ...(code ? { params: { code } } : {}) });
}

export function isBlank(s: string | undefined): boolean {
  return s === undefined || s.trim() === '';
}

/** Whether `s` has more than `max` Unicode code points. */
export function longerThan(s: string, max: number): boolean {
  if (s.length <= max) return false;
  let n = 0;
  for (const _ of s) if (++n > max) return true;
  return false;
}

/** Drops undefined properties, so outputs only carry what was given. */
export function compact<T extends Record<string, unknown>>(o: T): T {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}

// ---------------------------------------------------------------------------------------------
// Field builders
// ---------------------------------------------------------------------------------------------

/** Optional field: absent or null gives undefined. */
export function optional<T extends z.ZodType>(schema: T) {
  return schema.nullish().transform((v) => v ?? undefined).optional();
}

/** A string of at most `max` code points; over it: MESSAGE_TOO_LONG when `tooLong` is set, else VALIDATION_ERROR. */
export function text(max: number, tooLong?: 'MESSAGE_TOO_LONG') {
  return z.string().superRefine((v, ctx) => {
    if (longerThan(v, max)) invalid(ctx, [], `must be at most ${max} characters`, tooLong);
  });
}

/** A required string: absent, empty or blank is MISSING_REQUIRED_FIELD. */
export function requiredText(max: number, tooLong?: 'MESSAGE_TOO_LONG') {
  return z.string().superRefine((v, ctx) => {
    if (isBlank(v)) missing(ctx, [], 'must not be empty');
    else if (longerThan(v, max)) invalid(ctx, [], `must be at most ${max} characters`, tooLong);
  });
}

/** An optional message body: blank counts as absent, the maximum is MESSAGE_TOO_LONG. */
export function optionalBody(max: number) {
  return text(max, 'MESSAGE_TOO_LONG').nullish().transform((v) => (isBlank(v ?? undefined) ? undefined : v!)).optional();
}

function parseUrl(s: string): URL | undefined {
  if (s.length > MESSAGE_LIMITS.urlLength) return undefined;
  try {
    return new URL(s);
  } catch {
    return undefined;
  }
}

/** A public https URL (media, card images, buttons, action suggestions). */
export function isHttpsUrl(s: string): boolean {
  const u = parseUrl(s);
  return u !== undefined && u.protocol === 'https:' && u.hostname !== '' && !u.username && !u.password;
}

const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** A webhook URL: https, or plain http only to localhost / 127.0.0.1 (development). */
export function isAllowedWebhookUrl(s: string): boolean {
  const u = parseUrl(s);
  if (u === undefined || u.hostname === '' || u.username || u.password) return false;
  if (u.protocol === 'https:') return true;
  return u.protocol === 'http:' && LOCAL_HOSTS.has(u.hostname);
}

export const httpsUrl = z.string().trim().refine(isHttpsUrl, 'must be an https URL');
export const requiredHttpsUrl = z.string().trim().superRefine((v, ctx) => {
  if (v === '') missing(ctx, [], 'must not be empty');
  else if (!isHttpsUrl(v)) invalid(ctx, [], 'must be an https URL');
});
const webhookUrl = z.string().trim().refine(isAllowedWebhookUrl, 'must be an https URL (plain http is allowed only for localhost and 127.0.0.1)');

const metadataSchema = z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])).superRefine((m, ctx) => {
  const keys = Object.keys(m).length;
  if (keys > MESSAGE_LIMITS.metadataKeys) invalid(ctx, [], `must have at most ${MESSAGE_LIMITS.metadataKeys} keys (got ${keys})`);
  else if (Buffer.byteLength(JSON.stringify(m)) > MESSAGE_LIMITS.metadataBytes) invalid(ctx, [], 'must serialize to at most 8 KB of JSON');
});

export const templateIdField = z.string().trim().min(1).max(100);
export const variablesSchema = z.record(z.string(), z.unknown());

/** Fields every send accepts. */
export const commonFields = {
  from: optional(z.string().trim().min(1).max(100)),
  webhook_url: optional(webhookUrl),
  metadata: optional(metadataSchema),
};

/** Template alternative to a body (SMS, Viber, RCS text). */
export const templateFields = {
  template_id: optional(templateIdField),
  variables: optional(variablesSchema),
};

/** Body XOR template_id; returns false (after an issue) when neither or both are given. */
export function bodyOrTemplate(ctx: IssueSink, v: { body?: string; template_id?: string }, alsoEnough = false): boolean {
  if (v.body !== undefined && v.template_id !== undefined) {
    invalid(ctx, ['template_id'], 'Send either body or template_id, not both');
    return false;
  }
  if (v.body === undefined && v.template_id === undefined && !alsoEnough) {
    missing(ctx, ['body'], 'body is required (or template_id with variables)');
    return false;
  }
  return true;
}


/** A language code such as en, en_US, pt-BR (WhatsApp templates and message templates). */
export const LANGUAGE = /^[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]{2,8})*$/;
