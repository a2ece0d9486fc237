/** SMS: `POST /v1/messages/sms`. */
import { z } from 'zod';
import { phoneSchema } from '../../../platform/recipients.ts';
import { MESSAGE_LIMITS, compact, optionalBody, commonFields, templateFields, bodyOrTemplate, httpsUrl, optional, type Metadata } from './shared.ts';

/** MMS: at most this many media URLs (Twilio's limit; Telnyx and Vonage take as many). */
export const MMS_MAX_MEDIA = 10;

export type SendSmsInput = {
  to: string;
  body?: string;
  /** MMS: https URLs of the media (images, video, audio, vCard); sent by carrier API connectors only. */
  media_urls?: string[];
  template_id?: string;
  variables?: Record<string, unknown>;
  from?: string;
  webhook_url?: string;
  metadata?: Metadata;
};

export const sendSmsInput: z.ZodType<SendSmsInput> = z.object({
  to: phoneSchema,
  body: optionalBody(MESSAGE_LIMITS.smsBody),
  media_urls: optional(z.array(httpsUrl).min(1).max(MMS_MAX_MEDIA)),
  ...templateFields,
  ...commonFields,
}).transform((v, ctx) => (bodyOrTemplate(ctx, v, v.media_urls !== undefined) ? compact(v) : z.NEVER));
