/**
 * Agents workers: replies to inbound messages on a bound number, the idle-conversation sweep, scheduled callbacks coming due, the sandbox
 * marketplace review, and the HIPAA retention (daily) and backfill (every minute) of conversations.
 */
import type { JobRegistry } from '../../platform/jobs/jobs.ts';
import { CALLBACK_JOB, type AgentTools } from './chat.tools.ts';
import { ABANDON_SWEEP_JOB, type ConversationsService } from './conversations.service.ts';
import { LISTING_REVIEW_JOB, type MarketplaceService } from './marketplace.service.ts';
import type { AgentRetention } from './agents.retention.ts';
import { INBOUND_REPLY_JOB, type AgentInbound, type InboundReplyJob } from './agents.inbound.ts';
import { registerPhiHousekeeping } from '../../platform/phiHousekeeping.ts';

export function registerAgentsJobs(registry: JobRegistry, deps: {
  conversations: ConversationsService; tools: AgentTools; marketplace: MarketplaceService; agentRetention: AgentRetention; agentInbound: AgentInbound;
}): void {
  registry.register<InboundReplyJob>({
    // A model provider failure throws and is retried (the turn's charge is reserved once: its retry key).
    name: INBOUND_REPLY_JOB, tenant: true, retryLimit: 5, retryDelaySeconds: 5, retryBackoff: true, pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.agentInbound.reply(ctx.scope!, data),
  });
  registerPhiHousekeeping(registry, 'agents', 'agent conversation content', deps.agentRetention, '29 4 * * *');
  registry.register({
    name: ABANDON_SWEEP_JOB,
    tenant: false,
    schedule: '* * * * *',
    handler: async (ctx) => {
      let total = 0;
      for (let n = await deps.conversations.abandonIdle(); n > 0; n = await deps.conversations.abandonIdle()) total += n;
      if (total > 0) ctx.log.info({ abandoned: total }, 'idle agent conversations abandoned');
    },
  });
  registry.register<{ agentId: string; conversationId: string | null; to: string | null; at: string }>({
    name: CALLBACK_JOB,
    tenant: true,
    retryLimit: 5,
    pollingIntervalSeconds: 1,
    handler: (ctx, data) => deps.tools.callbackDue(ctx.scope!, data),
  });
  registry.register<{ listingId: string }>({
    name: LISTING_REVIEW_JOB,
    tenant: true,
    retryLimit: 5,
    pollingIntervalSeconds: 0.5,
    handler: (ctx, data) => deps.marketplace.review(ctx.scope!, data.listingId),
  });
}
