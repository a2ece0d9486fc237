/** HIPAA housekeeping: data keys wrapped by a retired master key are re-wrapped under the current one. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import type { KeyRing } from './hipaa.keys.ts';

export function registerHipaaJobs(registry: JobRegistry, deps: { keys: KeyRing }): void {
  registry.register({
    name: 'hipaa.rewrap-keys',
    tenant: false,
    schedule: '41 2 * * *',
    handler: async (ctx) => {
      const rewrapped = await deps.keys.rewrapAll();
      if (rewrapped > 0) ctx.log.info({ rewrapped }, 'HIPAA data keys re-wrapped under the current master key');
    },
  });
}
