/** The `agentTurns` port: what a channel (a voice call, a message thread) needs to talk to an agent. */
import { systemScope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { MikroORM } from '@mikro-orm/postgresql';
import { newId } from '../../platform/ids.ts';
import { Agent } from './agents.entities.ts';
import type { AgentTurnsPort } from './agents.ports.ts';
import type { ChatService } from './chat.service.ts';
import type { ConversationsService } from './conversations.service.ts';

export function agentTurns(deps: { orm: MikroORM; chat: ChatService; conversations: ConversationsService }): AgentTurnsPort {
  const status = async (tenant: TenantRef, id: string) => (await tenantEm(deps.orm, tenant).findOne(Agent, { id }, { fields: ['status'] }))?.status;
  return {
    agentExists: async (tenant, id) => (await status(tenant, id)) !== undefined,
    agentDeployed: async (tenant, id) => (await status(tenant, id)) === 'active',
    async replyTurn(tenant, input) {
      const scope = systemScope(tenant.organizationId, tenant.mode, 'starter', newId('req'));
      const r = await deps.chat.chat(scope, {
        agentId: input.agentId, message: input.text, conversationId: input.conversationId, context: input.context,
        channel: input.channel, contactAddress: input.contactAddress, throwOnBlocked: false,
      });
      return { conversationId: r.conversationId, messageId: r.messageId, text: r.content, ended: r.ended, handoff: r.handoff, sealed: r.sealed };
    },
    endConversation: (tenant, id, reason) => deps.conversations.end(tenant, id, reason),
  };
}
