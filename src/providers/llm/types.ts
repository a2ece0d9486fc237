/**
 * The one model interface of the agents context: AI SDK `LanguageModelV4` instances. Test mode
 * always gets the sandbox model; live mode gets the configured OpenAI-compatible provider (any
 * OpenAI-style endpoint: a hosted API, a local Ollama or vLLM), or none (LLM_PROVIDER_ERROR). Every
 * live call has a deadline (`timeoutMs`, LLM_TIMEOUT_MS) from the request to the answer's last
 * byte (a streamed answer included): past it the call fails with {@link LlmDeadlineError}.
 */
import type { EmbeddingModelV4, LanguageModelV4 } from '@ai-sdk/provider';
import { SandboxLanguageModel, type SandboxLlmTiming } from './sandbox.ts';

export type LlmConfig = {
  /** OpenAI-compatible base URL of the live provider (e.g. http://127.0.0.1:11434/v1); unset → no live model. */
  baseUrl: string | undefined;
  apiKey: string | undefined;
  /** Deadline of one live call, request to last byte (ms). */
  timeoutMs: number;
  /** The live provider's embedding model (knowledge retrieval); unset → none. */
  embeddingModel?: string | undefined;
  sandbox: SandboxLlmTiming;
};

let aiSdk: Promise<typeof import('ai')> | undefined;
/**
 * The AI SDK (`ai`), loaded on first use (it is heavy for every process start) and then the same
 * settled promise: a repeated `import('ai')` goes through the module loader each time (~0.1 ms on
 * a chat turn's path to its first chunk).
 */
export const loadAi = () => (aiSdk ??= import('ai'));

/** A live call that did not finish within its deadline (the request is aborted). */
export class LlmDeadlineError extends Error {
  override readonly name = 'LlmDeadlineError';
  readonly timeoutMs: number;

  constructor(timeoutMs: number) {
    super(`no complete answer within ${timeoutMs} ms (LLM_TIMEOUT_MS)`);
    this.timeoutMs = timeoutMs;
  }
}

/**
 * `fetch` with a deadline over the whole exchange: the request is aborted with an
 * {@link LlmDeadlineError} (not an AbortError, which the AI SDK would take for the caller's own
 * abort) when the response, or the rest of its streamed body, has not arrived in time.
 */
export function deadlineFetch(timeoutMs: number, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new LlmDeadlineError(timeoutMs)), timeoutMs);
    // Left to run after a complete answer (aborting a finished exchange does nothing); it never keeps the process up.
    timer.unref();
    const signal = init?.signal ? AbortSignal.any([init.signal, deadline.signal]) : deadline.signal;
    try {
      return await base(input, { ...init, signal });
    } catch (e) {
      clearTimeout(timer);
      throw deadline.signal.aborted ? deadline.signal.reason : e;
    }
  };
}

export type LlmProviders = {
  /** The model for a mode, or undefined when live mode has no provider configured. */
  model(mode: 'live' | 'test', modelId: string): Promise<LanguageModelV4 | undefined>;
  /** The embedding model for a mode: live with a provider and LLM_EMBEDDING_MODEL only (test mode ranks by full text). */
  embedder(mode: 'live' | 'test'): Promise<EmbeddingModelV4 | undefined>;
};

export function createLlmProviders(config: LlmConfig): LlmProviders {
  // Loaded on the first live call: the provider package is heavy for every process start (CLI, workers).
  let live: Promise<{ chatModel(id: string): LanguageModelV4; embeddingModel(id: string): EmbeddingModelV4 }> | undefined;
  const provider = () => live ??= import('@ai-sdk/openai-compatible').then((m) => m.createOpenAICompatible({
    name: 'live', baseURL: config.baseUrl!, apiKey: config.apiKey, fetch: deadlineFetch(config.timeoutMs),
  }));
  const sandboxes = new Map<string, SandboxLanguageModel>();
  return {
    async embedder(mode) {
      if (mode !== 'live' || !config.baseUrl || !config.embeddingModel) return undefined;
      return (await provider()).embeddingModel(config.embeddingModel);
    },
    async model(mode, modelId) {
      if (mode === 'live') {
        if (!config.baseUrl) return undefined;
        return (await provider()).chatModel(modelId);
      }
      let m = sandboxes.get(modelId);
      if (!m) {
        m = new SandboxLanguageModel(modelId, config.sandbox);
        if (sandboxes.size < 1000) sandboxes.set(modelId, m);
      }
      return m;
    },
  };
}
