/**
 * Token estimates, one rule for the whole service: the sandbox model reports usage with it and the
 * agents context checks a request against the model's context window with it before any call.
 * About four characters a token for ordinary text (the usual BPE ratio for English), words and
 * punctuation counted so short texts are not under-estimated, plus a fixed cost per message.
 */
const PER_MESSAGE = 4;

export function estimateTokens(text: string): number {
  if (text.length === 0) return 0;
  const words = text.match(/[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu)?.length ?? 0;
  return Math.max(words, Math.ceil(text.length / 4));
}

/** Tokens of a prompt: each message's text plus its framing. */
export function estimatePromptTokens(parts: readonly string[]): number {
  let total = 0;
  for (const p of parts) total += estimateTokens(p) + PER_MESSAGE;
  return total;
}

/** Context windows of known model ids (prefix match); anything else gets the default. */
const CONTEXT_WINDOWS: readonly [prefix: string, tokens: number][] = [
  ['sandbox-small', 2_048],
  ['sandbox', 32_768],
  ['gpt-4o', 128_000],
  ['gpt-4.1', 1_000_000],
  ['gpt-4', 8_192],
  ['gpt-3.5', 16_385],
  ['claude', 200_000],
  ['llama', 128_000],
  ['mistral', 32_768],
];
export const DEFAULT_CONTEXT_WINDOW = 32_768;

export function contextWindow(modelId: string): number {
  const id = modelId.toLowerCase();
  for (const [prefix, tokens] of CONTEXT_WINDOWS) if (id.startsWith(prefix)) return tokens;
  return DEFAULT_CONTEXT_WINDOW;
}
