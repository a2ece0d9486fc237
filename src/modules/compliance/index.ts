/**
 * Compliance: US A2P 10DLC registration of brands and campaigns through the registry adapter
 * (sandbox: providers/compliance/sandbox.ts). Offers the throughput an approved registration grants
 * a sender (port `senderThroughput`, used by campaigns' pacing); needs the numbers the tenant owns.
 */
import { SandboxComplianceRegistry } from '../../providers/compliance/sandbox.ts';
import { defineModule } from '../manifest.ts';
import { complianceConfig } from './compliance.config.ts';
import { ComplianceBrand, TenDlcCampaign } from './compliance.entities.ts';
import { ComplianceService } from './compliance.service.ts';
import { registerComplianceJobs } from './compliance.jobs.ts';
import { complianceRoutes } from './compliance.rest.ts';
import type { ComplianceServices } from './compliance.operations.ts';
import { COMPLIANCE_EVENTS } from './compliance.ports.ts';
import './compliance.graphql.ts';

/** Compliance's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { brand: 'ComplianceBrand', dlc: 'TenDlcCampaign' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

export const complianceModule = defineModule({
  name: 'compliance',
  config: complianceConfig,
  entities: [ComplianceBrand, TenDlcCampaign],
  ids,
  events: COMPLIANCE_EVENTS,
  requires: ['ownedNumbers'],
  create: (p, ports): ComplianceServices => ({
    compliance: new ComplianceService({
      orm: p.orm, pool: p.pool, clock: p.clock, cursors: p.cursors, jobs: p.jobs, numbers: ports('ownedNumbers'),
      // Live mode has no registry integration yet: both modes go through the sandbox registry.
      registry: new SandboxComplianceRegistry({ vettingDelayMs: p.config.compliance.sandbox.vettingMs, reviewDelayMs: p.config.compliance.sandbox.reviewMs }),
    }),
  }),
  provides: (s) => ({ senderThroughput: { throughputOf: (tenant, address) => s.compliance.throughputOf(tenant, address) } }),
  routes: complianceRoutes,
  jobs: (registry, s) => registerComplianceJobs(registry, { compliance: s.compliance }),
});
