/**
 * Flows on pg-boss: one job per execution step (`flows.step`), the stranded-execution sweep (every
 * minute, executions.sweep.ts), the schedule trigger (a pg-boss schedule per flow, keyed by the flow
 * id, so each tick fires once across instances), and the HIPAA retention (daily) and backfill
 * (every minute) of execution content.
 */
import type { Jobs, JobRegistry } from '../../platform/jobs/jobs.ts';
import type { Flow } from './flows.entities.ts';
import type { FlowScheduler } from './flows.service.ts';
import { STEP_JOB, type ExecutionEngine, type StepJob } from './executions.engine.ts';
import type { ExecutionsService } from './executions.service.ts';
import type { FlowRetention } from './flows.retention.ts';
import { SWEEP_JOB, type StrandedExecutions } from './executions.sweep.ts';
import { registerPhiHousekeeping } from '../../platform/phiHousekeeping.ts';

export const SCHEDULE_JOB = 'flows.schedule';

export function registerFlowJobs(registry: JobRegistry, deps: {
  engine: ExecutionEngine; executions: ExecutionsService; retention: FlowRetention; stranded: StrandedExecutions; concurrency: number; batchSize: number; expireSeconds: number;
}): void {
  registerPhiHousekeeping(registry, 'flows', 'flow execution content', deps.retention, '41 4 * * *');
  registry.register<StepJob>({
    name: STEP_JOB,
    tenant: true,
    concurrency: deps.concurrency,
    batchSize: deps.batchSize,
    pollingIntervalSeconds: 1,
    // A step job is idempotent (it does nothing once the execution left its step), so a retry costs
    // one look: retried after 1 s, without backoff (repeated kills or expiries under load would
    // otherwise push a step minutes away); one whose retries ran out is the sweep's.
    retryLimit: 10,
    retryDelaySeconds: 1,
    retryBackoff: false,
    expireInSeconds: deps.expireSeconds,
    // The jobs of a fetch (and of the other fetchers meanwhile) run together: one transaction per tenant (ExecutionEngine.submit).
    handler: async (ctx, data) => { await deps.engine.submit(ctx.scope!, data); },
  });
  registry.register({
    name: SWEEP_JOB,
    tenant: false,
    // Every minute (pg-boss sends one job per minute whatever the number of instances); overlapping runs enqueue one job per execution.
    schedule: '* * * * *',
    retryLimit: 0,
    handler: async (ctx) => {
      const n = await deps.stranded.sweep();
      if (n > 0) ctx.log.warn({ executions: n }, 'stranded flow executions enqueued again');
    },
  });
  registry.register<{ flowId: string }>({
    name: SCHEDULE_JOB,
    tenant: false,
    retryLimit: 3,
    handler: async (ctx, data) => {
      const started = await deps.executions.startScheduled(data.flowId, ctx.clock.now());
      if (!started) ctx.log.info({ flow_id: data.flowId }, 'scheduled flow no longer exists or is not scheduled');
    },
  });
}

/** pg-boss schedules for schedule-triggered flows (created, moved or removed after each save). */
export function pgBossScheduler(jobs: Jobs): FlowScheduler {
  return {
    async sync(flow: Flow) {
      if (!flow.deletedAt && flow.triggerType === 'schedule' && flow.trigger.cron) {
        await jobs.boss.schedule(SCHEDULE_JOB, flow.trigger.cron, { tenant: null, data: { flowId: flow.id } }, { tz: flow.trigger.timezone ?? 'UTC', key: flow.id });
      } else {
        await jobs.boss.unschedule(SCHEDULE_JOB, flow.id);
      }
    },
    checkCron(cron, timezone) {
      jobs.boss.previewSchedule(cron, { tz: timezone, count: 1 });
    },
  };
}
