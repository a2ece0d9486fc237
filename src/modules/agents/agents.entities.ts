/**
 * Agents context: agents (configuration, lifecycle, deployment), their conversations and messages,
 * knowledge documents (chunks live in `agent_knowledge_chunks`, raw SQL only: full-text search) and
 * marketplace listings submitted by organizations.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../../platform/db/tenant.ts';
import type {
  AgentChannel, AgentStatus, AgentType, ConversationStatus, GuardrailDecision, Guardrails, ToolCallRecord, ToolDefinition,
} from './agents.model.ts';

export const Agent = defineEntity({
  name: 'Agent',
  tableName: 'agents',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    type: p.string().$type<AgentType>(),
    model: p.string(),
    systemPrompt: p.text(),
    description: p.text().nullable(),
    instructions: p.text().nullable(),
    tools: p.json<ToolDefinition[]>(),
    channels: p.json<AgentChannel[]>(),
    guardrails: p.json<Guardrails>(),
    knowledgeBaseIds: p.json<string[]>(),
    temperature: p.double(),
    maxTokens: p.integer(),
    status: p.string().$type<AgentStatus>(),
    /** Why the agent is in `error` (an invalid configuration found at deploy or run time). */
    errorReason: p.text().nullable(),
    deployedChannels: p.json<string[]>(),
    boundNumber: p.string().nullable(),
    boundNumberId: p.string().nullable(),
    deployedAt: p.datetime().nullable(),
    /** Key of the `X-Service-Signature` on webhook tool calls, sealed at rest. */
    toolSecretSealed: p.text(),
    /** Marketplace template it was installed from. */
    templateId: p.string().nullable(),
    /** Incremented on every change; events carry it as their sequence. */
    version: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type Agent = InferEntity<typeof Agent>;

export const AgentConversation = defineEntity({
  name: 'AgentConversation',
  tableName: 'agent_conversations',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    agentId: p.string(),
    status: p.string().$type<ConversationStatus>(),
    /** api (chat endpoint), test (simulations), sms, whatsapp, voice. */
    channel: p.string(),
    /** The contact's address on a messaging channel. */
    contactAddress: p.string().nullable(),
    context: p.json<Record<string, unknown>>(),
    turns: p.integer(),
    /** Handed to a human (human_handoff tool or an escalation keyword). */
    handoff: p.boolean(),
    endedReason: p.string().nullable(),
    lastMessageAt: p.datetime(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    endedAt: p.datetime().nullable(),
    /** HIPAA mode: the context, sealed under the organization's data key (agents.phi.ts); `context` then holds `{}`. */
    phi: p.text().nullable(),
    /** Set when HIPAA retention deleted the context. */
    contentPurgedAt: p.datetime().nullable(),
  },
});
export type AgentConversation = InferEntity<typeof AgentConversation>;

export const AgentMessage = defineEntity({
  name: 'AgentMessage',
  tableName: 'agent_messages',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    conversationId: p.string(),
    agentId: p.string(),
    role: p.string().$type<'user' | 'assistant'>(),
    content: p.text(),
    toolCalls: p.json<ToolCallRecord[]>(),
    guardrails: p.json<GuardrailDecision[]>(),
    tokensInput: p.integer(),
    tokensOutput: p.integer(),
    latencyMs: p.integer().nullable(),
    /** A streamed answer cut short (the client went away): what was produced so far. */
    partial: p.boolean(),
    createdAt: p.datetime(),
    /** HIPAA mode: content and tool calls, sealed (agents.phi.ts); `content` then holds '' and `toolCalls` the tool names only. */
    phi: p.text().nullable(),
    /** Set when HIPAA retention deleted the content and tool calls. */
    contentPurgedAt: p.datetime().nullable(),
  },
});
export type AgentMessage = InferEntity<typeof AgentMessage>;

export const KnowledgeDocument = defineEntity({
  name: 'KnowledgeDocument',
  tableName: 'agent_knowledge_documents',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    /** The agent it was uploaded to (the document id is a knowledge base id other agents may attach). */
    agentId: p.string(),
    filename: p.string(),
    type: p.string(),
    bytes: p.integer(),
    chunks: p.integer(),
    characters: p.integer(),
    createdAt: p.datetime(),
  },
});
export type KnowledgeDocument = InferEntity<typeof KnowledgeDocument>;

export const MarketplaceListing = defineEntity({
  name: 'MarketplaceListing',
  tableName: 'agent_marketplace_listings',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    agentId: p.string(),
    title: p.string(),
    description: p.text(),
    category: p.string(),
    pricing: p.json<Record<string, unknown>>(),
    status: p.string().$type<'pending_review' | 'approved' | 'rejected'>(),
    reviewNote: p.text().nullable(),
    /** The public copy taken at submission (what the catalog shows and installs get): see MarketplaceService.submit. */
    snapshot: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
    reviewedAt: p.datetime().nullable(),
  },
});
export type MarketplaceListing = InferEntity<typeof MarketplaceListing>;
