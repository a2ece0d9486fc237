/** Webhooks' settings (`config.webhooks`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function webhooksConfig(env: EnvReader) {
  return {
    timeoutMs: env.int('WEBHOOKS_TIMEOUT_MS', 15_000, 'one deadline per webhook delivery (DNS, connect, TLS, response)'),
    /** How often an idle delivery worker looks for due deliveries. */
    pollIntervalMs: env.int('WEBHOOKS_POLL_INTERVAL_MS', 500, 'how often an idle delivery worker looks for due deliveries', { min: 50 }),
    concurrency: env.int('WEBHOOKS_CONCURRENCY', 32, 'parallel webhook deliveries per worker process', { min: 1 }),
    /** How long the event history (`GET /v1/events`) keeps an event. */
    eventRetentionDays: env.int('EVENTS_RETENTION_DAYS', 30, 'days the event history (GET /v1/events, the events query) keeps an event; older ones are removed daily', { min: 1 }),
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { webhooks: ReturnType<typeof webhooksConfig> }
}
