/**
 * Numbers: search, purchase, configuration, release and porting of phone numbers. Registers owned
 * numbers as messaging senders (port `numberSenders`) and answers messaging's inbound webhook lookup.
 */
import { createNumbersProviders } from '../../providers/numbers/types.ts';
import { SandboxNumbersProvider } from '../../providers/numbers/sandbox.ts';
import { defineModule } from '../manifest.ts';
import { numbersConfig } from './numbers.config.ts';
import { PhoneNumber, PortRequest } from './numbers.entities.ts';
import { NumbersService } from './numbers.service.ts';
import { registerNumbersJobs } from './numbers.jobs.ts';
import { numberRoutes } from './numbers.rest.ts';
import type { NumbersServices } from './numbers.operations.ts';
import { voiceNumbersPort } from './numbers.voice.ts';
import { agentNumbers } from './numbers.agents.ts';
import { OwnedNumbers } from './numbers.owned.ts';
import './numbers.graphql.ts';

export const NUMBER_EVENTS = [
  'number.purchased', 'number.updated', 'number.released', 'number.ported',
  'port.created', 'port.submitted', 'port.completed', 'port.rejected',
] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { numbers: (typeof NUMBER_EVENTS)[number] }
}

/** Numbers's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { num: 'PhoneNumber', port: 'PortRequest' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

/** Numbers's error codes (the manifest's `errors`); `ServiceError` accepts them by the derived augmentation. */
const errors = {
  NUMBER_NOT_AVAILABLE: { status: 409, message: 'Number is claimed by another customer' },
  NUMBER_ALREADY_OWNED: { status: 409, message: 'Number is already on this account' },
  PORT_REQUEST_FAILED: { status: 422, message: 'Port request was rejected' },
} as const;
declare module '../../platform/errors.ts' {
  interface ModuleErrorCodes extends Readonly<typeof errors> {}
}

export const numbersModule = defineModule({
  name: 'numbers',
  config: numbersConfig,
  entities: [PhoneNumber, PortRequest],
  ids,
  errors,
  events: NUMBER_EVENTS,
  requires: ['numberSenders'],
  optional: ['agentTurns', 'voiceRouteTargets'],
  create: (p, ports): NumbersServices => ({
    numbers: new NumbersService({
      orm: p.orm, clock: p.clock, config: p.config, cursors: p.cursors, jobs: p.jobs,
      providers: createNumbersProviders({ sandbox: new SandboxNumbersProvider() }), senders: ports('numberSenders'), agents: ports.optional('agentTurns'), routes: ports.optional('voiceRouteTargets'),
    }),
  }),
  provides: (s, p) => ({ inboundWebhook: s.numbers, voiceNumbers: voiceNumbersPort(p.pool), agentNumbers: agentNumbers(p.orm), ownedNumbers: new OwnedNumbers(p.pool) }),
  routes: numberRoutes,
  jobs: (registry, s) => registerNumbersJobs(registry, { numbers: s.numbers }),
});
