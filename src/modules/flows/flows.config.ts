/** Flows' settings (`config.flows`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function flowsConfig(env: EnvReader) {
  return {
    /** Executions running or waiting at once per organization and mode; more starts are refused (QUOTA_EXCEEDED). */
    maxActiveExecutions: env.int('FLOWS_MAX_ACTIVE_EXECUTIONS', 10_000, 'flow executions running or waiting at once per organization and mode; more starts are refused (QUOTA_EXCEEDED)', { min: 1 }),
    /** Steps one execution may run; the next one fails it (STEP_LIMIT). */
    maxSteps: env.int('FLOWS_MAX_STEPS', 200, 'steps one execution may run; the next one fails it', { min: 1 }),
    /** Parallel step-job fetchers per worker process, and jobs per fetch (each batch runs in parallel). */
    concurrency: env.int('FLOWS_CONCURRENCY', 2, 'flow step-job fetchers per worker process', { min: 1 }),
    batchSize: env.int('FLOWS_BATCH_SIZE', 8, 'step jobs per fetch (a fetch runs in parallel)', { min: 1 }),
    /** A step job a crashed worker held is retried after this long (covers the slowest step: an http_request timeout). */
    stepExpireSeconds: env.int('FLOWS_STEP_EXPIRE_SECONDS', 60, 'a step job held by a crashed worker is retried after this long', { min: 1 }),
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { flows: ReturnType<typeof flowsConfig> }
}
