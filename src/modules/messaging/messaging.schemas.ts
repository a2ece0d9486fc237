/**
 * Input schemas of the messaging context, shared by GraphQL and REST: the REST request bodies
 * (snake_case, as in the spec) validated and normalized into the shapes the service works with.
 * Unknown keys are ignored; null counts as absent for optional fields. Issues are raised so that
 * parseInput (platform/operations.ts) maps them to the spec's codes: an omitted required field is
 * MISSING_REQUIRED_FIELD with details.field, and refinements carry `params.code` for
 * INVALID_PHONE_NUMBER, INVALID_EMAIL, INVALID_TEMPLATE, MESSAGE_TOO_LONG and MEDIA_TOO_LARGE.
 */
import { z } from 'zod';
import { CHANNELS, type Channel } from '../../providers/messaging/types.ts';
import { emailSchema, isEmail, normalizePhone, phoneSchema } from '../../platform/recipients.ts';
import { SMS_MAX_CHARACTERS } from './segmentation.ts';
import { isPlaceholderName, templateContentProblem } from './templating.ts';

// ---------------------------------------------------------------------------------------------
// Output types
// ---------------------------------------------------------------------------------------------

export type MetadataValue = string | number | boolean | null;
export type Metadata = Record<string, MetadataValue>;
export type MessageStatus = 'queued' | 'sent' | 'delivered' | 'failed' | 'read';
export type MessageDirection = 'outbound' | 'inbound';

export type SendSmsInput = {
  to: string;
  body?: string;
  template_id?: string;
  variables?: Record<string, unknown>;
  from?: string;
  webhook_url?: string;
  metadata?: Metadata;
};

export type WhatsAppMediaType = 'image' | 'video' | 'document' | 'audio';
export type WhatsAppTemplateParameter = { type: string; text?: string };
export type WhatsAppTemplateComponent = { type: string; parameters: WhatsAppTemplateParameter[] };
export type WhatsAppTemplate = { name: string; language: string; components: WhatsAppTemplateComponent[] };
export type WhatsAppMedia = {
  type: WhatsAppMediaType;
  url: string;
  mime_type?: string;
  size_bytes?: number;
  caption?: string;
  filename?: string;
};
export type SendWhatsAppInput = {
  to: string;
  kind: 'text' | 'template' | 'media';
  text?: { body: string };
  template?: WhatsAppTemplate;
  media?: WhatsAppMedia;
  from?: string;
  webhook_url?: string;
  metadata?: Metadata;
};

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

export type RcsSuggestion = { type: 'action' | 'reply'; text: string; url?: string };
export type RcsCard = { title: string; description?: string; media_url?: string; suggestions?: RcsSuggestion[] };
export type RcsMessageType = 'text' | 'rich_card' | 'carousel';
export type SendRcsInput = {
  to: string;
  type: RcsMessageType;
  body?: string;
  template_id?: string;
  variables?: Record<string, unknown>;
  suggestions?: RcsSuggestion[];
  card?: RcsCard;
  cards?: RcsCard[];
  fallback?: { channel: 'sms'; body?: string };
  from?: string;
  webhook_url?: string;
  metadata?: Metadata;
};

export type SendViberInput = {
  to: string;
  body?: string;
  template_id?: string;
  variables?: Record<string, unknown>;
  media_url?: string;
  button?: { text: string; url: string };
  from?: string;
  webhook_url?: string;
  metadata?: Metadata;
};

export type ListMessagesInput = {
  cursor?: string;
  limit?: number;
  channel?: Channel;
  status?: MessageStatus;
  to?: string;
  direction?: MessageDirection;
};

export type TemplateVariable = { name: string; example?: string; required?: boolean };
export type TemplateStatusInput = 'draft' | 'pending_approval';
export type CreateTemplateInput = {
  channel: Channel;
  name: string;
  content: string;
  category?: string;
  /** Defaults to 'en'. */
  language: string;
  variables?: TemplateVariable[];
  status?: TemplateStatusInput;
};
export type UpdateTemplateInput = {
  name?: string;
  content?: string;
  category?: string;
  language?: string;
  variables?: TemplateVariable[];
  status?: TemplateStatusInput;
};

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

const MB = 1024 * 1024;

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

/** Spec Limits table: WhatsApp media size (MB = 2^20 bytes) and accepted MIME types (undefined: any). */
export const WHATSAPP_MEDIA_LIMITS: Record<WhatsAppMediaType, { maxBytes: number; label: string; mimeTypes?: readonly string[] }> = {
  image: { maxBytes: 5 * MB, label: '5 MB', mimeTypes: ['image/jpeg', 'image/png'] },
  video: { maxBytes: 16 * MB, label: '16 MB', mimeTypes: ['video/mp4', 'video/3gpp'] },
  document: { maxBytes: 100 * MB, label: '100 MB' },
  audio: { maxBytes: 16 * MB, label: '16 MB', mimeTypes: ['audio/aac', 'audio/x-aac', 'audio/mpeg', 'audio/mp3', 'audio/ogg'] },
};

const WHATSAPP_MEDIA_TYPES = ['image', 'video', 'document', 'audio'] as const;
const MESSAGE_STATUSES = ['queued', 'sent', 'delivered', 'failed', 'read'] as const;
const TEMPLATE_STATUSES = ['draft', 'pending_approval'] as const;

// ---------------------------------------------------------------------------------------------
// Issue helpers
// ---------------------------------------------------------------------------------------------

type IssueSink = { addIssue(issue: z.core.$ZodSuperRefineIssue): void };
type Path = (string | number)[];
type CustomCode = 'INVALID_PHONE_NUMBER' | 'INVALID_EMAIL' | 'INVALID_TEMPLATE' | 'MESSAGE_TOO_LONG' | 'MEDIA_TOO_LARGE';

/** An omitted field: parseInput answers MISSING_REQUIRED_FIELD with details.field = the full path. */
function missing(ctx: IssueSink, path: Path, message: string, expected: 'string' | 'object' | 'array' = 'string'): void {
  ctx.addIssue({ code: 'invalid_type', expected, input: undefined, path, message });
}

/** A rejected value: VALIDATION_ERROR, or the spec code given. */
function invalid(ctx: IssueSink, path: Path, message: string, code?: CustomCode): void {
  ctx.addIssue({ code: 'custom', path, message, ...(code ? { params: { code } } : {}) });
}

function isBlank(s: string | undefined): boolean {
  return s === undefined || s.trim() === '';
}

/** Whether `s` has more than `max` Unicode code points. */
function longerThan(s: string, max: number): boolean {
  if (s.length <= max) return false;
  let n = 0;
  for (const _ of s) if (++n > max) return true;
  return false;
}

/** Drops undefined properties, so outputs only carry what was given. */
function compact<T extends Record<string, unknown>>(o: T): T {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}

// ---------------------------------------------------------------------------------------------
// Field builders
// ---------------------------------------------------------------------------------------------

/** Optional field: absent or null gives undefined. */
function optional<T extends z.ZodType>(schema: T) {
  return schema.nullish().transform((v) => v ?? undefined).optional();
}

/** A string of at most `max` code points; over it: MESSAGE_TOO_LONG when `tooLong` is set, else VALIDATION_ERROR. */
function text(max: number, tooLong?: 'MESSAGE_TOO_LONG') {
  return z.string().superRefine((v, ctx) => {
    if (longerThan(v, max)) invalid(ctx, [], `must be at most ${max} characters`, tooLong);
  });
}

/** A required string: absent, empty or blank is MISSING_REQUIRED_FIELD. */
function requiredText(max: number, tooLong?: 'MESSAGE_TOO_LONG') {
  return z.string().superRefine((v, ctx) => {
    if (isBlank(v)) missing(ctx, [], 'must not be empty');
    else if (longerThan(v, max)) invalid(ctx, [], `must be at most ${max} characters`, tooLong);
  });
}

/** An optional message body: blank counts as absent, the maximum is MESSAGE_TOO_LONG. */
function optionalBody(max: number) {
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

const httpsUrl = z.string().trim().refine(isHttpsUrl, 'must be an https URL');
const requiredHttpsUrl = z.string().trim().superRefine((v, ctx) => {
  if (v === '') missing(ctx, [], 'must not be empty');
  else if (!isHttpsUrl(v)) invalid(ctx, [], 'must be an https URL');
});
const webhookUrl = z.string().trim().refine(isAllowedWebhookUrl, 'must be an https URL (plain http is allowed only for localhost and 127.0.0.1)');

const metadataSchema = z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])).superRefine((m, ctx) => {
  const keys = Object.keys(m).length;
  if (keys > MESSAGE_LIMITS.metadataKeys) invalid(ctx, [], `must have at most ${MESSAGE_LIMITS.metadataKeys} keys (got ${keys})`);
  else if (Buffer.byteLength(JSON.stringify(m)) > MESSAGE_LIMITS.metadataBytes) invalid(ctx, [], 'must serialize to at most 8 KB of JSON');
});

const templateIdField = z.string().trim().min(1).max(100);
const variablesSchema = z.record(z.string(), z.unknown());

/** Fields every send accepts. */
const commonFields = {
  from: optional(z.string().trim().min(1).max(100)),
  webhook_url: optional(webhookUrl),
  metadata: optional(metadataSchema),
};

/** Template alternative to a body (SMS, Viber, RCS text). */
const templateFields = {
  template_id: optional(templateIdField),
  variables: optional(variablesSchema),
};

/** Body XOR template_id; returns false (after an issue) when neither or both are given. */
function bodyOrTemplate(ctx: IssueSink, v: { body?: string; template_id?: string }, alsoEnough = false): boolean {
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

// ---------------------------------------------------------------------------------------------
// SMS
// ---------------------------------------------------------------------------------------------

export const sendSmsInput: z.ZodType<SendSmsInput> = z.object({
  to: phoneSchema,
  body: optionalBody(MESSAGE_LIMITS.smsBody),
  ...templateFields,
  ...commonFields,
}).transform((v, ctx) => (bodyOrTemplate(ctx, v) ? compact(v) : z.NEVER));

// ---------------------------------------------------------------------------------------------
// WhatsApp
// ---------------------------------------------------------------------------------------------

const LANGUAGE = /^[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]{2,8})*$/;

/** `"en"` or `{ code: "en" }` (Cloud API style), normalized to the code. */
const whatsAppLanguage = z.unknown().optional().transform((v, ctx) => {
  if (v === undefined || v === null || v === '') {
    missing(ctx, [], 'template.language is required');
    return z.NEVER;
  }
  let code: unknown = v;
  let path: Path = [];
  if (typeof v === 'object' && !Array.isArray(v)) {
    code = (v as { code?: unknown }).code;
    path = ['code'];
    if (code === undefined || code === null || code === '') {
      missing(ctx, path, 'template.language.code is required');
      return z.NEVER;
    }
  }
  if (typeof code !== 'string' || !LANGUAGE.test(code.trim())) {
    invalid(ctx, path, 'must be a language code such as en or en_US');
    return z.NEVER;
  }
  return code.trim();
});

const whatsAppTemplateSchema = z.object({
  name: requiredText(512).transform((s) => s.trim()),
  language: whatsAppLanguage,
  components: optional(z.array(z.object({
    type: z.string().trim().min(1).max(50).transform((s) => s.toLowerCase()),
    parameters: optional(z.array(z.object({
      type: optional(z.string().trim().min(1).max(50)),
      text: optional(z.string().max(32_768)),
    })).max(100)),
  })).max(20)),
}).transform((t): WhatsAppTemplate => ({
  name: t.name,
  language: t.language,
  components: (t.components ?? []).map((c) => ({
    type: c.type,
    parameters: (c.parameters ?? []).map((p) => compact({ type: p.type ?? 'text', text: p.text })),
  })),
}));

const whatsAppMediaSchema = z.object({
  type: optional(z.enum(WHATSAPP_MEDIA_TYPES)),
  url: requiredHttpsUrl,
  mime_type: optional(z.string().trim().toLowerCase().regex(/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*(?:\s*;.*)?$/, 'must be a MIME type such as image/jpeg')),
  size_bytes: optional(z.number().int().nonnegative()),
  caption: optional(text(MESSAGE_LIMITS.whatsAppCaption, 'MESSAGE_TOO_LONG')),
  filename: optional(z.string().trim().min(1).max(240)),
});

function checkWhatsAppMedia(ctx: IssueSink, media: z.output<typeof whatsAppMediaSchema>, typeField: WhatsAppMediaType | undefined): WhatsAppMedia | undefined {
  if (typeField !== undefined && media.type !== undefined && media.type !== typeField) {
    invalid(ctx, ['media', 'type'], `must match type (${typeField})`);
    return undefined;
  }
  const type = typeField ?? media.type;
  if (type === undefined) {
    missing(ctx, ['media', 'type'], 'media.type is required (image, video, document or audio)');
    return undefined;
  }
  const limits = WHATSAPP_MEDIA_LIMITS[type];
  if (media.mime_type !== undefined && limits.mimeTypes) {
    const essence = media.mime_type.split(';')[0]!.trim();
    if (!limits.mimeTypes.includes(essence)) {
      invalid(ctx, ['media', 'mime_type'], `${type} media must be one of ${limits.mimeTypes.join(', ')}`);
      return undefined;
    }
  }
  if (media.size_bytes !== undefined && media.size_bytes > limits.maxBytes) {
    invalid(ctx, ['media', 'size_bytes'], `${type} media is limited to ${limits.label} (${limits.maxBytes} bytes)`, 'MEDIA_TOO_LARGE');
    return undefined;
  }
  return compact({ ...media, type });
}

export const sendWhatsAppInput: z.ZodType<SendWhatsAppInput> = z.object({
  to: phoneSchema,
  type: optional(z.enum(['text', 'template', ...WHATSAPP_MEDIA_TYPES])),
  text: optional(z.object({ body: requiredText(MESSAGE_LIMITS.whatsAppText, 'MESSAGE_TOO_LONG') })),
  body: optionalBody(MESSAGE_LIMITS.whatsAppText),
  template: optional(whatsAppTemplateSchema),
  media: optional(whatsAppMediaSchema),
  ...commonFields,
}).transform((v, ctx): SendWhatsAppInput => {
  const mediaType = (WHATSAPP_MEDIA_TYPES as readonly string[]).includes(v.type ?? '') ? (v.type as WhatsAppMediaType) : undefined;
  let kind: SendWhatsAppInput['kind'];
  if (v.type === 'text' || v.type === 'template') kind = v.type;
  else if (mediaType !== undefined) kind = 'media';
  else {
    const given = [
      ...(v.text !== undefined || v.body !== undefined ? ['text' as const] : []),
      ...(v.template !== undefined ? ['template' as const] : []),
      ...(v.media !== undefined ? ['media' as const] : []),
    ];
    if (given.length === 0) {
      missing(ctx, ['text'], 'One of text, template or media is required', 'object');
      return z.NEVER;
    }
    if (given.length > 1) {
      invalid(ctx, [given[1]!], `Send only one of text, template or media (got ${given.join(' and ')})`);
      return z.NEVER;
    }
    kind = given[0]!;
  }
  const common = { to: v.to, kind, from: v.from, webhook_url: v.webhook_url, metadata: v.metadata };
  if (kind === 'text') {
    const body = v.text?.body ?? v.body;
    if (body === undefined) {
      missing(ctx, ['text'], 'text.body (or body with type text) is required', 'object');
      return z.NEVER;
    }
    return compact({ ...common, text: { body } });
  }
  if (kind === 'template') {
    if (v.template === undefined) {
      missing(ctx, ['template'], 'template is required with type template', 'object');
      return z.NEVER;
    }
    return compact({ ...common, template: v.template });
  }
  if (v.media === undefined) {
    missing(ctx, ['media'], `media (with a url) is required with type ${v.type ?? 'media'}`, 'object');
    return z.NEVER;
  }
  const media = checkWhatsAppMedia(ctx, v.media, mediaType);
  return media === undefined ? z.NEVER : compact({ ...common, media });
});

// ---------------------------------------------------------------------------------------------
// Email
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// RCS
// ---------------------------------------------------------------------------------------------

const rcsSuggestion = z.object({
  type: z.enum(['action', 'reply']),
  text: requiredText(MESSAGE_LIMITS.rcsSuggestionText),
  url: optional(httpsUrl),
}).transform((s, ctx): RcsSuggestion => {
  if (s.type === 'action' && s.url === undefined) {
    missing(ctx, ['url'], 'url is required for an action suggestion');
    return z.NEVER;
  }
  return compact({ type: s.type, text: s.text, url: s.url });
});

const rcsCard = z.object({
  title: requiredText(MESSAGE_LIMITS.rcsCardTitle),
  description: optional(text(MESSAGE_LIMITS.rcsCardDescription)),
  media_url: optional(httpsUrl),
  suggestions: optional(z.array(rcsSuggestion).max(MESSAGE_LIMITS.rcsCardSuggestions, `A card holds at most ${MESSAGE_LIMITS.rcsCardSuggestions} suggestions`)),
}).transform((c): RcsCard => compact({ ...c }));

export const sendRcsInput: z.ZodType<SendRcsInput> = z.object({
  to: phoneSchema,
  type: optional(z.enum(['text', 'rich_card', 'carousel'])),
  body: optionalBody(MESSAGE_LIMITS.rcsBody),
  ...templateFields,
  suggestions: optional(z.array(rcsSuggestion).max(MESSAGE_LIMITS.rcsSuggestions, `At most ${MESSAGE_LIMITS.rcsSuggestions} suggestions are allowed`)),
  card: optional(rcsCard),
  cards: optional(z.array(rcsCard).max(MESSAGE_LIMITS.rcsCarouselMax, `A carousel holds at most ${MESSAGE_LIMITS.rcsCarouselMax} cards`)),
  fallback: optional(z.object({
    channel: z.literal('sms').default('sms'),
    body: optionalBody(SMS_MAX_CHARACTERS),
  }).transform((f) => compact({ ...f }))),
  ...commonFields,
}).transform((v, ctx): SendRcsInput => {
  const type = v.type ?? 'text';
  if (type === 'text' && !bodyOrTemplate(ctx, v)) return z.NEVER;
  if (type === 'rich_card' && v.card === undefined) {
    missing(ctx, ['card'], 'card is required with type rich_card', 'object');
    return z.NEVER;
  }
  if (type === 'carousel') {
    if (v.cards === undefined) {
      missing(ctx, ['cards'], 'cards is required with type carousel', 'array');
      return z.NEVER;
    }
    if (v.cards.length < MESSAGE_LIMITS.rcsCarouselMin) {
      invalid(ctx, ['cards'], `A carousel needs at least ${MESSAGE_LIMITS.rcsCarouselMin} cards and holds at most ${MESSAGE_LIMITS.rcsCarouselMax} cards`);
      return z.NEVER;
    }
  }
  return compact({ ...v, type });
});

// ---------------------------------------------------------------------------------------------
// Viber
// ---------------------------------------------------------------------------------------------

export const sendViberInput: z.ZodType<SendViberInput> = z.object({
  to: phoneSchema,
  body: optionalBody(MESSAGE_LIMITS.viberBody),
  ...templateFields,
  media_url: optional(httpsUrl),
  button: optional(z.object({ text: requiredText(MESSAGE_LIMITS.viberButtonText), url: requiredHttpsUrl })),
  ...commonFields,
}).transform((v, ctx): SendViberInput => (bodyOrTemplate(ctx, v, v.media_url !== undefined) ? compact(v) : z.NEVER));

// ---------------------------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------------------------

/**
 * Recipient filter (exact match): phone numbers normalized to E.164, emails lower-cased. A query
 * string `?to=+1415…` arrives with the '+' decoded to a space, so a bare run of digits gets its '+' back.
 */
const recipientFilter = z.string().trim().min(1).max(320).transform((s) => {
  const candidate = /^\d{6,15}$/.test(s) ? `+${s}` : s;
  const phone = normalizePhone(candidate);
  if (phone !== undefined) return phone;
  return s.includes('@') ? s.toLowerCase() : s;
});

export const listMessagesInput: z.ZodType<ListMessagesInput> = z.object({
  cursor: optional(z.string().min(1)),
  /** Range-checked by the service (400 VALIDATION_ERROR), like every list. */
  limit: optional(z.number().int()),
  channel: optional(z.enum(CHANNELS)),
  status: optional(z.enum(MESSAGE_STATUSES)),
  to: optional(recipientFilter),
  direction: optional(z.enum(['outbound', 'inbound'])),
}).transform((v) => compact({ ...v }));

// ---------------------------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------------------------

const templateName = z.string().trim().superRefine((s, ctx) => {
  if (s === '') missing(ctx, [], 'must not be empty');
  else if (s.length > MESSAGE_LIMITS.templateName) invalid(ctx, [], `must be at most ${MESSAGE_LIMITS.templateName} characters`);
  else if (!/^[A-Za-z0-9_.-]+$/.test(s)) invalid(ctx, [], 'may contain only letters, digits, underscores, dots and dashes');
});

const templateContent = z.string().superRefine((s, ctx) => {
  if (isBlank(s)) return missing(ctx, [], 'must not be empty');
  if (longerThan(s, MESSAGE_LIMITS.templateContent)) return invalid(ctx, [], `must be at most ${MESSAGE_LIMITS.templateContent} characters`);
  const problem = templateContentProblem(s);
  if (problem !== undefined) invalid(ctx, [], problem, 'INVALID_TEMPLATE');
});

const templateCategory = z.string().trim().toLowerCase()
  .regex(/^[a-z][a-z0-9_]{0,49}$/, 'must be one lowercase word of up to 50 characters, such as marketing, transactional or otp');

const templateLanguage = z.string().trim().regex(LANGUAGE, 'must be a language code such as en, en_US, tr or ar');

const templateVariable = z.preprocess(
  (v) => (typeof v === 'string' ? { name: v } : v),
  z.object({
    name: z.string().trim().refine(isPlaceholderName, 'must be a placeholder name (letters, digits, underscores and dots)'),
    example: optional(z.string().max(1000)),
    required: optional(z.boolean()),
  }),
).transform((v): TemplateVariable => compact({ ...v }));

const templateVariables = z.array(templateVariable).max(100).superRefine((list, ctx) => {
  const seen = new Set<string>();
  for (const [i, v] of list.entries()) {
    if (seen.has(v.name)) invalid(ctx, [i, 'name'], `duplicate variable ${v.name}`);
    seen.add(v.name);
  }
});

const templateFieldsSchema = {
  name: templateName,
  content: templateContent,
  category: optional(templateCategory),
  language: optional(templateLanguage),
  variables: optional(templateVariables),
  status: optional(z.enum(TEMPLATE_STATUSES)),
};

export const createTemplateInput: z.ZodType<CreateTemplateInput> = z.object({
  channel: z.enum(CHANNELS),
  ...templateFieldsSchema,
}).transform((v) => compact({ ...v, language: v.language ?? 'en' }));

const UPDATABLE_TEMPLATE_FIELDS = ['name', 'content', 'category', 'language', 'variables', 'status'] as const;

export const updateTemplateInput: z.ZodType<UpdateTemplateInput> = z.object({
  channel: z.unknown().optional().superRefine((v, ctx) => {
    if (v !== undefined && v !== null) invalid(ctx, [], 'The channel of a template cannot be changed; create a new template instead');
  }),
  name: optional(templateName),
  content: optional(templateContent),
  category: optional(templateCategory),
  language: optional(templateLanguage),
  variables: optional(templateVariables),
  status: optional(z.enum(TEMPLATE_STATUSES)),
}).transform((v, ctx): UpdateTemplateInput => {
  if (UPDATABLE_TEMPLATE_FIELDS.every((k) => v[k] === undefined)) {
    invalid(ctx, [], `Provide at least one field to update: ${UPDATABLE_TEMPLATE_FIELDS.join(', ')}`);
    return z.NEVER;
  }
  const { channel: _channel, ...rest } = v;
  return compact(rest);
});
