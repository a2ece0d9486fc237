/**
 * Billing workers: the one auto-reload charge per crossing of the threshold, its sweeper, the
 * stale-reservation sweep, and period closing.
 */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { AUTO_RELOAD_JOB, AUTO_RELOAD_SWEEP_JOB, type CreditsService } from './credits.service.ts';
import { CLOSE_PERIODS_JOB, type InvoicesService } from './invoices.service.ts';
import { STALE_RESERVATION_SWEEP_JOB, type StaleReservationSweep } from './reservations.sweep.ts';

export function registerBillingJobs(registry: JobRegistry, deps: { credits: CreditsService; invoices: InvoicesService; reservationSweep: StaleReservationSweep }): void {
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
    name: STALE_RESERVATION_SWEEP_JOB,
    tenant: false,
    // Every minute (pg-boss sends one job per minute whatever the number of instances); batches are
    // serialized on a locked row, so overlapping runs are safe too.
    schedule: '* * * * *',
    retryLimit: 0,
    handler: async (ctx) => {
      const r = await deps.reservationSweep.run();
      if (r.captured || r.released) ctx.log.info(r, 'stale credit reservations settled');
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
