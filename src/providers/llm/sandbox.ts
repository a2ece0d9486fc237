/**
 * The sandbox language model: used by test-mode keys (and by live mode when no live provider is
 * configured for a test deployment). It implements the AI SDK's `LanguageModelV4` like a hosted
 * model would: replies derived deterministically from the input, usage counted with the service's
 * token rule, streamed text deltas with a first-token delay and per-chunk latency, tool calls, and
 * failures. Trigger phrases in the latest user message (documented in the README):
 *
 * - `#tool:<name>` or `#tool:<name>{json}`: calls the tool `<name>` (input: the JSON, else
 *   `{ "query": <the message without the trigger> }`), then answers from the tool's result;
 * - `#no-recover`: after a failed tool call, gives up (no answer text);
 * - `#provider-error`: the call fails as a provider error (HTTP 503 from the "provider");
 * - `#context-overflow`: the provider refuses the prompt as longer than its context window;
 * - `#blocked-output`: the answer contains a profanity and a card number (guardrails block it);
 * - `#long-reply`: a long answer, cut at `max_tokens` (finish reason `length`).
 */
import { hash } from 'node:crypto';
import {
  APICallError,
  type LanguageModelV4, type LanguageModelV4CallOptions, type LanguageModelV4Content, type LanguageModelV4FinishReason,
  type LanguageModelV4GenerateResult, type LanguageModelV4Prompt, type LanguageModelV4StreamPart, type LanguageModelV4Usage,
} from '@ai-sdk/provider';
import { contextWindow, estimatePromptTokens, estimateTokens } from './tokens.ts';

export type SandboxLlmTiming = { firstTokenMs: number; chunkMs: number };

type Plan =
  | { kind: 'text'; text: string; finish: LanguageModelV4FinishReason['unified'] }
  | { kind: 'tool'; name: string; input: string };

const TOOL_TRIGGER = /#tool:([A-Za-z0-9_-]+)(\{.*\})?/s;

export class SandboxLanguageModel implements LanguageModelV4 {
  readonly specificationVersion = 'v4' as const;
  readonly provider = 'sandbox';
  readonly modelId: string;
  readonly supportedUrls = {};
  readonly #timing: SandboxLlmTiming;
  #calls = 0;

  constructor(modelId: string, timing: SandboxLlmTiming) {
    this.modelId = modelId;
    this.#timing = timing;
  }

  async doGenerate(options: LanguageModelV4CallOptions): Promise<LanguageModelV4GenerateResult> {
    const plan = this.#plan(options);
    const content: LanguageModelV4Content[] = plan.kind === 'tool'
      ? [{ type: 'tool-call', toolCallId: this.#callId(), toolName: plan.name, input: plan.input }]
      : plan.text ? [{ type: 'text', text: plan.text }] : [];
    await delay(this.#timing.firstTokenMs, options.abortSignal);
    return {
      content,
      finishReason: { unified: plan.kind === 'tool' ? 'tool-calls' : plan.finish, raw: plan.kind === 'tool' ? 'tool_calls' : plan.finish },
      usage: usage(plan),
      warnings: [],
      response: { id: `sandbox-${this.#calls}`, modelId: this.modelId, timestamp: new Date() },
    };
  }

  async doStream(options: LanguageModelV4CallOptions): Promise<{ stream: ReadableStream<LanguageModelV4StreamPart> }> {
    const plan = this.#plan(options);
    const parts: LanguageModelV4StreamPart[] = [{ type: 'stream-start', warnings: [] }, { type: 'response-metadata', id: `sandbox-${this.#calls}`, modelId: this.modelId }];
    if (plan.kind === 'tool') {
      parts.push({ type: 'tool-call', toolCallId: this.#callId(), toolName: plan.name, input: plan.input });
    } else if (plan.text) {
      parts.push({ type: 'text-start', id: 't0' });
      for (const delta of deltas(plan.text)) parts.push({ type: 'text-delta', id: 't0', delta });
      parts.push({ type: 'text-end', id: 't0' });
    }
    parts.push({
      type: 'finish', usage: usage(plan),
      finishReason: { unified: plan.kind === 'tool' ? 'tool-calls' : plan.finish, raw: plan.kind === 'tool' ? 'tool_calls' : plan.finish },
    });
    const timing = this.#timing;
    const signal = options.abortSignal;
    // Like a hosted model, the clock starts with the call: the first content part is due
    // `firstTokenMs` after it and each next one `chunkMs` after the one before, whenever the
    // consumer reads (a consumer that reads late finds what has arrived already, as bytes wait in
    // a socket), so the SDK's own work after the call overlaps the model's time to first token.
    let due = performance.now() + timing.firstTokenMs - timing.chunkMs;
    let i = 0;
    const stream = new ReadableStream<LanguageModelV4StreamPart>({
      async pull(controller) {
        const part = parts[i++];
        if (!part) return controller.close();
        if (part.type === 'text-delta' || part.type === 'tool-call') {
          due += timing.chunkMs;
          try {
            await delay(due - performance.now(), signal);
          } catch (e) {
            controller.error(e);
            return;
          }
        }
        controller.enqueue(part);
      },
    });
    return { stream };
  }

  #callId(): string {
    return `call_sbx_${++this.#calls}`;
  }

  /** What the model answers, with the prompt's tokens (counted once: the context check and the usage both need them). */
  #plan(options: LanguageModelV4CallOptions): Plan & { inputTokens: number } {
    const inputTokens = estimatePromptTokens(promptTexts(options.prompt));
    return { ...this.#answer(options, inputTokens), inputTokens };
  }

  #answer(options: LanguageModelV4CallOptions, inputTokens: number): Plan {
    const prompt = options.prompt;
    const lastUser = lastUserText(prompt);
    const fail = (message: string, statusCode: number, code: string) => new APICallError({
      message, url: 'sandbox://llm', requestBodyValues: { model: this.modelId }, statusCode, isRetryable: false, data: { code },
    });
    if (lastUser.includes('#provider-error')) throw fail('The sandbox provider is unavailable (#provider-error)', 503, 'provider_unavailable');
    if (lastUser.includes('#context-overflow') || inputTokens > contextWindow(this.modelId)) {
      throw fail(`This model's maximum context length is ${contextWindow(this.modelId)} tokens`, 400, 'context_length_exceeded');
    }
    const results = toolResultsSinceUser(prompt);
    const maxTokens = options.maxOutputTokens ?? 4096;
    if (results.length > 0) {
      const failed = results.filter((r) => r.error);
      if (failed.length > 0 && lastUser.includes('#no-recover')) return { kind: 'text', text: '', finish: 'stop' };
      const text = results.map((r) => (r.error
        ? `I could not use ${r.tool} just now (${truncate(r.output, 160)}).`
        : `Here is what ${r.tool} returned: ${truncate(r.output, 600)}`)).join(' ');
      return cut(text, maxTokens);
    }
    const trigger = TOOL_TRIGGER.exec(lastUser);
    if (trigger) {
      const name = trigger[1]!;
      const query = lastUser.replace(TOOL_TRIGGER, '').trim();
      return { kind: 'tool', name, input: trigger[2] ?? JSON.stringify({ query }) };
    }
    if (lastUser.includes('#blocked-output')) {
      return cut('Damn, fine. The card on file is 4111 1111 1111 1111, call me at +1 415 555 0100.', maxTokens);
    }
    if (lastUser.includes('#long-reply')) {
      return cut(Array.from({ length: 200 }, (_v, n) => `Point ${n + 1} of the long answer.`).join(' '), maxTokens);
    }
    return cut(reply(systemText(prompt), lastUser), maxTokens);
  }
}

/** A deterministic answer: the same input gives the same words. */
function reply(system: string, user: string): string {
  const openers = ['Thanks for reaching out.', 'Happy to help.', 'Got it.', 'Sure thing.'];
  // One-shot digest (no Hash object per answer): the same bytes as createHash('sha256').
  const h = hash('sha256', `${system}\n${user}`, 'buffer');
  const opener = openers[h[0]! % openers.length]!;
  const topic = truncate(user.replace(/\s+/g, ' ').trim(), 140);
  return `${opener} You wrote: "${topic}". Let me know if there is anything else I can do.`;
}

function cut(text: string, maxTokens: number): Plan {
  if (estimateTokens(text) <= maxTokens) return { kind: 'text', text, finish: 'stop' };
  const words = text.split(' ');
  let out = '';
  for (const w of words) {
    const next = out ? `${out} ${w}` : w;
    if (estimateTokens(next) > maxTokens) break;
    out = next;
  }
  return { kind: 'text', text: out, finish: 'length' };
}

function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** Words with their following space: the pieces a hosted model streams. */
function deltas(text: string): string[] {
  return text.match(/\S+\s*/g) ?? [text];
}

function lastUserText(prompt: LanguageModelV4Prompt): string {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const m = prompt[i]!;
    if (m.role === 'user') return m.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  }
  return '';
}

function systemText(prompt: LanguageModelV4Prompt): string {
  return prompt.filter((m) => m.role === 'system').map((m) => m.content as string).join('\n');
}

type SeenResult = { tool: string; output: string; error: boolean };

function toolResultsSinceUser(prompt: LanguageModelV4Prompt): SeenResult[] {
  const out: SeenResult[] = [];
  for (let i = prompt.length - 1; i >= 0; i--) {
    const m = prompt[i]!;
    if (m.role === 'user') break;
    if (m.role !== 'tool') continue;
    for (const part of m.content) {
      if (part.type !== 'tool-result') continue;
      const o = part.output;
      const error = o.type === 'error-text' || o.type === 'error-json';
      const value = 'value' in o ? (typeof o.value === 'string' ? o.value : JSON.stringify(o.value)) : o.type;
      out.unshift({ tool: part.toolName, output: value, error });
    }
  }
  return out;
}

function promptTexts(prompt: LanguageModelV4Prompt): string[] {
  return prompt.map((m) => {
    if (m.role === 'system') return m.content;
    return m.content.map((c) => {
      if (c.type === 'text') return c.text;
      if (c.type === 'tool-call') return JSON.stringify(c.input);
      if (c.type === 'tool-result') return JSON.stringify(c.output);
      return '';
    }).join(' ');
  });
}

function usage(plan: Plan & { inputTokens: number }): LanguageModelV4Usage {
  const input = plan.inputTokens;
  const output = plan.kind === 'tool' ? estimateTokens(plan.name) + estimateTokens(plan.input) : estimateTokens(plan.text);
  return {
    inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: output, text: plan.kind === 'text' ? output : 0, reasoning: 0 },
  };
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason ?? new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
