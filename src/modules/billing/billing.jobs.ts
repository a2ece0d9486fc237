/** Billing workers: the one auto-reload charge per crossing of the threshold, and period closing. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { AUTO_RELOAD_JOB, type CreditsService } from './credits.service.ts';
import { CLOSE_PERIODS_JOB, type InvoicesService } from './invoices.service.ts';

export function registerBillingJobs(registry: JobRegistry, deps: { credits: CreditsService; invoices: InvoicesService }): void {
  registry.register<{ token: string }>({
    name: AUTO_RELOAD_JOB,
    tenant: true,
    retryLimit: 5,
    retryDelaySeconds: 10,
    handler: async (ctx, data) => deps.credits.runAutoReload(ctx.scope!, data.token),
  });
  registry.register({
    name: CLOSE_PERIODS_JOB,
    tenant: false,
    // Every 5 minutes; each period is closed once whatever the number of instances (compare-and-set).
    schedule: '*/5 * * * *',
    handler: async () => {
      await deps.invoices.closeDuePeriods();
    },
  });
}
