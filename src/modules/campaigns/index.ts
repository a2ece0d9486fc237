/**
 * Campaigns: bulk sends to a segment or list with a frozen audience, scheduling, pause/resume/cancel,
 * pacing by the sender's 10DLC throughput, A/B variants, quiet hours, frequency caps and stats.
 * Needs contacts' audience (`campaignAudience`), messaging's sender and outcomes (`messageSender`,
 * `messageOutcomes`) and compliance's throughput (`senderThroughput`); billing's credits
 * (`campaignCredits`) and plan quotas (`planQuotas`) are optional.
 */
import { defineModule } from '../manifest.ts';
import { campaignsConfig } from './campaigns.config.ts';
import { PhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import { Campaign } from './campaigns.entities.ts';
import { CampaignEngine } from './campaigns.engine.ts';
import { CampaignsService } from './campaigns.service.ts';
import { CampaignStatsReader } from './campaigns.stats.ts';
import { registerCampaignJobs } from './campaigns.jobs.ts';
import { campaignRoutes } from './campaigns.rest.ts';
import type { CampaignsServices } from './campaigns.operations.ts';
import { CAMPAIGN_EVENTS } from './campaigns.ports.ts';
import { CampaignsBackfill } from './campaigns.phi.ts';
import './campaigns.graphql.ts';

type CampaignsModule = CampaignsServices & { engine: CampaignEngine; campaignsBackfill: CampaignsBackfill };

/** Campaigns's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { cmp: 'Campaign' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

export const campaignsModule = defineModule({
  name: 'campaigns',
  config: campaignsConfig,
  entities: [Campaign],
  ids,
  events: CAMPAIGN_EVENTS,
  requires: ['campaignAudience', 'messageSender', 'messageOutcomes', 'senderThroughput'],
  optional: ['campaignCredits', 'planQuotas', 'phi'],
  create: (p, ports): CampaignsModule => {
    const audience = ports('campaignAudience');
    const outcomes = ports('messageOutcomes');
    const engine = new CampaignEngine({
      orm: p.orm, pool: p.pool, clock: p.clock, config: p.config, jobs: p.jobs,
      ports: { audience, sender: ports('messageSender'), throughput: ports('senderThroughput'), outcomes, credits: ports.optional('campaignCredits'), quotas: ports.optional('planQuotas'), phi: ports.optional('phi') },
    });
    return {
      engine,
      campaignsBackfill: new CampaignsBackfill(new PhiHousekeeping({ pool: p.pool, clock: p.clock, phi: ports.optional('phi'), batchSize: p.config.phiBatchSize })),
      campaigns: new CampaignsService({ orm: p.orm, clock: p.clock, cursors: p.cursors, jobs: p.jobs, engine, audience }),
      campaignStats: new CampaignStatsReader({ orm: p.orm, outcomes, credits: ports.optional('campaignCredits') }),
    };
  },
  routes: campaignRoutes,
  jobs: (registry, s, p) => registerCampaignJobs(registry, { config: p.config, campaigns: s.campaigns, engine: s.engine, backfill: s.campaignsBackfill }),
});
