/** Agents' settings (`config.agents`); documented in docs/configuration.md. */
import type { EnvReader } from '../../platform/env.ts';

export function agentsConfig(env: EnvReader) {
  return {
    /** Live model provider (OpenAI-compatible API): base URL and key; unset → live chats answer LLM_PROVIDER_ERROR. */
    llmBaseUrl: env.string('LLM_BASE_URL', 'live agents\' model provider: any OpenAI-compatible API (hosted, Ollama, vLLM); unset → live chats answer 502 LLM_PROVIDER_ERROR'),
    llmApiKey: env.string('LLM_API_KEY', 'the live model provider\'s API key'),
    /** Deadline of one call to the live model provider (request to the answer's last byte); past it the turn fails LLM_PROVIDER_ERROR. */
    llmTimeoutMs: env.int('LLM_TIMEOUT_MS', 60_000, 'deadline of one live model call, from the request to the answer\'s last byte (a streamed answer included); past it the turn fails 502 LLM_PROVIDER_ERROR (`details.reason: "timeout"`)', { min: 100 }),
    /** Embedding model of the live provider for knowledge retrieval (unset → full-text ranking only). */
    llmEmbeddingModel: env.string('LLM_EMBEDDING_MODEL', 'the live provider\'s embedding model (its `/embeddings` endpoint): live-mode knowledge is embedded at upload and retrieval re-ranks the full-text candidates by cosine similarity; unset → full-text ranking only'),
    /** Sandbox model timing: delay to the first streamed token and between chunks. */
    sandboxFirstTokenMs: env.int('SANDBOX_LLM_FIRST_TOKEN_MS', 120, 'sandbox model: delay to the first streamed token'),
    sandboxChunkMs: env.int('SANDBOX_LLM_CHUNK_MS', 15, 'sandbox model: delay between streamed chunks'),
    /** Deadline of one webhook tool call. */
    toolTimeoutMs: env.int('AGENT_TOOL_TIMEOUT_MS', 10_000, 'deadline of one webhook tool call', { min: 100 }),
    /** Conversations with no message for this long are marked abandoned by the sweep job. */
    conversationIdleSeconds: env.int('AGENT_CONVERSATION_IDLE_SECONDS', 1800, 'an agent conversation without a message this long is marked abandoned', { min: 60 }),
    /** Sandbox marketplace review: a submitted listing is approved after this delay. */
    sandboxReviewMs: env.int('SANDBOX_MARKETPLACE_REVIEW_MS', 5_000, 'test mode: a submitted marketplace listing is reviewed after this'),
  };
}

declare module '../../config.ts' {
  interface ModuleConfigs { agents: ReturnType<typeof agentsConfig> }
}
