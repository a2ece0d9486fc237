/** Numbers workers: the port lifecycle (submit, then check until completed or rejected) and monthly renewals. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { PORT_CHECK_JOB, PORT_SUBMIT_JOB, RENEW_JOB, type NumbersService } from './numbers.service.ts';

export function registerNumbersJobs(registry: JobRegistry, deps: { numbers: NumbersService }): void {
  // Port steps are scheduled for later (startAfter), which workers only find by polling.
  registry.register<{ portId: string }>({
    name: PORT_SUBMIT_JOB,
    tenant: true,
    retryLimit: 10,
    retryDelaySeconds: 5,
    pollingIntervalSeconds: 0.5,
    handler: async (ctx, data) => deps.numbers.submitPort(ctx.scope!, data.portId),
  });
  registry.register<{ portId: string }>({
    name: PORT_CHECK_JOB,
    tenant: true,
    retryLimit: 10,
    retryDelaySeconds: 5,
    pollingIntervalSeconds: 0.5,
    handler: async (ctx, data) => deps.numbers.checkPort(ctx.scope!, data.portId),
  });
  registry.register({
    name: RENEW_JOB,
    tenant: false,
    // Hourly: a number's new month is billed within the hour its cycle ends.
    schedule: '7 * * * *',
    handler: async () => {
      await deps.numbers.renewDue();
    },
  });
}
