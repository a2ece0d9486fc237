/** Campaigns' settings (`config.campaigns`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function campaignsConfig(env: EnvReader) {
  return {
    /** Recipients per send batch (one job, one transaction). */
    batchSize: env.int('CAMPAIGN_BATCH_SIZE', 100, 'recipients per send batch (one job, one transaction)', { min: 1, max: 1000 }),
    /** Parallel batches per worker process. */
    concurrency: env.int('CAMPAIGN_CONCURRENCY', 4, 'parallel send batches per worker process', { min: 1 }),
    /** A batch running longer is given up by pg-boss and retried (also how a killed worker's batches come back). */
    batchTimeoutSeconds: env.int('CAMPAIGN_BATCH_TIMEOUT_SECONDS', 120, 'a batch running (or held by a killed worker) longer is retried', { min: 5 }),
    /** Test-mode SMS throughput (msg/s) of the sandbox registration; 0 sends unpaced. */
    sandboxThroughput: env.int('CAMPAIGN_SANDBOX_THROUGHPUT', 75, 'test-mode SMS msg/s without a 10DLC registration (0 = unpaced)'),
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { campaigns: ReturnType<typeof campaignsConfig> }
}
