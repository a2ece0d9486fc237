/** Contacts workers: CSV imports, and the HIPAA backfill of contacts stored before the mode. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import type { ContactsBackfill } from './contacts.backfill.ts';
import { IMPORT_JOB, type ContactImportsService } from './imports.service.ts';

export function registerContactsJobs(registry: JobRegistry, deps: { contactImports: ContactImportsService; contactsBackfill: ContactsBackfill }): void {
  registry.register({
    name: 'contacts.phi-backfill',
    tenant: false,
    schedule: '* * * * *',
    handler: async (ctx) => {
      const sealed = await deps.contactsBackfill.sealBackfill();
      if (sealed > 0) ctx.log.info({ sealed }, 'contact PHI metadata stored before HIPAA mode sealed');
    },
  });
  registry.register<{ importId: string }>({
    name: IMPORT_JOB,
    tenant: true,
    retryLimit: 5,
    retryDelaySeconds: 5,
    handler: async (ctx, data) => deps.contactImports.runImport(ctx.scope!, data.importId),
  });
}
