/** The public face of campaigns: its events and the optional credits seam billing provides. */
import type { TenantRef } from '../../platform/db/tenant.ts';

export const CAMPAIGN_EVENTS = ['campaign.started', 'campaign.paused', 'campaign.resumed', 'campaign.completed', 'campaign.cancelled'] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { campaigns: (typeof CAMPAIGN_EVENTS)[number] }
}

/**
 * Optional port `campaignCredits` (billing provides it when installed): before a batch leaves,
 * campaigns reserves its messages; `false` pauses the campaign with pause_reason
 * insufficient_credits. `key` is stable per batch and generation, so a retried batch reserves once.
 */
export type CampaignCreditsPort = {
  reserve(tenant: TenantRef, input: { campaignId: string; channel: string; messages: number; key: string }): Promise<boolean>;
};

declare module '../manifest.ts' {
  interface Ports {
    campaignCredits: CampaignCreditsPort;
  }
}
