/** REST shapes (snake_case) of agents, conversations, agent messages, chat results, knowledge and the marketplace. */
import type { RawResponse } from '../../rest/route.ts';
import type { Agent, AgentConversation, AgentMessage, KnowledgeDocument, MarketplaceListing } from './agents.entities.ts';
import type { CreatedAgent } from './agents.service.ts';
import type { ChatEvent, ChatResult } from './chat.service.ts';
import type { UploadedKnowledge } from './knowledge.service.ts';
import type { CatalogEntry } from './marketplace.service.ts';
import type { TestRun } from './agents.test-runs.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentAgent(a: Agent) {
  return {
    id: a.id,
    name: a.name,
    type: a.type,
    model: a.model,
    status: a.status,
    error_reason: a.errorReason,
    system_prompt: a.systemPrompt,
    description: a.description,
    instructions: a.instructions,
    tools: a.tools,
    tools_count: a.tools.length,
    channels: a.channels.map((c) => c.type),
    channel_settings: a.channels,
    guardrails: a.guardrails,
    knowledge_base_ids: a.knowledgeBaseIds,
    temperature: Number(a.temperature),
    max_tokens: a.maxTokens,
    deployed_channels: a.deployedChannels,
    bound_number: a.boundNumber,
    bound_number_id: a.boundNumberId,
    deployed_at: iso(a.deployedAt),
    template_id: a.templateId,
    created_at: iso(a.createdAt),
    updated_at: iso(a.updatedAt),
  };
}

/** Create and install: the agent, with the key of its webhook tool signatures (shown once). */
export function presentCreatedAgent(r: CreatedAgent) {
  return { ...presentAgent(r.agent), tool_signing_secret: r.toolSigningSecret };
}

export function presentDeployment(a: Agent) {
  return { ...presentAgent(a), id: a.id, status: a.status, deployed_channels: a.deployedChannels, bound_number: a.boundNumber, deployed_at: iso(a.deployedAt) };
}

export function presentConversation(c: AgentConversation) {
  return {
    id: c.id, conversation_id: c.id, agent_id: c.agentId, status: c.status, channel: c.channel, contact_address: c.contactAddress,
    context: c.context, turns: c.turns, handoff: c.handoff, ended_reason: c.endedReason,
    last_message_at: iso(c.lastMessageAt), created_at: iso(c.createdAt), ended_at: iso(c.endedAt),
  };
}

export function presentMessage(m: AgentMessage) {
  return {
    id: m.id, conversation_id: m.conversationId, role: m.role, content: m.content, tool_calls: m.toolCalls, guardrails: m.guardrails,
    tokens_used: m.role === 'assistant' ? { input: m.tokensInput, output: m.tokensOutput } : null, latency_ms: m.latencyMs, partial: m.partial,
    created_at: iso(m.createdAt),
  };
}

export function presentChat(r: ChatResult) {
  return {
    conversation_id: r.conversationId, message_id: r.messageId, role: r.role, content: r.content, tool_calls: r.toolCalls,
    tokens_used: r.tokensUsed, latency_ms: r.latencyMs, guardrails: r.guardrails, handoff: r.handoff, conversation_ended: r.ended,
  };
}

/** One SSE frame: `event: <name>` and one JSON `data:` line. */
export function sseFrame(e: ChatEvent): string {
  return `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}

async function* frames(events: AsyncGenerator<ChatEvent, void>): AsyncGenerator<string, void> {
  try {
    for await (const e of events) yield sseFrame(e);
  } finally {
    await events.return(undefined);
  }
}

export function presentChatOrStream(r: ChatResult | { stream: AsyncGenerator<ChatEvent, void> }): unknown {
  if ('stream' in r) {
    const raw: RawResponse = { raw: true, status: 200, contentType: 'text/event-stream; charset=utf-8', body: '', stream: frames(r.stream), headers: { 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' } };
    return raw;
  }
  return presentChat(r);
}

export function presentKnowledge(r: UploadedKnowledge) {
  return { ...presentKnowledgeDocument(r.document), agent_id: r.agent.id, knowledge_base_ids: r.agent.knowledgeBaseIds };
}

export function presentKnowledgeDocument(d: KnowledgeDocument) {
  return { id: d.id, knowledge_base_id: d.id, filename: d.filename, type: d.type, bytes: d.bytes, characters: d.characters, chunks: d.chunks, status: 'indexed', created_at: iso(d.createdAt) };
}

export function presentCatalogEntry(t: CatalogEntry) {
  return {
    id: t.id, name: t.name, description: t.description, category: t.category, source: t.source, type: t.type, model: t.model,
    system_prompt: t.system_prompt, tools: t.tools, channels: t.channels.map((c) => c.type), guardrails: t.guardrails, variables: t.variables, pricing: t.pricing,
  };
}

/** What a listing makes public (its copy taken at submission), as the catalog shows it. */
export function publishedOf(l: MarketplaceListing) {
  const s = l.snapshot as { type?: string; model?: string; channels?: { type: string }[]; system_prompt?: string; tools?: unknown[]; guardrails?: Record<string, unknown>; published_fields?: string[] };
  return {
    fields: s.published_fields ?? ['system_prompt', 'tools', 'guardrails'], type: s.type, model: s.model, system_prompt: s.system_prompt ?? null,
    tools: s.tools ?? [], channels: (s.channels ?? []).map((c) => c.type), guardrails: s.guardrails ?? {},
  };
}

export function presentListing(l: MarketplaceListing) {
  return {
    id: l.id, agent_id: l.agentId, status: l.status, review_note: l.reviewNote,
    listing: { title: l.title, description: l.description, category: l.category, pricing: l.pricing },
    published: publishedOf(l),
    created_at: iso(l.createdAt), reviewed_at: iso(l.reviewedAt),
  };
}

export function presentTestRun(r: TestRun) {
  return {
    agent_id: r.agentId, conversation_id: r.conversationId, simulated: true, passed: r.passed,
    turns: r.turns.map((t) => ({
      message: t.message, reply: t.reply, passed: t.passed, error: t.error, expectations: t.expectations,
      tool_calls: t.result?.toolCalls ?? [], guardrails: t.result?.guardrails ?? [], blocked_by: t.result?.blockedBy ?? null,
      handoff: t.result?.handoff ?? false, conversation_ended: t.result?.ended ?? false,
      tokens_used: t.result?.tokensUsed ?? null, latency_ms: t.result?.latencyMs ?? null,
    })),
  };
}
