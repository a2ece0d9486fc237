/** campaign.* events into the outbox, in the caller's transaction. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { emitEvent } from '../../platform/events/events.ts';
import type { Campaign } from './campaigns.entities.ts';
import type { CAMPAIGN_EVENTS } from './campaigns.ports.ts';

export function emitCampaignEvent(tx: EntityManager, tenant: TenantRef, c: Campaign, type: (typeof CAMPAIGN_EVENTS)[number], now: Date): void {
  emitEvent(tx, tenant, {
    type, resourceType: 'campaign', resourceId: c.id, sequence: c.sequence,
    data: {
      campaign_id: c.id, name: c.name, channel: c.channel, status: c.status, audience_count: c.audienceCount ?? null,
      pause_reason: c.pauseReason ?? null, at: now.toISOString(),
    },
  }, now);
}
