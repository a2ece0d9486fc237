/** Verify: one-time codes over SMS, WhatsApp and email, sent through messaging (port `messageSender`). */
import { PgSendStore, SANDBOX_SENDS_PURPOSE } from '../../providers/messaging/sendStore.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import { defineModule } from '../manifest.ts';
import { verifyConfig } from './verify.config.ts';
import { Verification, VerifySettings } from './verify.entities.ts';
import { VerifyService } from './verify.service.ts';
import { registerVerifyJobs } from './verify.jobs.ts';
import { verifyRoutes } from './verify.rest.ts';
import type { VerifyServices } from './verify.operations.ts';
import './verify.graphql.ts';

export const VERIFY_EVENTS = ['verification.approved', 'verification.maxed', 'verification.expired'] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { verify: (typeof VERIFY_EVENTS)[number] }
}

/** Verify's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { ver: 'Verification' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

export const verifyModule = defineModule({
  name: 'verify',
  config: verifyConfig,
  entities: [Verification, VerifySettings],
  ids,
  events: VERIFY_EVENTS,
  requires: ['messageSender'],
  create: (p, ports): VerifyServices => ({
    verify: new VerifyService({ orm: p.orm, clock: p.clock, config: p.config, cursors: p.cursors, messaging: ports('messageSender'), sandboxSends: new PgSendStore(p.pool, new Sealer(p.config.appSecret, SANDBOX_SENDS_PURPOSE)) }),
  }),
  routes: verifyRoutes,
  jobs: (registry, s) => registerVerifyJobs(registry, { verify: s.verify }),
});
