/** The `agentTurns` port: what a channel (a voice call, a message thread) needs to talk to an agent. */
import { systemScope, type Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import { sqlClient } from '../../platform/db/sql.ts';
import type { MikroORM } from '@mikro-orm/postgresql';
import { newId } from '../../platform/ids.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import { organizationPlan } from '../../platform/tenancy/plan.ts';
import { Agent } from './agents.entities.ts';
import type { AgentTurnsPort } from './agents.ports.ts';
import type { ChatService } from './chat.service.ts';
import type { ConversationsService } from './conversations.service.ts';

const isScope = (t: TenantRef): t is Scope => typeof (t as Partial<Scope>).plan === 'string';

export function agentTurns(deps: { orm: MikroORM; chat: ChatService; conversations: ConversationsService }): AgentTurnsPort {
  const status = async (tenant: TenantRef, id: string) => (await tenantEm(deps.orm, tenant).findOne(Agent, { id }, { fields: ['status'] }))?.status;
  // The organization's plan prices a live turn (a caller's Scope carries it).
  const planOf = async (tenant: TenantRef): Promise<Plan> => {
    if (isScope(tenant)) return tenant.plan;
    return (await organizationPlan(sqlClient(deps.orm), tenant.organizationId)) ?? 'starter';
  };
  return {
    agentExists: async (tenant, id) => (await status(tenant, id)) !== undefined,
    agentDeployed: async (tenant, id) => (await status(tenant, id)) === 'active',
    async replyTurn(tenant, input) {
      const scope = systemScope(tenant.organizationId, tenant.mode, await planOf(tenant), newId('req'));
      const r = await deps.chat.chat(scope, {
        agentId: input.agentId, message: input.text, conversationId: input.conversationId, context: input.context,
        channel: input.channel, contactAddress: input.contactAddress, throwOnBlocked: false, retryKey: input.retryKey,
      });
      return { conversationId: r.conversationId, messageId: r.messageId, text: r.content, ended: r.ended, handoff: r.handoff, sealed: r.sealed };
    },
    endConversation: (tenant, id, reason) => deps.conversations.end(tenant, id, reason),
    endCallConversations: (tenant, agentId, callId, reason) => deps.conversations.endCall(tenant, agentId, callId, reason),
  };
}
