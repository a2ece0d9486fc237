/** Compliance workers: brand vetting, campaign review and suspension, each after the registry's time. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { REVIEW_CAMPAIGN_JOB, SUSPEND_CAMPAIGN_JOB, VET_BRAND_JOB, type ComplianceService } from './compliance.service.ts';

export function registerComplianceJobs(registry: JobRegistry, deps: { compliance: ComplianceService }): void {
  registry.register<{ brandId: string }>({
    name: VET_BRAND_JOB, tenant: true, retryLimit: 10, retryDelaySeconds: 5, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.compliance.vetBrand(ctx.scope!, data.brandId),
  });
  registry.register<{ campaignId: string }>({
    // Waits for the brand's vetting by retrying (up to ~1 day with backoff).
    name: REVIEW_CAMPAIGN_JOB, tenant: true, retryLimit: 20, retryDelaySeconds: 1, retryBackoff: true, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.compliance.reviewCampaign(ctx.scope!, data.campaignId),
  });
  registry.register<{ campaignId: string; reason: string }>({
    name: SUSPEND_CAMPAIGN_JOB, tenant: true, retryLimit: 10, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.compliance.suspendCampaign(ctx.scope!, data.campaignId, data.reason),
  });
}
