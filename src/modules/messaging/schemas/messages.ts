/** Listing messages: `GET /v1/messages` filters. */
import { z } from 'zod';
import { CHANNELS, type Channel } from '../../../providers/messaging/types.ts';
import { normalizePhone } from '../../../platform/recipients.ts';
import { compact, optional } from './shared.ts';
import { MESSAGE_DIRECTIONS, MESSAGE_STATUSES, type MessageDirection, type MessageStatus } from '../messaging.entities.ts';

export type ListMessagesInput = {
  cursor?: string;
  limit?: number;
  channel?: Channel;
  status?: MessageStatus;
  to?: string;
  direction?: MessageDirection;
};

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
  direction: optional(z.enum(MESSAGE_DIRECTIONS)),
}).transform((v) => compact({ ...v }));
