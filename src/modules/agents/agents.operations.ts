/** The agents use cases as operations: roles, rate-limit endpoint and input schema, declared once. */
import { LIMITS, limitsRow } from '../../platform/ratelimit/plans.ts';
import { z } from 'zod';
import { operationsOf } from '../../context.ts';
import { BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { idInput } from '../../platform/inputs.ts';
import type { AgentsService } from './agents.service.ts';
import type { ChatEvent, ChatResult, ChatService } from './chat.service.ts';
import type { ConversationsService } from './conversations.service.ts';
import type { KnowledgeService } from './knowledge.service.ts';
import type { MarketplaceService } from './marketplace.service.ts';
import type { AgentTestService } from './agents.test-runs.ts';
import {
  addToolInput, chatInput, createAgentInput, deployAgentInput, installTemplateInput, listAgentsInput, listConversationsInput, listMessagesInput,
  submitListingInput, testAgentInput, updateAgentInput, updateGuardrailsInput, uploadKnowledgeInput,
} from './agents.schemas.ts';

export type AgentsServices = {
  agents: AgentsService;
  chat: ChatService;
  conversations: ConversationsService;
  knowledge: KnowledgeService;
  marketplace: MarketplaceService;
  agentTests: AgentTestService;
};
const op = operationsOf<AgentsServices>('agents');

export const createAgentOp = op({
  name: 'agents.create', endpoint: 'POST /v1/agents', limits: LIMITS.fewWrites, roles: BUILDERS, input: createAgentInput,
  run: (ctx, input, s) => s.agents.create(ctx.scope, input),
});
export const listAgentsOp = op({
  name: 'agents.list', endpoint: 'GET /v1/agents', limits: LIMITS.read, roles: READERS, input: listAgentsInput,
  run: (ctx, input, s) => s.agents.list(ctx.scope, input),
});
export const getAgentOp = op({
  name: 'agents.get', endpoint: 'GET /v1/agents/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.agents.get(ctx.scope, input.id),
});
export const replaceAgentOp = op({
  name: 'agents.replace', endpoint: 'PUT /v1/agents/{id}', roles: BUILDERS, input: updateAgentInput,
  run: (ctx, input, s) => s.agents.update(ctx.scope, input),
});
export const patchAgentOp = op({
  name: 'agents.patch', endpoint: 'PATCH /v1/agents/{id}', roles: BUILDERS, input: updateAgentInput,
  run: (ctx, input, s) => s.agents.update(ctx.scope, input),
});
export const deleteAgentOp = op({
  name: 'agents.delete', endpoint: 'DELETE /v1/agents/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.agents.delete(ctx.scope, input.id),
});
export const deployAgentOp = op({
  name: 'agents.deploy', endpoint: 'POST /v1/agents/{id}/deploy', roles: BUILDERS, input: deployAgentInput,
  run: (ctx, input, s) => s.agents.deploy(ctx.scope, input),
});
export const pauseAgentOp = op({
  name: 'agents.pause', endpoint: 'POST /v1/agents/{id}/pause', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.agents.pause(ctx.scope, input.id),
});
export const resumeAgentOp = op({
  name: 'agents.resume', endpoint: 'POST /v1/agents/{id}/resume', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.agents.resume(ctx.scope, input.id),
});
export const addToolOp = op({
  name: 'agents.addTool', endpoint: 'POST /v1/agents/{id}/tools', roles: BUILDERS, input: addToolInput,
  run: (ctx, input, s) => s.agents.addTool(ctx.scope, input.id, input.tool),
});
export const updateGuardrailsOp = op({
  name: 'agents.updateGuardrails', endpoint: 'PATCH /v1/agents/{id}/guardrails', roles: BUILDERS, input: updateGuardrailsInput,
  run: (ctx, { id, ...rest }, s) => s.agents.updateGuardrails(ctx.scope, id, rest),
});
export const uploadKnowledgeOp = op({
  name: 'agents.uploadKnowledge', endpoint: 'POST /v1/agents/{id}/knowledge', roles: BUILDERS, input: uploadKnowledgeInput,
  run: (ctx, input, s) => s.knowledge.upload(ctx.scope, input),
});

/**
 * Chat: the answer, or with `stream: true` the event stream (returned once the agent, conversation
 * and credit checks pass, so those failures are still plain HTTP errors). Under an Idempotency-Key
 * the turn's retry key is the claim's (a retried request is paid once); a stream is not replayed,
 * so each streamed request is a turn of its own.
 */
export const chatOp = op({
  name: 'agents.chat', endpoint: 'POST /v1/agents/{id}/chat', limits: limitsRow(20, 120, 400, 1200), roles: BUILDERS, input: chatInput,
  prepare: (ctx, input, s) => s.chat.prepare(ctx.scope, { agentId: input.id, conversationId: input.conversation_id, channel: 'api' }),
  run: async (ctx, input, s, prechecked): Promise<ChatResult | { stream: AsyncGenerator<ChatEvent, void> }> => {
    const req = { agentId: input.id, message: input.message, conversationId: input.conversation_id, context: input.context, channel: 'api', throwOnBlocked: true, prechecked };
    if (!input.stream) {
      const claim = ctx.idempotency?.next();
      return s.chat.chat(ctx.scope, { ...req, retryKey: claim ? `request:${claim.hash}:${claim.key}` : null });
    }
    return { stream: s.chat.stream(ctx.scope, await s.chat.precheck(ctx.scope, req)) };
  },
});
export const testAgentOp = op({
  name: 'agents.test', endpoint: 'POST /v1/agents/{id}/test', roles: BUILDERS, input: testAgentInput,
  run: (ctx, input, s) => s.agentTests.run(ctx.scope, input),
});
export const listConversationsOp = op({
  name: 'agents.conversations', endpoint: 'GET /v1/agents/{id}/conversations', roles: READERS, input: listConversationsInput,
  run: (ctx, input, s) => s.conversations.list(ctx.scope, input),
});
export const listConversationMessagesOp = op({
  name: 'agents.conversationMessages', endpoint: 'GET /v1/agents/{id}/conversations/{conversationId}/messages', roles: READERS, input: listMessagesInput,
  run: (ctx, input, s) => s.conversations.messages(ctx.scope, input),
});
export const marketplaceCatalogOp = op({
  name: 'agents.marketplaceCatalog', endpoint: 'GET /v1/marketplace/agents', roles: READERS, input: z.object({}),
  run: (ctx, _input, s) => s.marketplace.catalog(ctx.scope),
});
export const installTemplateOp = op({
  name: 'agents.installTemplate', endpoint: 'POST /v1/marketplace/agents/{templateId}/install', roles: BUILDERS, input: installTemplateInput,
  run: (ctx, input, s) => s.marketplace.install(ctx.scope, input),
});
export const submitListingOp = op({
  name: 'agents.submitListing', endpoint: 'POST /v1/marketplace/agents', roles: BUILDERS, input: submitListingInput,
  run: (ctx, input, s) => s.marketplace.submit(ctx.scope, input),
});
