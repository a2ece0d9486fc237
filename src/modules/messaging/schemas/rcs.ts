/** RCS: text, rich card and carousel messages with suggestions, `POST /v1/messages/rcs`. */
import { z } from 'zod';
import { phoneSchema } from '../../../platform/recipients.ts';
import { SMS_MAX_CHARACTERS } from '../segmentation.ts';
import { MESSAGE_LIMITS, missing, invalid, compact, optional, text, requiredText, optionalBody, httpsUrl, commonFields, templateFields, bodyOrTemplate, type Metadata } from './shared.ts';

const RCS_SUGGESTION_TYPES = ['action', 'reply'] as const;
const RCS_MESSAGE_TYPES = ['text', 'rich_card', 'carousel'] as const;
export type RcsSuggestion = { type: (typeof RCS_SUGGESTION_TYPES)[number]; text: string; url?: string };
export type RcsCard = { title: string; description?: string; media_url?: string; suggestions?: RcsSuggestion[] };
export type RcsMessageType = (typeof RCS_MESSAGE_TYPES)[number];
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

const rcsSuggestion = z.object({
  type: z.enum(RCS_SUGGESTION_TYPES),
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
  type: optional(z.enum(RCS_MESSAGE_TYPES)),
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
