/**
 * The public face of compliance: its events and the sender-throughput port campaigns paces by.
 */
import type { TenantRef } from '../../platform/db/tenant.ts';

export const COMPLIANCE_EVENTS = [
  'compliance.brand.vetted', 'compliance.brand.failed',
  'compliance.campaign.approved', 'compliance.campaign.rejected', 'compliance.campaign.suspended',
] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { compliance: (typeof COMPLIANCE_EVENTS)[number] }
}

/** A sender's 10DLC registration: msg/s granted by an approved campaign, or null when none. */
export type SenderThroughputPort = {
  throughputOf(tenant: TenantRef, address: string): Promise<number | null>;
};

declare module '../manifest.ts' {
  interface Ports {
    senderThroughput: SenderThroughputPort;
  }
}
