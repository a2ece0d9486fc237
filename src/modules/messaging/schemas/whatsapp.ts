/** WhatsApp: text, template and media messages, `POST /v1/messages/whatsapp`. */
import { z } from 'zod';
import { phoneSchema } from '../../../platform/recipients.ts';
import { MESSAGE_LIMITS, MB, missing, invalid, compact, optional, text, requiredText, optionalBody, requiredHttpsUrl, commonFields, LANGUAGE, type IssueSink, type Path, type Metadata } from './shared.ts';

const WHATSAPP_MEDIA_TYPES = ['image', 'video', 'document', 'audio'] as const;
export type WhatsAppMediaType = (typeof WHATSAPP_MEDIA_TYPES)[number];
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

/** Spec Limits table: WhatsApp media size (MB = 2^20 bytes) and accepted MIME types (undefined: any). */
export const WHATSAPP_MEDIA_LIMITS: Record<WhatsAppMediaType, { maxBytes: number; label: string; mimeTypes?: readonly string[] }> = {
  image: { maxBytes: 5 * MB, label: '5 MB', mimeTypes: ['image/jpeg', 'image/png'] },
  video: { maxBytes: 16 * MB, label: '16 MB', mimeTypes: ['video/mp4', 'video/3gpp'] },
  document: { maxBytes: 100 * MB, label: '100 MB' },
  audio: { maxBytes: 16 * MB, label: '16 MB', mimeTypes: ['audio/aac', 'audio/x-aac', 'audio/mpeg', 'audio/mp3', 'audio/ogg'] },
};

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
