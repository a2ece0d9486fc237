/**
 * The one model interface of the agents context: AI SDK `LanguageModelV4` instances. Test mode
 * always gets the sandbox model; live mode gets the configured OpenAI-compatible provider (any
 * OpenAI-style endpoint: a hosted API, a local Ollama or vLLM), or none (LLM_PROVIDER_ERROR).
 */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { SandboxLanguageModel, type SandboxLlmTiming } from './sandbox.ts';

export type LlmConfig = {
  /** OpenAI-compatible base URL of the live provider (e.g. http://127.0.0.1:11434/v1); unset → no live model. */
  baseUrl: string | undefined;
  apiKey: string | undefined;
  sandbox: SandboxLlmTiming;
};

export type LlmProviders = {
  /** The model for a mode, or undefined when live mode has no provider configured. */
  model(mode: 'live' | 'test', modelId: string): Promise<LanguageModelV4 | undefined>;
};

export function createLlmProviders(config: LlmConfig): LlmProviders {
  // Loaded on the first live call: the provider package is heavy for every process start (CLI, workers).
  let live: Promise<{ chatModel(id: string): LanguageModelV4 }> | undefined;
  const sandboxes = new Map<string, SandboxLanguageModel>();
  return {
    async model(mode, modelId) {
      if (mode === 'live') {
        if (!config.baseUrl) return undefined;
        live ??= import('@ai-sdk/openai-compatible').then((m) => m.createOpenAICompatible({ name: 'live', baseURL: config.baseUrl!, apiKey: config.apiKey }));
        return (await live).chatModel(modelId);
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
