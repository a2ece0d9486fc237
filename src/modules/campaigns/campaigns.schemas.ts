/**
 * Campaign inputs (snake_case wire shapes). An update is merged onto the stored campaign and the
 * result is validated with the create schema, so a campaign is always whole.
 */
import { z } from 'zod';
import { pageInput } from '../../platform/inputs.ts';
import { CAMPAIGN_CHANNELS, CAMPAIGN_STATUSES } from './campaigns.entities.ts';

const SMS_MAX = 1600;
const body = z.string().min(1).max(SMS_MAX * 4);
const id = z.string().trim().min(1).max(100);
const clock = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (24-hour)');
const timezone = z.string().refine((tz) => { try { new Intl.DateTimeFormat('en', { timeZone: tz }); return true; } catch { return false; } }, 'must be an IANA time zone such as America/New_York');

const variant = z.object({
  name: z.string().trim().min(1).max(50),
  body: body.nullish(),
  template_id: id.nullish(),
  weight: z.number().int().min(1).max(100).default(1),
}).refine((v) => Boolean(v.body) !== Boolean(v.template_id), { message: 'a variant has a body or a template_id (one of them)', path: ['body'] });

export const abTestSchema = z.object({
  variants: z.array(variant).min(2).max(5).refine((vs) => new Set(vs.map((v) => v.name)).size === vs.length, 'variant names must differ'),
  winner: z.object({
    metric: z.enum(['delivered', 'read', 'replied']),
    after_minutes: z.number().int().min(1).max(10_080),
    test_percent: z.number().int().min(1).max(99),
  }).nullish(),
});

export const createCampaignInput = z.object({
  name: z.string().trim().min(1).max(200),
  channel: z.enum(CAMPAIGN_CHANNELS),
  segment_id: id.nullish(),
  list_id: id.nullish(),
  template_id: id.nullish(),
  template_variables: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/), z.string().max(1000)).nullish(),
  body: body.nullish(),
  subject: z.string().trim().min(1).max(998).nullish(),
  from: z.string().trim().min(1).max(254).nullish(),
  scheduled_at: z.iso.datetime({ offset: true }).nullish(),
  ab_test: abTestSchema.nullish(),
  quiet_hours: z.object({ start: clock, end: clock, timezone: timezone.nullish() }).refine((q) => q.start !== q.end, 'start and end must differ').nullish(),
  frequency_cap: z.object({ max_messages: z.number().int().min(1).max(1000), period_hours: z.number().int().min(1).max(8760) }).nullish(),
}).superRefine((c, ctx) => {
  if (!c.segment_id && !c.list_id) ctx.addIssue({ code: 'invalid_type', expected: 'string', input: undefined, path: ['segment_id'], message: 'segment_id or list_id is required' });
  if (c.segment_id && c.list_id) ctx.addIssue({ code: 'custom', path: ['list_id'], message: 'give segment_id or list_id, not both' });
  const variants = c.ab_test?.variants ?? [];
  if (variants.length === 0 && !c.body && !c.template_id) ctx.addIssue({ code: 'invalid_type', expected: 'string', input: undefined, path: ['body'], message: 'body or template_id is required' });
  if (c.body && c.template_id) ctx.addIssue({ code: 'custom', path: ['template_id'], message: 'give body or template_id, not both' });
  if (c.channel === 'email' && !c.subject) ctx.addIssue({ code: 'invalid_type', expected: 'string', input: undefined, path: ['subject'], message: 'subject is required for email campaigns' });
  if (c.channel === 'sms' && c.body && [...c.body].length > SMS_MAX) ctx.addIssue({ code: 'custom', params: { code: 'MESSAGE_TOO_LONG' }, path: ['body'], message: `must be at most ${SMS_MAX} characters` });
});
export type CreateCampaignInput = z.infer<typeof createCampaignInput>;

/** PUT: any create field; null clears an optional one (scheduled_at null moves scheduled back to draft). */
export const updateCampaignInput = z.object({ id }).catchall(z.unknown());
export type UpdateCampaignInput = z.infer<typeof updateCampaignInput>;

export const listCampaignsInput = pageInput.extend({
  search: z.string().trim().min(1).max(200).nullish(),
  status: z.enum(CAMPAIGN_STATUSES).nullish(),
  channel: z.enum(CAMPAIGN_CHANNELS).nullish(),
});
export type ListCampaignsInput = z.infer<typeof listCampaignsInput>;
