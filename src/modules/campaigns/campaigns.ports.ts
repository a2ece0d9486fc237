/** The public face of campaigns: its events and the optional credits seam billing provides. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';

export const CAMPAIGN_EVENTS = ['campaign.started', 'campaign.paused', 'campaign.resumed', 'campaign.completed', 'campaign.cancelled'] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { campaigns: (typeof CAMPAIGN_EVENTS)[number] }
}

/** One accepted message of a batch to pay for: `units` as messaging records its usage (SMS segments, email recipients, else 1). */
export type CampaignCharge = { messageId: string; channel: string; units: number };

/**
 * Optional port `campaignCredits` (billing provides it when installed). Inside a batch's
 * transaction, after its messages were accepted, `charge` reserves each message's price in order
 * (ledger key: the message id, so a message is charged once whoever reserves it, and a retried
 * batch, which rolled back or finds its rows no longer pending, never charges twice) and answers
 * how many of them, from the first, the balance covered; the engine then rolls the batch back and
 * sends only those, and pauses the campaign with pause_reason insufficient_credits. Test mode
 * never charges (all covered). SUBSCRIPTION_INACTIVE (403) when the subscription is cancelled or paused.
 */
export type CampaignCreditsPort = {
  charge(scope: Scope, messages: readonly CampaignCharge[], tx: EntityManager): Promise<number>;
  /** What the messages cost per group (reserved minus released), in minor units of `currency`. */
  costByGroup(tenant: TenantRef, messageIds: readonly string[], groups: readonly string[]): Promise<{ currency: string; byGroup: Map<string, number> }>;
};

declare module '../manifest.ts' {
  interface Ports {
    campaignCredits: CampaignCreditsPort;
  }
}
