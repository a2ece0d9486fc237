/**
 * HIPAA mode: settings, BAA, the compliance officer, retention, the PHI access log, and the
 * organizations' data keys. Provides the `phi` port (platform/phi.ts) through which messaging,
 * contacts, agents and voice seal, open, redact, purge and backfill their PHI.
 */
import type { PhiPort } from '../../platform/phi.ts';
import { LocalKeyManagement } from '../../providers/kms/local.ts';
import { defineModule } from '../manifest.ts';
import { HIPAA_COMMANDS } from './hipaa.commands.ts';
import { hipaaConfig } from './hipaa.config.ts';
import { HipaaSettings, PhiAccessLogEntry } from './hipaa.entities.ts';
import { KeyRing } from './hipaa.keys.ts';
import { HipaaService } from './hipaa.service.ts';
import type { HipaaServices } from './hipaa.operations.ts';
import { registerHipaaJobs } from './hipaa.jobs.ts';
import { hipaaRoutes } from './hipaa.rest.ts';
import './hipaa.graphql.ts';

declare module '../manifest.ts' {
  interface Ports { phi: PhiPort }
}
type Services = HipaaServices & { hipaaKeys: KeyRing };

/** Hipaa's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { phi: 'PhiAccessLogEntry' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

export const hipaaModule = defineModule({
  name: 'hipaa',
  commands: HIPAA_COMMANDS,
  config: hipaaConfig,
  entities: [HipaaSettings, PhiAccessLogEntry],
  ids,
  create: (p): Services => {
    const keys = new KeyRing({ pool: p.pool, kms: new LocalKeyManagement(p.config.hipaa.masterKeys), clock: p.clock });
    return { hipaa: new HipaaService({ orm: p.orm, pool: p.pool, clock: p.clock, cursors: p.cursors, keys, modeCacheMs: p.config.hipaa.modeCacheMs }), hipaaKeys: keys };
  },
  provides: (s) => ({ phi: s.hipaa.port() }),
  routes: hipaaRoutes,
  jobs: (registry, s) => registerHipaaJobs(registry, { keys: s.hipaaKeys }),
});
