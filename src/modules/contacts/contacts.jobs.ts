/** Contacts workers: CSV imports. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { IMPORT_JOB, type ContactsService } from './contacts.service.ts';

export function registerContactsJobs(registry: JobRegistry, deps: { contacts: ContactsService }): void {
  registry.register<{ importId: string }>({
    name: IMPORT_JOB,
    tenant: true,
    retryLimit: 5,
    retryDelaySeconds: 5,
    handler: async (ctx, data) => deps.contacts.runImport(ctx.scope!, data.importId),
  });
}
