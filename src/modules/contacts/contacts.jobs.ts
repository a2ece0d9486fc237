/** Contacts workers: CSV imports. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { IMPORT_JOB, type ContactImportsService } from './imports.service.ts';

export function registerContactsJobs(registry: JobRegistry, deps: { contactImports: ContactImportsService }): void {
  registry.register<{ importId: string }>({
    name: IMPORT_JOB,
    tenant: true,
    retryLimit: 5,
    retryDelaySeconds: 5,
    handler: async (ctx, data) => deps.contactImports.runImport(ctx.scope!, data.importId),
  });
}
