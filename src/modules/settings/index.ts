/**
 * Settings: the organization, team, API keys, IP allowlist and audit log. It owns the platform's
 * tenancy and audit tables (their entities live in platform/, which every module builds on) and the
 * platform housekeeping job.
 */
import { Organization, User, TeamMember, ApiKey } from '../../platform/tenancy/tenancy.entities.ts';
import { AuditLogEntry } from '../../platform/audit/audit.entities.ts';
import { UsageEntry } from '../../platform/usage/usage.entities.ts';
import { Event } from '../../platform/events/events.entities.ts';
import { defineModule, type Platform } from '../manifest.ts';
import { SETTINGS_COMMANDS } from './settings.commands.ts';
import { SettingsService } from './settings.service.ts';
import type { SettingsServices } from './settings.operations.ts';
import { registerSettingsJobs } from './settings.jobs.ts';
import { QueueVacuumLoop, VacuumKeeper } from '../../platform/db/vacuum.ts';
import { settingsRoutes } from './settings.rest.ts';
import { GraphqlDocuments } from './settings.documents.ts';
import './settings.graphql.ts';

export const settingsModule = defineModule({
  name: 'settings',
  commands: SETTINGS_COMMANDS,
  entities: [Organization, User, TeamMember, ApiKey, AuditLogEntry, UsageEntry, Event],
  create: (p): SettingsServices => ({
    settings: new SettingsService({ orm: p.orm, pool: p.pool, clock: p.clock, config: p.config, cursors: p.cursors, onAuthChanged: () => p.authChanged() }),
    graphqlDocuments: new GraphqlDocuments(p.pool),
  }),
  routes: settingsRoutes,
  jobs: (registry, s, p) => registerSettingsJobs(registry, { settings: s.settings, limiter: p.limiter, idempotency: p.idempotency, vacuum: vacuumKeeper(p) }),
  // The quick vacuum passes over queue tables (platform/db/vacuum.ts), between the minute's passes.
  workers: (_s, p) => new QueueVacuumLoop({
    keeper: vacuumKeeper(p), intervalMs: p.config.dbVacuumQueueIntervalMs,
    onPass: (pass) => { if (pass.vacuumed.length > 0) p.log.debug({ vacuumed: pass.vacuumed }, 'queue tables vacuumed'); },
    onError: (e) => p.log.warn({ err: e }, 'queue tables vacuum failed'),
  }),
});

function vacuumKeeper(p: Platform): VacuumKeeper {
  return new VacuumKeeper({ pool: p.pool, mode: p.config.dbVacuum, minDeadRows: p.config.dbVacuumMinDeadRows, costDelayMs: p.config.dbVacuumCostDelayMs });
}
