/** Message templates: create and update inputs. */
import { z } from 'zod';
import { CHANNELS, type Channel } from '../../../providers/messaging/types.ts';
import { isPlaceholderName, templateContentProblem } from '../templating.ts';
import { SETTABLE_TEMPLATE_STATUSES, type TemplateVariable } from '../messaging.entities.ts';

export type { TemplateVariable };
import { MESSAGE_LIMITS, missing, invalid, isBlank, longerThan, compact, optional, LANGUAGE } from './shared.ts';

export type TemplateStatusInput = (typeof SETTABLE_TEMPLATE_STATUSES)[number];
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
  status: optional(z.enum(SETTABLE_TEMPLATE_STATUSES)),
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
  status: optional(z.enum(SETTABLE_TEMPLATE_STATUSES)),
}).transform((v, ctx): UpdateTemplateInput => {
  if (UPDATABLE_TEMPLATE_FIELDS.every((k) => v[k] === undefined)) {
    invalid(ctx, [], `Provide at least one field to update: ${UPDATABLE_TEMPLATE_FIELDS.join(', ')}`);
    return z.NEVER;
  }
  const { channel: _channel, ...rest } = v;
  return compact(rest);
});
