/**
 * Agents: AI agents (configuration, lifecycle, tools, guardrails, knowledge), chat with
 * conversations (plain and streamed), simulated test runs and the marketplace. Models come from
 * `providers/llm` (the sandbox model for test keys). Needs numbers (port `agentNumbers`) to bind a
 * deployed agent to a number and messaging (`messageSender`) for the send_message tool; offers
 * `agentTurns` to channels (voice). With the HIPAA module (`phi`, optional) conversations are
 * sealed, read by the PHI access rules and purged after the retention period (agents.phi.ts). With
 * billing (`credits`, optional) live-mode turns that call the model are paid from the credit
 * balance (agents.billing.ts); billing's stale-reservation sweep asks `agentCharges` about turns
 * that never settled theirs.
 */
import { createLlmProviders } from '../../providers/llm/types.ts';
import { defineModule } from '../manifest.ts';
import { agentsConfig } from './agents.config.ts';
import { PhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import { Agent, AgentConversation, AgentMessage, KnowledgeDocument, MarketplaceListing } from './agents.entities.ts';
import { AGENT_EVENTS } from './agents.ports.ts';
import { AgentsService } from './agents.service.ts';
import { ChatService } from './chat.service.ts';
import { AgentTools } from './chat.tools.ts';
import { ConversationsService } from './conversations.service.ts';
import { KnowledgeService } from './knowledge.service.ts';
import { knowledgeEmbedder } from './knowledge.embeddings.ts';
import { MarketplaceService } from './marketplace.service.ts';
import { AgentTestService } from './agents.test-runs.ts';
import { agentTurns } from './turns.port.ts';
import { registerAgentsJobs } from './agents.jobs.ts';
import { agentRoutes } from './agents.rest.ts';
import type { AgentsServices } from './agents.operations.ts';
import { voiceAgentsPort } from './voice.port.ts';
import { flowAgentsPort } from './flows.port.ts';
import { AgentsPhi } from './agents.phi.ts';
import { AgentRetention } from './agents.retention.ts';
import { AgentInbound } from './agents.inbound.ts';
import { AgentBilling, agentCharges } from './agents.billing.ts';
import './agents.graphql.ts';

type Bag = AgentsServices & { tools: AgentTools; agentRetention: AgentRetention; agentInbound: AgentInbound };

/** Agents's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { agt: 'Agent', conv: 'Conversation', amsg: 'AgentMessage', kb: 'KnowledgeBase', mkt: 'MarketplaceListing' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

/** Agents's error codes (the manifest's `errors`); `ServiceError` accepts them by the derived augmentation. */
const errors = {
  AGENT_ERROR: { status: 500, message: 'Agent failed during execution' },
  LLM_PROVIDER_ERROR: { status: 502, message: 'Language model provider error' },
  GUARDRAIL_VIOLATION: { status: 422, message: 'Output blocked by guardrail' },
  AGENT_NOT_DEPLOYED: { status: 422, message: 'Agent is draft or paused' },
  TOOL_EXECUTION_FAILED: { status: 500, message: 'Tool call failed' },
  CONTEXT_TOO_LONG: { status: 422, message: 'Context exceeds the model limit' },
} as const;
declare module '../../platform/errors.ts' {
  interface ModuleErrorCodes extends Readonly<typeof errors> {}
}

export const agentsModule = defineModule({
  name: 'agents',
  config: agentsConfig,
  entities: [Agent, AgentConversation, AgentMessage, KnowledgeDocument, MarketplaceListing],
  ids,
  errors,
  events: AGENT_EVENTS,
  requires: ['agentNumbers', 'messageSender'],
  optional: ['phi', 'planQuotas', 'credits', 'agentInbound'],
  create: (p, ports): Bag => {
    const phi = new AgentsPhi(ports.optional('phi'));
    const c = p.config.agents;
    const llm = createLlmProviders({
      baseUrl: c.llmBaseUrl, apiKey: c.llmApiKey, timeoutMs: c.llmTimeoutMs, embeddingModel: c.llmEmbeddingModel, sandbox: { firstTokenMs: c.sandboxFirstTokenMs, chunkMs: c.sandboxChunkMs },
    });
    const agents = new AgentsService({
      orm: p.orm, pool: p.pool, clock: p.clock, cursors: p.cursors, numbers: ports('agentNumbers'), config: p.config, quotas: ports.optional('planQuotas'),
      listen: { url: p.databaseUrl, log: p.log, connectTimeoutMs: p.config.dbConnectTimeoutMs },
    });
    const knowledge = new KnowledgeService({
      orm: p.orm, clock: p.clock, maxBytes: p.config.maxUploadBytes, embedder: knowledgeEmbedder(llm), log: p.log, agentChanged: (id) => agents.forget(id),
    });
    const tools = new AgentTools({
      orm: p.orm, clock: p.clock, jobs: p.jobs, messaging: ports('messageSender'), knowledge,
      http: { allowLoopback: p.config.allowLoopback, timeoutMs: c.toolTimeoutMs },
    });
    const chat = new ChatService({ orm: p.orm, pool: p.pool, clock: p.clock, llm, agents, tools, phi, billing: new AgentBilling(ports.optional('credits')) });
    const conversations = new ConversationsService({ orm: p.orm, clock: p.clock, cursors: p.cursors, idleSeconds: c.conversationIdleSeconds, phi });
    const agentRetention = new AgentRetention(new PhiHousekeeping({ pool: p.pool, clock: p.clock, phi: ports.optional('phi'), batchSize: p.config.phiBatchSize }));
    const marketplace = new MarketplaceService({ orm: p.orm, clock: p.clock, jobs: p.jobs, agents, reviewMs: c.sandboxReviewMs });
    const agentInbound = new AgentInbound({ orm: p.orm, log: p.log, jobs: p.jobs, chat, sender: ports('messageSender'), messages: ports.optional('agentInbound') });
    return { agents, chat, conversations, knowledge, marketplace, tools, agentRetention, agentInbound, agentTests: new AgentTestService({ chat, agents }) };
  },
  provides: (s, p) => {
    const turns = agentTurns({ orm: p.orm, chat: s.chat, conversations: s.conversations });
    return { agentTurns: turns, voiceAgents: voiceAgentsPort(turns), flowAgents: flowAgentsPort(turns), agentCharges };
  },
  routes: agentRoutes,
  jobs: (registry, s) => registerAgentsJobs(registry, s),
  close: (s) => s.agents.close(),
  workers: (s, p) => {
    // Inbound messages to a bound number ride the outbox relay's transaction (agents.inbound.ts).
    p.relay.addConsumer((tx, event) => s.agentInbound.consume(tx, event));
    return { start: () => {}, stop: async () => {} };
  },
});
