/** Scheduled housekeeping of the settings context and the platform tables it owns. */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import type { RateLimiter } from '../../platform/ratelimit/limiter.ts';
import type { IdempotencyStore } from '../../platform/idempotency.ts';
import type { SettingsService } from './settings.service.ts';
import type { VacuumKeeper } from '../../platform/db/vacuum.ts';

export function registerSettingsJobs(registry: JobRegistry, deps: { settings: SettingsService; limiter: RateLimiter; idempotency: IdempotencyStore; vacuum: VacuumKeeper }): void {
  registry.register({
    name: 'settings.audit-prune',
    tenant: false,
    schedule: '17 3 * * *',
    handler: async (ctx) => {
      const removed = await deps.settings.pruneAuditLogs();
      ctx.log.info({ removed }, 'audit log pruned');
    },
  });
  registry.register({
    name: 'platform.housekeeping',
    tenant: false,
    schedule: '*/10 * * * *',
    handler: async (ctx) => {
      const counters = await deps.limiter.store.prune(ctx.clock.now());
      const keys = await deps.idempotency.prune(ctx.clock.now());
      ctx.log.info({ counters, keys }, 'rate-limit counters and idempotency keys pruned');
    },
  });
  // DB_VACUUM (platform/db/vacuum.ts): churning tables vacuumed when the server's autovacuum is off.
  registry.register({
    name: 'platform.vacuum',
    tenant: false,
    schedule: '* * * * *',
    expireInSeconds: 3600,
    retryLimit: 0,
    handler: async (ctx) => {
      const pass = await deps.vacuum.pass();
      if (pass.vacuumed.length > 0 || pass.analyzed.length > 0) ctx.log.info({ vacuumed: pass.vacuumed, analyzed: pass.analyzed }, 'tables vacuumed');
    },
  });
}
