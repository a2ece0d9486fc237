/**
 * GraphQL twins of the agents routes, run through the same operations. Free-form structures
 * (tools, channels, guardrails, customizations, context) are JSON with the REST (snake_case) keys.
 * `agentChat` streams a chat turn as a subscription (graphql-ws or SSE): the REST stream's events.
 */
import { builder } from '../../graphql/builder.ts';
import { servicesOf } from '../../context.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import type { Agent, AgentConversation, AgentMessage, KnowledgeDocument, MarketplaceListing } from './agents.entities.ts';
import { AGENT_STATUSES, AGENT_TYPES, CONVERSATION_STATUSES } from './agents.model.ts';
import type { CreatedAgent } from './agents.service.ts';
import { PUBLISHABLE_FIELDS } from './agents.schemas.ts';
import type { ChatEvent, ChatResult } from './chat.service.ts';
import type { CatalogEntry } from './marketplace.service.ts';
import {
  addToolOp, chatOp, createAgentOp, deleteAgentOp, deployAgentOp, getAgentOp, installTemplateOp, listAgentsOp, listConversationMessagesOp,
  listConversationsOp, marketplaceCatalogOp, patchAgentOp, pauseAgentOp, replaceAgentOp, resumeAgentOp, submitListingOp, testAgentOp,
  updateGuardrailsOp, uploadKnowledgeOp,
} from './agents.operations.ts';
import { presentCatalogEntry, presentTestRun, publishedOf } from './agents.presenters.ts';

const AgentStatusEnum = builder.enumType('AgentStatus', { values: AGENT_STATUSES });
const AgentTypeEnum = builder.enumType('AgentType', { values: AGENT_TYPES });
const ConversationStatusEnum = builder.enumType('ConversationStatus', { values: CONVERSATION_STATUSES });
const PublishableFieldEnum = builder.enumType('MarketplacePublishableField', { values: PUBLISHABLE_FIELDS });

export const AgentRef = builder.node(builder.objectRef<Agent>('Agent'), {
  id: { resolve: (a) => a.id },
  loadOne: (id, ctx) => run(getAgentOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    type: t.field({ type: AgentTypeEnum, resolve: (a) => a.type }),
    model: t.exposeString('model'),
    status: t.field({ type: AgentStatusEnum, resolve: (a) => a.status }),
    errorReason: t.exposeString('errorReason', { nullable: true }),
    systemPrompt: t.exposeString('systemPrompt'),
    description: t.exposeString('description', { nullable: true }),
    instructions: t.exposeString('instructions', { nullable: true }),
    tools: t.field({ type: 'JSON', resolve: (a) => a.tools }),
    toolsCount: t.int({ resolve: (a) => a.tools.length }),
    channels: t.stringList({ resolve: (a) => a.channels.map((c) => c.type) }),
    channelSettings: t.field({ type: 'JSON', resolve: (a) => a.channels }),
    guardrails: t.field({ type: 'JSON', resolve: (a) => a.guardrails }),
    knowledgeBaseIds: t.stringList({ resolve: (a) => a.knowledgeBaseIds }),
    temperature: t.float({ resolve: (a) => Number(a.temperature) }),
    maxTokens: t.exposeInt('maxTokens'),
    deployedChannels: t.stringList({ resolve: (a) => a.deployedChannels }),
    boundNumber: t.exposeString('boundNumber', { nullable: true }),
    deployedAt: t.expose('deployedAt', { type: 'DateTime', nullable: true }),
    templateId: t.exposeString('templateId', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const CreatedAgentRef = builder.objectRef<CreatedAgent>('CreatedAgent').implement({
  fields: (t) => ({
    agent: t.field({ type: AgentRef, resolve: (r) => r.agent }),
    toolSigningSecret: t.string({ description: 'Key of the X-Service-Signature on webhook tool calls (shown once)', resolve: (r) => r.toolSigningSecret }),
  }),
});

const ConversationRef = builder.objectRef<AgentConversation>('Conversation').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    agentId: t.exposeString('agentId'),
    status: t.field({ type: ConversationStatusEnum, resolve: (c) => c.status }),
    channel: t.exposeString('channel'),
    contactAddress: t.exposeString('contactAddress', { nullable: true }),
    turns: t.exposeInt('turns'),
    handoff: t.exposeBoolean('handoff'),
    endedReason: t.exposeString('endedReason', { nullable: true }),
    lastMessageAt: t.expose('lastMessageAt', { type: 'DateTime' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    endedAt: t.expose('endedAt', { type: 'DateTime', nullable: true }),
  }),
});

const TokensUsedRef = builder.objectRef<{ input: number; output: number }>('TokensUsed').implement({
  fields: (t) => ({ input: t.exposeInt('input'), output: t.exposeInt('output') }),
});

const AgentMessageRef = builder.objectRef<AgentMessage>('AgentMessage').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    conversationId: t.exposeString('conversationId'),
    role: t.exposeString('role'),
    content: t.exposeString('content'),
    toolCalls: t.field({ type: 'JSON', resolve: (m) => m.toolCalls }),
    guardrails: t.field({ type: 'JSON', resolve: (m) => m.guardrails }),
    tokensUsed: t.field({ type: TokensUsedRef, nullable: true, resolve: (m) => (m.role === 'assistant' ? { input: m.tokensInput, output: m.tokensOutput } : null) }),
    latencyMs: t.exposeInt('latencyMs', { nullable: true }),
    partial: t.exposeBoolean('partial'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const ChatResultRef = builder.objectRef<ChatResult>('AgentChatResult').implement({
  fields: (t) => ({
    conversationId: t.exposeString('conversationId'),
    messageId: t.exposeString('messageId'),
    role: t.exposeString('role'),
    content: t.exposeString('content'),
    toolCalls: t.field({ type: 'JSON', resolve: (r) => r.toolCalls }),
    tokensUsed: t.field({ type: TokensUsedRef, resolve: (r) => r.tokensUsed }),
    latencyMs: t.exposeInt('latencyMs'),
    guardrails: t.field({ type: 'JSON', resolve: (r) => r.guardrails }),
    handoff: t.exposeBoolean('handoff'),
    conversationEnded: t.boolean({ resolve: (r) => r.ended }),
  }),
});

const ChatEventRef = builder.objectRef<ChatEvent>('AgentChatEvent').implement({
  description: 'One event of a streamed chat: chunk (content), tool_call (tool, input), tool_result (tool, output), done (conversationId, messageId, tokensUsed, latencyMs) or error.',
  fields: (t) => ({
    event: t.string({ resolve: (e) => e.event }),
    content: t.string({ nullable: true, resolve: (e) => (e.event === 'chunk' ? e.data.content : null) }),
    tool: t.string({ nullable: true, resolve: (e) => (e.event === 'tool_call' || e.event === 'tool_result' ? e.data.tool : null) }),
    input: t.field({ type: 'JSON', nullable: true, resolve: (e) => (e.event === 'tool_call' ? e.data.input : null) }),
    output: t.field({ type: 'JSON', nullable: true, resolve: (e) => (e.event === 'tool_result' ? e.data.output : null) }),
    conversationId: t.string({ nullable: true, resolve: (e) => (e.event === 'done' ? e.data.conversation_id : null) }),
    messageId: t.string({ nullable: true, resolve: (e) => (e.event === 'done' ? e.data.message_id : null) }),
    tokensUsed: t.field({ type: TokensUsedRef, nullable: true, resolve: (e) => (e.event === 'done' ? e.data.tokens_used : null) }),
    latencyMs: t.int({ nullable: true, resolve: (e) => (e.event === 'done' ? e.data.latency_ms : null) }),
    error: t.field({ type: 'JSON', nullable: true, resolve: (e) => (e.event === 'error' ? e.data : null) }),
  }),
});

const KnowledgeDocumentRef = builder.objectRef<KnowledgeDocument>('KnowledgeDocument').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    agentId: t.exposeString('agentId'),
    filename: t.exposeString('filename'),
    type: t.exposeString('type'),
    bytes: t.exposeInt('bytes'),
    characters: t.exposeInt('characters'),
    chunks: t.exposeInt('chunks'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const MarketplaceListingRef = builder.node(builder.objectRef<MarketplaceListing>('MarketplaceListing'), {
  id: { resolve: (l) => l.id },
  loadOne: (id, ctx) => servicesOf(ctx, 'agents').marketplace.getListing(ctx.scope, id),
  fields: (t) => ({
    agentId: t.exposeString('agentId'),
    status: t.exposeString('status'),
    title: t.exposeString('title'),
    description: t.exposeString('description'),
    category: t.exposeString('category'),
    pricing: t.field({ type: 'JSON', resolve: (l) => l.pricing }),
    published: t.field({ type: 'JSON', description: 'What the listing makes public: the copy taken at submission (fields, type, model, system_prompt, tools, channels, guardrails)', resolve: (l) => publishedOf(l) }),
    reviewNote: t.exposeString('reviewNote', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    reviewedAt: t.expose('reviewedAt', { type: 'DateTime', nullable: true }),
  }),
});

const AgentInput = builder.inputType('AgentInput', {
  description: 'Create: name, type, model and systemPrompt are required. Replace/update: fields left out keep their value.',
  fields: (t) => ({
    name: t.string({ required: false }),
    type: t.field({ type: AgentTypeEnum, required: false }),
    model: t.string({ required: false }),
    systemPrompt: t.string({ required: false }),
    description: t.string({ required: false }),
    instructions: t.string({ required: false }),
    tools: t.field({ type: 'JSON', required: false, description: 'Tool definitions as in REST (name, description, type, endpoint, method, parameters)' }),
    channels: t.field({ type: 'JSON', required: false, description: 'Channel names or { type, phone_number } objects' }),
    guardrails: t.field({ type: 'JSON', required: false }),
    knowledgeBaseIds: t.stringList({ required: false }),
    temperature: t.float({ required: false, description: '0-2, default 0.7' }),
    maxTokens: t.int({ required: false, description: 'default 4096' }),
  }),
});

type AgentInputShape = typeof AgentInput.$inferInput;
const agentWire = (i: AgentInputShape) => Object.fromEntries(Object.entries({
  name: i.name, type: i.type, model: i.model, system_prompt: i.systemPrompt, description: i.description, instructions: i.instructions,
  tools: i.tools, channels: i.channels, guardrails: i.guardrails, knowledge_base_ids: i.knowledgeBaseIds, temperature: i.temperature, max_tokens: i.maxTokens,
}).filter(([, v]) => v !== undefined && v !== null));

const chatArgs = (t: Parameters<Parameters<typeof builder.mutationFields>[0]>[0]) => ({
  agentId: t.arg.id({ required: true }),
  message: t.arg.string({ required: true }),
  conversationId: t.arg.string({ required: false }),
  context: t.arg({ type: 'JSON', required: false }),
});

builder.queryFields((t) => ({
  agents: t.connection({
    type: AgentRef, ...guard('Query', 'agents', listAgentsOp),
    args: { status: t.arg({ type: AgentStatusEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listAgentsOp, ctx, { ...pageRequest(args), status: args.status ?? undefined })),
  }),
  agent: t.field({
    type: AgentRef, ...guard('Query', 'agent', getAgentOp), args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getAgentOp, ctx, { id: String(args.id) }),
  }),
  agentConversations: t.connection({
    type: ConversationRef, ...guard('Query', 'agentConversations', listConversationsOp),
    args: { agentId: t.arg.id({ required: true }), status: t.arg({ type: ConversationStatusEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listConversationsOp, ctx, { ...pageRequest(args), id: String(args.agentId), status: args.status ?? undefined })),
  }),
  agentConversationMessages: t.connection({
    type: AgentMessageRef, ...guard('Query', 'agentConversationMessages', listConversationMessagesOp),
    args: { agentId: t.arg.id({ required: true }), conversationId: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listConversationMessagesOp, ctx, {
      ...pageRequest(args), id: String(args.agentId), conversation_id: String(args.conversationId),
    })),
  }),
  marketplaceAgents: t.field({
    type: ['JSON'], ...guard('Query', 'marketplaceAgents', marketplaceCatalogOp),
    description: 'Agent templates (shipped and approved community listings), as the REST catalog shows them',
    resolve: async (_r, _a, ctx) => (await run(marketplaceCatalogOp, ctx, {}) as CatalogEntry[]).map(presentCatalogEntry),
  }),
}));

builder.mutationFields((t) => ({
  createAgent: t.field({
    type: CreatedAgentRef, ...guard('Mutation', 'createAgent', createAgentOp), args: { input: t.arg({ type: AgentInput, required: true }) },
    resolve: (_r, args, ctx) => run(createAgentOp, ctx, agentWire(args.input)),
  }),
  replaceAgent: t.field({
    type: AgentRef, ...guard('Mutation', 'replaceAgent', replaceAgentOp), args: { id: t.arg.id({ required: true }), input: t.arg({ type: AgentInput, required: true }) },
    resolve: (_r, args, ctx) => run(replaceAgentOp, ctx, { ...agentWire(args.input), id: String(args.id) }),
  }),
  updateAgent: t.field({
    type: AgentRef, ...guard('Mutation', 'updateAgent', patchAgentOp), args: { id: t.arg.id({ required: true }), input: t.arg({ type: AgentInput, required: true }) },
    resolve: (_r, args, ctx) => run(patchAgentOp, ctx, { ...agentWire(args.input), id: String(args.id) }),
  }),
  deleteAgent: t.id({
    ...guard('Mutation', 'deleteAgent', deleteAgentOp), args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(deleteAgentOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
  deployAgent: t.field({
    type: AgentRef, ...guard('Mutation', 'deployAgent', deployAgentOp),
    args: { id: t.arg.id({ required: true }), channels: t.arg({ type: 'JSON', required: false }), numberId: t.arg.id({ required: false }) },
    resolve: (_r, args, ctx) => run(deployAgentOp, ctx, { id: String(args.id), channels: args.channels ?? undefined, number_id: args.numberId ? String(args.numberId) : undefined }),
  }),
  pauseAgent: t.field({
    type: AgentRef, ...guard('Mutation', 'pauseAgent', pauseAgentOp), args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(pauseAgentOp, ctx, { id: String(args.id) }),
  }),
  resumeAgent: t.field({
    type: AgentRef, ...guard('Mutation', 'resumeAgent', resumeAgentOp), args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(resumeAgentOp, ctx, { id: String(args.id) }),
  }),
  addAgentTool: t.field({
    type: AgentRef, ...guard('Mutation', 'addAgentTool', addToolOp), args: { id: t.arg.id({ required: true }), tool: t.arg({ type: 'JSON', required: true }) },
    resolve: (_r, args, ctx) => run(addToolOp, ctx, { id: String(args.id), tool: args.tool }),
  }),
  updateAgentGuardrails: t.field({
    type: AgentRef, ...guard('Mutation', 'updateAgentGuardrails', updateGuardrailsOp),
    args: { id: t.arg.id({ required: true }), guardrails: t.arg({ type: 'JSON', required: true, description: 'pii_redaction, content_filter, max_turns, escalation_keywords, blocked_topics, output_checks' }) },
    resolve: (_r, args, ctx) => run(updateGuardrailsOp, ctx, { ...(args.guardrails as object), id: String(args.id) }),
  }),
  uploadAgentKnowledge: t.field({
    type: KnowledgeDocumentRef, ...guard('Mutation', 'uploadAgentKnowledge', uploadKnowledgeOp),
    description: 'The knowledge upload with the file as text (`content`) or base64 (`contentBase64`, e.g. a PDF).',
    args: {
      id: t.arg.id({ required: true }), type: t.arg.string({ required: true }), filename: t.arg.string({ required: false }),
      content: t.arg.string({ required: false }), contentBase64: t.arg.string({ required: false }),
    },
    resolve: async (_r, args, ctx) => (await run(uploadKnowledgeOp, ctx, {
      id: String(args.id), type: args.type, filename: args.filename ?? `upload.${args.type}`,
      content: args.contentBase64 ? new Uint8Array(Buffer.from(args.contentBase64, 'base64')) : args.content != null ? new TextEncoder().encode(args.content) : undefined,
    })).document,
  }),
  chatWithAgent: t.field({
    type: ChatResultRef, ...guard('Mutation', 'chatWithAgent', chatOp), args: chatArgs(t),
    resolve: async (_r, args, ctx) => await run(chatOp, ctx, {
      id: String(args.agentId), message: args.message, conversation_id: args.conversationId ?? undefined, context: args.context ?? undefined,
    }) as ChatResult,
  }),
  testAgent: t.field({
    type: 'JSON', ...guard('Mutation', 'testAgent', testAgentOp),
    description: 'A simulated conversation: one message or scripted turns ([{ message, expect: { contains, tool, blocked, handoff } }]); the REST result shape.',
    args: { id: t.arg.id({ required: true }), message: t.arg.string({ required: false }), turns: t.arg({ type: 'JSON', required: false }), context: t.arg({ type: 'JSON', required: false }) },
    resolve: async (_r, args, ctx) => presentTestRun(await run(testAgentOp, ctx, {
      id: String(args.id), message: args.message ?? undefined, turns: args.turns ?? undefined, context: args.context ?? undefined,
    })),
  }),
  installMarketplaceAgent: t.field({
    type: CreatedAgentRef, ...guard('Mutation', 'installMarketplaceAgent', installTemplateOp),
    args: { templateId: t.arg.string({ required: true }), name: t.arg.string({ required: false }), channels: t.arg({ type: 'JSON', required: false }), customizations: t.arg({ type: 'JSON', required: false }) },
    resolve: (_r, args, ctx) => run(installTemplateOp, ctx, {
      template_id: args.templateId, name: args.name ?? undefined, channels: args.channels ?? undefined, customizations: args.customizations ?? undefined,
    }),
  }),
  submitMarketplaceAgent: t.field({
    type: MarketplaceListingRef, ...guard('Mutation', 'submitMarketplaceAgent', submitListingOp),
    args: {
      agentId: t.arg.id({ required: true }),
      publishedFields: t.arg({ type: [PublishableFieldEnum], required: true, description: 'What becomes public (every organization sees and installs it): must include system_prompt; tools and guardrails only when listed' }),
      listing: t.arg({ type: 'JSON', required: true, description: 'title, description, category, pricing' }),
    },
    resolve: (_r, args, ctx) => run(submitListingOp, ctx, { agent_id: String(args.agentId), published_fields: args.publishedFields, listing: args.listing }),
  }),
}));

builder.subscriptionFields((t) => ({
  agentChat: t.field({
    type: ChatEventRef, ...guard('Subscription', 'agentChat', chatOp),
    description: 'A streamed chat turn: chunk, tool_call and tool_result events, then done (or error).',
    args: chatArgs(t as never),
    subscribe: async (_r, args, ctx) => {
      const r = await run(chatOp, ctx, {
        id: String(args.agentId), message: args.message, conversation_id: args.conversationId ?? undefined, context: args.context ?? undefined, stream: true,
      });
      if (!('stream' in r)) throw new Error('expected a stream');
      return r.stream;
    },
    resolve: (e) => e,
  }),
}));
