/** Flows' settings (`config.flows`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function flowsConfig(env: EnvReader) {
  return {
    /** Executions running or waiting at once per organization and mode; more starts are refused (QUOTA_EXCEEDED). */
    maxActiveExecutions: env.int('FLOWS_MAX_ACTIVE_EXECUTIONS', 10_000, 'flow executions running or waiting at once per organization and mode; more starts are refused (QUOTA_EXCEEDED)', { min: 1 }),
    /** Steps one execution may run; the next one fails it (STEP_LIMIT). */
    maxSteps: env.int('FLOWS_MAX_STEPS', 200, 'steps one execution may run; the next one fails it', { min: 1 }),
    /**
     * How deep a chain of flow executions may go: an execution started by what another one did (its
     * messages, contact changes, events) is one level deeper; a start past this depth is recorded
     * failed (CHAIN_DEPTH_EXCEEDED) instead of running.
     */
    maxChainDepth: env.int('FLOWS_MAX_CHAIN_DEPTH', 5, 'how deep a chain of flow executions may go (one started by what another did is one level deeper; depth 0 is a start caused by no flow); a deeper start is recorded failed (CHAIN_DEPTH_EXCEEDED)', { min: 0 }),
    /** Executions one flow may start per 60 s (sliding window); starts over it are refused (RATE_LIMIT_EXCEEDED). */
    maxExecutionsPerMinute: env.int('FLOWS_MAX_EXECUTIONS_PER_MINUTE', 1_000, 'executions one flow may start in any 60 s; more starts are refused (api and webhook triggers: 429 RATE_LIMIT_EXCEEDED; event and inbound_message triggers: a failed execution with that code)', { min: 1 }),
    /** A webhook trigger call signed longer ago (or further ahead) than this is refused (replay protection). */
    webhookToleranceSeconds: env.int('FLOWS_WEBHOOK_TOLERANCE_SECONDS', 300, 'a webhook trigger call whose signed timestamp is further than this from now is refused (401)', { min: 1 }),
    /**
     * Parallel step-job fetchers per worker process, and jobs per fetch. The jobs being run at one
     * moment are gathered (executions.engine.ts): one transaction per tenant and batch.
     */
    concurrency: env.int('FLOWS_CONCURRENCY', 2, 'flow step-job fetchers per worker process', { min: 1 }),
    batchSize: env.int('FLOWS_BATCH_SIZE', 32, 'step jobs per fetch (the jobs being run at once are gathered: one transaction per tenant and batch)', { min: 1 }),
    /**
     * A step job's lease: one held longer is retried (covers the slowest step: an http_request
     * timeout; a crashed worker's job comes back sooner, by its heartbeat). A running execution not
     * moved for this long with no step job pending is enqueued again by the sweep (executions.sweep.ts).
     */
    stepExpireSeconds: env.int('FLOWS_STEP_EXPIRE_SECONDS', 60, 'a step job held longer than this is retried (a crashed worker\'s sooner, by its heartbeat); a running execution not moved for this long with no step job pending is enqueued again by the minute\'s sweep', { min: 1 }),
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { flows: ReturnType<typeof flowsConfig> }
}
