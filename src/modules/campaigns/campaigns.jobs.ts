/** Campaign workers: the schedule, the audience snapshot, send batches, quiet-hours releases, A/B winners and the HIPAA backfill. */
import type { Config } from '../../config.ts';
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { registerPhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import { BATCH_JOB, RELEASE_JOB, SNAPSHOT_JOB, WINNER_JOB, type BatchJob, type CampaignEngine } from './campaigns.engine.ts';
import { SCHEDULE_JOB, type CampaignsService } from './campaigns.service.ts';
import type { CampaignsBackfill } from './campaigns.phi.ts';

export function registerCampaignJobs(registry: JobRegistry, deps: { config: Config; campaigns: CampaignsService; engine: CampaignEngine; backfill: CampaignsBackfill }): void {
  registerPhiHousekeeping(registry, 'campaigns', 'campaign recipients frozen', deps.backfill);
  // Every step is scheduled (startAfter) or follows a commit: polling at 0.5 s finds them on time.
  registry.register<{ campaignId: string; at: string }>({
    name: SCHEDULE_JOB, tenant: true, retryLimit: 10, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.campaigns.fireSchedule(ctx.scope!, data.campaignId, data.at),
  });
  registry.register<{ campaignId: string }>({
    name: SNAPSHOT_JOB, tenant: true, retryLimit: 10, expireInSeconds: 900, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.engine.snapshot(ctx.scope!, data.campaignId),
  });
  registry.register<BatchJob>({
    // A batch killed mid-way rolls back; pg-boss retries it once it expires. A batch that overruns
    // is retried too while it may still be running: the retry waits on the rows' locks, then finds
    // them sent (or takes them if the first rolled back).
    name: BATCH_JOB, tenant: true, retryLimit: 20, retryDelaySeconds: 1, expireInSeconds: deps.config.campaigns.batchTimeoutSeconds,
    pollingIntervalSeconds: 0.5, batchSize: deps.config.campaigns.concurrency, concurrency: deps.config.campaigns.concurrency,
    handler: (ctx, data) => deps.engine.runBatch(ctx.scope!, data),
  });
  registry.register<{ campaignId: string }>({
    name: RELEASE_JOB, tenant: true, retryLimit: 10, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.engine.release(ctx.scope!, data.campaignId),
  });
  registry.register<{ campaignId: string }>({
    name: WINNER_JOB, tenant: true, retryLimit: 10, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.engine.pickWinner(ctx.scope!, data.campaignId),
  });
}
