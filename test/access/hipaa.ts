/** Access fixtures of the hipaa module: HIPAA mode settings, the BAA and the PHI access log (see test/access.test.ts). */
import { defineAccessFixtures } from './kit.ts';

export default defineAccessFixtures(() => ({
  restBodies: {
    'PUT /v1/settings/hipaa': { retention_days: 365 },
    'PUT /v1/settings/hipaa/baa': { status: 'not_signed' },
  },
  gqlSamples: {
    'Query.hipaaSettings': { doc: '{ hipaaSettings { enabled } }' },
    'Query.phiAccessLog': { doc: '{ phiAccessLog(first: 1) { edges { cursor } } }' },
    'Mutation.updateHipaaSettings': { doc: 'mutation { updateHipaaSettings(retentionDays: 365) { retentionDays } }' },
    'Mutation.updateHipaaBaa': { doc: 'mutation { updateHipaaBaa(status: not_signed) { baaStatus } }' },
  },
}));
