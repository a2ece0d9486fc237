/**
 * Campaigns context: a campaign (the entity) and its frozen audience (`campaign_recipients`, one row
 * per de-duplicated address keyed by (campaign_id, seq), written and read with plain SQL by the
 * engine: it is the hot table of a send).
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../../platform/db/tenant.ts';

export const CAMPAIGN_STATUSES = ['draft', 'scheduled', 'sending', 'paused', 'completed', 'cancelled'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];
export const CAMPAIGN_CHANNELS = ['sms', 'whatsapp', 'email', 'rcs', 'viber'] as const;
export type CampaignChannel = (typeof CAMPAIGN_CHANNELS)[number];

export type AbVariant = { name: string; body?: string | null; template_id?: string | null; weight: number };
export type AbTest = { variants: AbVariant[]; winner?: { metric: 'delivered' | 'read' | 'replied'; after_minutes: number; test_percent: number } | null };
export type QuietHours = { start: string; end: string; timezone?: string | null };
export type FrequencyCap = { max_messages: number; period_hours: number };

export const Campaign = defineEntity({
  name: 'Campaign',
  tableName: 'campaigns',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    channel: p.string().$type<CampaignChannel>(),
    segmentId: p.string().nullable(),
    listId: p.string().nullable(),
    templateId: p.string().nullable(),
    templateVariables: p.json<Record<string, string>>(),
    body: p.text().nullable(),
    subject: p.string().nullable(),
    from: p.string().fieldName('from').nullable(),
    scheduledAt: p.datetime().nullable(),
    abTest: p.json<AbTest>().nullable(),
    quietHours: p.json<QuietHours>().nullable(),
    frequencyCap: p.json<FrequencyCap>().nullable(),
    status: p.string().$type<CampaignStatus>(),
    /** Why a campaign paused by itself (insufficient_credits); null when a user paused it. */
    pauseReason: p.string().nullable(),
    /** The A/B variant chosen for the held-back audience (ab_test.winner). */
    winnerVariant: p.string().nullable(),
    /** Incremented on every (re)start of sending: batch jobs of an older generation do nothing. */
    generation: p.integer(),
    audienceCount: p.integer().nullable(),
    snapshotAt: p.datetime().nullable(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    startedAt: p.datetime().nullable(),
    pausedAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
    cancelledAt: p.datetime().nullable(),
  },
});
export type Campaign = InferEntity<typeof Campaign>;
