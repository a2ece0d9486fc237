/**
 * Voice workers: call placement and gateway events, dialed legs told to the calls that dialed them (live calls; test calls run on the sandbox
 * timeline, sandbox/timeline.ts, started with the workers), call timers,
 * voicemail transcriptions (live calls' recordings) and notifications, and the HIPAA retention (daily) and backfill (every minute).
 */
import type { Pool } from 'pg';
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { systemScope } from '../../platform/auth/scope.ts';
import { organizationPlan } from '../../platform/tenancy/plan.ts';
import type { GatewayEvent } from '../../providers/voice/types.ts';
import { GATEWAY_EVENT_JOB, type CallGateway } from './calls/gateway.ts';
import { DIAL_LEG_JOB, type CallDialing, type DialLegNotice } from './calls/dialing.ts';
import { PLACE_CALL_JOB } from './placing/placing.service.ts';
import { CALL_TIMER_JOB, GATEWAY_HANGUP_JOB, type CallTimer, type GatewayHangup } from './calls/lifecycle.ts';
import { VOICEMAIL_NOTIFY_JOB, VOICEMAIL_TRANSCRIBE_JOB, type VoicemailNotify, type VoicemailService } from './voicemail/voicemail.service.ts';
import type { VoiceRetention } from './voice.retention.ts';
import { registerPhiHousekeeping } from '../../platform/phiHousekeeping.ts';

export function registerVoiceJobs(registry: JobRegistry, deps: { gateway: CallGateway; dialing: CallDialing; voicemail: VoicemailService; pool: Pool; retention: VoiceRetention }): void {
  registerPhiHousekeeping(registry, 'voice', 'recordings and voice PHI', deps.retention, '35 4 * * *');
  registry.register<{ callId: string }>({
    name: PLACE_CALL_JOB, tenant: true, retryLimit: 3, retryDelaySeconds: 1, batchSize: 16, concurrency: 2, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.gateway.place(ctx.scope!, data.callId),
  });
  registry.register<GatewayEvent>({
    // An event that overtook an earlier one throws EventTooEarly and is retried after it.
    name: GATEWAY_EVENT_JOB, tenant: false, retryLimit: 8, retryDelaySeconds: 1, retryBackoff: false, batchSize: 32, concurrency: 2, pollingIntervalSeconds: 0.5,
    handler: (_ctx, event) => deps.gateway.apply(event),
  });
  registry.register<GatewayHangup>({
    name: GATEWAY_HANGUP_JOB, tenant: false, retryLimit: 3, retryDelaySeconds: 1, pollingIntervalSeconds: 0.5,
    handler: (_ctx, job) => deps.gateway.hangupAtGateway(job),
  });
  registry.register<DialLegNotice>({
    // A dialed leg's answer or end told to the call that dialed it, or a leg hung up for it (calls/dialing.ts).
    name: DIAL_LEG_JOB, tenant: false, retryLimit: 5, retryDelaySeconds: 1, concurrency: 2, pollingIntervalSeconds: 0.5,
    handler: (_ctx, notice) => deps.dialing.apply(notice),
  });
  registry.register<CallTimer>({
    name: CALL_TIMER_JOB, tenant: false, retryLimit: 5, retryDelaySeconds: 1, batchSize: 16, concurrency: 2, pollingIntervalSeconds: 0.5,
    handler: (_ctx, timer) => deps.gateway.fireTimer(timer),
  });
  registry.register<VoicemailNotify>({
    // Speech to text takes a core for seconds: one at a time.
    name: VOICEMAIL_TRANSCRIBE_JOB, tenant: false, retryLimit: 3, retryDelaySeconds: 5, concurrency: 1, pollingIntervalSeconds: 0.5,
    handler: (_ctx, data) => deps.voicemail.transcribeRecorded({ organizationId: data.organizationId, mode: data.mode }, data.messageId),
  });
  registry.register<VoicemailNotify>({
    name: VOICEMAIL_NOTIFY_JOB, tenant: false, retryLimit: 3, pollingIntervalSeconds: 0.5,
    handler: async (ctx, data) => {
      const plan = await organizationPlan(deps.pool, data.organizationId);
      if (!plan) return;
      await deps.voicemail.notify(systemScope(data.organizationId, data.mode, plan, ctx.jobId), data.messageId);
    },
  });
}
