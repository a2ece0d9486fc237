/** Messaging workers: delivery, provider status reports and template decisions. */
import type { Config } from '../../config.ts';
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { registerPhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import type { ReportedStatus, TemplateDecision } from '../../providers/messaging/types.ts';
import type { MessageDelivery } from './messaging.delivery.ts';
import type { MessageRetention } from './messaging.retention.ts';
import { DELIVER_JOB, STATUS_REPORT_JOB } from './messaging.service.ts';
import { TEMPLATE_SUBMIT_JOB, type TemplatesService } from './templates.service.ts';

export const TEMPLATE_DECISION_JOB = 'messaging.template-decision';

type ReportData = { messageId: string; providerMessageId: string; status: ReportedStatus; errorCode?: string };

export function registerMessagingJobs(registry: JobRegistry, deps: { config: Config; delivery: MessageDelivery; templates: TemplatesService; retention: MessageRetention }): void {
  const { messaging: m } = deps.config;
  registerPhiHousekeeping(registry, 'messaging', 'message content', deps.retention, '23 4 * * *');
  // Deliveries are rows of the delivery queue now (messaging.queue.ts); this worker only drains
  // delivery jobs enqueued before that (an upgrade with sends in flight), so it looks seldom. Such a
  // job paced to a later slot moves to the queue (a row due then).
  registry.register<{ messageId: string; paced?: boolean }>({
    name: DELIVER_JOB,
    tenant: true,
    // Retryable provider errors throw; the last attempt marks the message failed instead.
    retryLimit: m.sendAttempts - 1,
    retryDelaySeconds: m.retryDelaySeconds,
    retryBackoff: true,
    batchSize: m.deliveryConcurrency,
    concurrency: 1,
    pollingIntervalSeconds: 5,
    handler: async (ctx, data) => {
      await deps.delivery.deliver(ctx.scope!, data.messageId, ctx.attempt, data.paced === true);
    },
  });
  // The sandbox's reports are rows of its timeline now (messaging.timeline.ts); this worker only
  // drains report jobs enqueued before that (an upgrade with reports in flight), so it looks seldom.
  registry.register<ReportData>({
    name: STATUS_REPORT_JOB,
    tenant: false,
    // A report that arrives before the send is recorded throws ReportTooEarly and is retried.
    retryLimit: 10,
    retryDelaySeconds: 1,
    retryBackoff: false,
    batchSize: m.deliveryConcurrency,
    concurrency: 1,
    pollingIntervalSeconds: 5,
    handler: async (ctx, data) => {
      await deps.delivery.applyStatusReport({ ...data, at: ctx.clock.now() });
    },
  });
  registry.register<{ templateId: string }>({
    name: TEMPLATE_SUBMIT_JOB,
    tenant: true,
    pollingIntervalSeconds: 0.5,
    handler: async (ctx, data) => {
      await deps.templates.submitForReview(ctx.scope!, data.templateId);
    },
  });
  registry.register<TemplateDecision>({
    name: TEMPLATE_DECISION_JOB,
    tenant: false,
    pollingIntervalSeconds: 0.5,
    handler: async (_ctx, decision) => {
      await deps.templates.applyDecision(decision);
    },
  });
}
