/** SMS: `POST /v1/messages/sms`. */
import { z } from 'zod';
import { phoneSchema } from '../../../platform/recipients.ts';
import { MESSAGE_LIMITS, compact, optionalBody, commonFields, templateFields, bodyOrTemplate, type Metadata } from './shared.ts';

export type SendSmsInput = {
  to: string;
  body?: string;
  template_id?: string;
  variables?: Record<string, unknown>;
  from?: string;
  webhook_url?: string;
  metadata?: Metadata;
};

export const sendSmsInput: z.ZodType<SendSmsInput> = z.object({
  to: phoneSchema,
  body: optionalBody(MESSAGE_LIMITS.smsBody),
  ...templateFields,
  ...commonFields,
}).transform((v, ctx) => (bodyOrTemplate(ctx, v) ? compact(v) : z.NEVER));
