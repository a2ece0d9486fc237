/** Billing workers: the one auto-reload charge per crossing of the threshold, its sweeper, and period closing. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { AUTO_RELOAD_JOB, AUTO_RELOAD_SWEEP_JOB, type CreditsService } from './credits.service.ts';
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
    name: AUTO_RELOAD_SWEEP_JOB,
    tenant: false,
    // Every minute; safe on several instances at once (compare-and-set on locked account rows).
    schedule: '* * * * *',
    handler: async () => {
      await deps.credits.sweepAutoReload();
    },
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
