/** Verify worker: the sweeper that records expired verifications (and emits verification.expired). */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { EXPIRE_SWEEP_JOB, type VerifyService } from './verify.service.ts';

export function registerVerifyJobs(registry: JobRegistry, deps: { verify: VerifyService }): void {
  registry.register({
    name: EXPIRE_SWEEP_JOB,
    tenant: false,
    schedule: '* * * * *',
    handler: async (ctx) => {
      // Batches until none is due, so a backlog clears in one run.
      let total = 0;
      for (let n = await deps.verify.expireDue(); n > 0; n = await deps.verify.expireDue()) total += n;
      if (total > 0) ctx.log.info({ expired: total }, 'verifications expired');
    },
  });
}
