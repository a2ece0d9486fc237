/** Viber: `POST /v1/messages/viber`. */
import { z } from 'zod';
import { phoneSchema } from '../../../platform/recipients.ts';
import { MESSAGE_LIMITS, compact, optional, requiredText, optionalBody, httpsUrl, requiredHttpsUrl, commonFields, templateFields, bodyOrTemplate, type Metadata } from './shared.ts';

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

export const sendViberInput: z.ZodType<SendViberInput> = z.object({
  to: phoneSchema,
  body: optionalBody(MESSAGE_LIMITS.viberBody),
  ...templateFields,
  media_url: optional(httpsUrl),
  button: optional(z.object({ text: requiredText(MESSAGE_LIMITS.viberButtonText), url: requiredHttpsUrl })),
  ...commonFields,
}).transform((v, ctx): SendViberInput => (bodyOrTemplate(ctx, v, v.media_url !== undefined) ? compact(v) : z.NEVER));
