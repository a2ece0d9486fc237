/** Contacts workers: CSV imports, and the HIPAA backfill of contacts stored before the mode. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { registerPhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import type { ContactsBackfill } from './contacts.backfill.ts';
import { IMPORT_JOB, type ContactImportsService } from './imports.service.ts';

export function registerContactsJobs(registry: JobRegistry, deps: { contactImports: ContactImportsService; contactsBackfill: ContactsBackfill }): void {
  registerPhiHousekeeping(registry, 'contacts', 'contact PHI metadata', deps.contactsBackfill);
  registry.register<{ importId: string }>({
    name: IMPORT_JOB,
    tenant: true,
    retryLimit: 5,
    retryDelaySeconds: 5,
    handler: async (ctx, data) => deps.contactImports.runImport(ctx.scope!, data.importId),
  });
}
