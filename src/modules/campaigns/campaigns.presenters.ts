/** REST shapes (snake_case) of campaigns; GET adds `stats` (live progress). */
import type { Campaign } from './campaigns.entities.ts';
import type { CampaignStats } from './campaigns.stats.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentCampaign(c: Campaign) {
  return {
    id: c.id, name: c.name, channel: c.channel, segment_id: c.segmentId ?? null, list_id: c.listId ?? null,
    template_id: c.templateId ?? null, template_variables: c.templateVariables, body: c.body ?? null, subject: c.subject ?? null,
    from: c.from ?? null, scheduled_at: iso(c.scheduledAt), ab_test: c.abTest ?? null, quiet_hours: c.quietHours ?? null,
    frequency_cap: c.frequencyCap ?? null, status: c.status, pause_reason: c.pauseReason ?? null, winner_variant: c.winnerVariant ?? null,
    audience_count: c.audienceCount ?? null, created_at: iso(c.createdAt), updated_at: iso(c.updatedAt), started_at: iso(c.startedAt),
    paused_at: iso(c.pausedAt), completed_at: iso(c.completedAt), cancelled_at: iso(c.cancelledAt),
  };
}

export function presentCampaignWithStats(r: { campaign: Campaign; stats: CampaignStats }) {
  return { ...presentCampaign(r.campaign), stats: r.stats };
}
