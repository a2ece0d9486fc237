/**
 * The pure parts of a chat turn (split from chat.service.ts): whether an agent may chat, its system
 * prompt and tool-definition tokens, the sources a knowledge tool cites, the usage a provider
 * reports, and how provider failures map to the spec's errors.
 */
import { APICallError } from '@ai-sdk/provider';
import { ServiceError } from '../../platform/errors.ts';
import { LlmDeadlineError } from '../../providers/llm/types.ts';
import { estimatePromptTokens } from '../../providers/llm/tokens.ts';
import type { Agent } from './agents.entities.ts';
import type { ToolCallRecord } from './agents.model.ts';

/** Tokens a turn used, in and out. */
export type TokensUsed = { input: number; output: number };

export function assertDeployed(agent: Agent): void {
  if (agent.status === 'active') return;
  if (agent.status === 'error') {
    throw new ServiceError('AGENT_NOT_DEPLOYED', `The agent is in error (${agent.errorReason ?? 'invalid configuration'}); fix it and deploy again`, { status: agent.status, reason: agent.errorReason });
  }
  throw new ServiceError('AGENT_NOT_DEPLOYED', `The agent is ${agent.status}; deploy (or resume) it first`, { status: agent.status });
}

/** The prompt tokens of an agent's tool definitions, per definitions array (a cached agent's is the same on every turn). */
const TOOL_TOKENS = new WeakMap<Agent['tools'], number>();
export function toolTokens(tools: Agent['tools']): number {
  let n = TOOL_TOKENS.get(tools);
  if (n === undefined) TOOL_TOKENS.set(tools, n = estimatePromptTokens([JSON.stringify(tools)]));
  return n;
}

export function systemPrompt(agent: Agent, context: Record<string, unknown>): string {
  const parts = [agent.systemPrompt];
  if (agent.instructions) parts.push(agent.instructions);
  if (Object.keys(context).length > 0) parts.push(`Context: ${JSON.stringify(context)}`);
  return parts.join('\n\n');
}

export function sourcesOf(output: unknown): Partial<ToolCallRecord> {
  const results = (output as { results?: { source?: { document_id: string; filename: string; chunk: number } }[] } | null)?.results;
  if (!Array.isArray(results)) return {};
  const sources = results.map((r) => r.source).filter((s): s is NonNullable<typeof s> => !!s);
  return sources.length ? { sources } : {};
}

export async function usageOf(result: { totalUsage: PromiseLike<{ inputTokens: number | undefined; outputTokens: number | undefined }> }, fallback: TokensUsed): Promise<TokensUsed> {
  try {
    const u = await Promise.race([result.totalUsage, new Promise<undefined>((r) => setTimeout(r, 50, undefined))]);
    return u ? { input: u.inputTokens ?? fallback.input, output: u.outputTokens ?? fallback.output } : fallback;
  } catch {
    return fallback;
  }
}

/** Provider failures: a context-window refusal is CONTEXT_TOO_LONG, anything else LLM_PROVIDER_ERROR. */
export function providerError(e: unknown, model: string): ServiceError {
  if (e instanceof ServiceError) return e;
  const deadline = e instanceof LlmDeadlineError ? e : (e as { cause?: unknown } | null)?.cause instanceof LlmDeadlineError ? (e as { cause: LlmDeadlineError }).cause : undefined;
  if (deadline) {
    return new ServiceError('LLM_PROVIDER_ERROR', `The language model provider did not answer in time: ${deadline.message}`, { model, reason: 'timeout', timeout_ms: deadline.timeoutMs });
  }
  if (APICallError.isInstance(e)) {
    const code = (e.data as { code?: string } | undefined)?.code ?? '';
    if (code === 'context_length_exceeded' || /context length|context window|maximum context/i.test(e.message)) {
      return new ServiceError('CONTEXT_TOO_LONG', e.message, { model });
    }
    return new ServiceError('LLM_PROVIDER_ERROR', `The language model provider failed: ${e.message}`, { model, provider_status: e.statusCode ?? null });
  }
  const name = (e as { name?: string } | null)?.name ?? '';
  if (name === 'AI_NoSuchToolError' || name === 'AI_InvalidToolInputError') {
    return new ServiceError('TOOL_EXECUTION_FAILED', (e as Error).message, { model });
  }
  return new ServiceError('LLM_PROVIDER_ERROR', `The language model provider failed: ${(e as Error)?.message ?? String(e)}`, { model });
}
