/**
 * Chat: one user turn and the agent's answer. A turn is an async generator of stream events
 * (`chunk`, `tool_call`, `tool_result`, then `done`) that returns the stored result; the
 * non-streamed chat consumes the same generator, which then asks the model for whole responses
 * (`generateText`: no stream of deltas to pass through, a third of the CPU of a turn). Order of a turn: the agent must be active
 * (AGENT_NOT_DEPLOYED); input guardrails (redaction, escalation, blocked topics); the prompt's
 * tokens are estimated and checked against the model's context window (CONTEXT_TOO_LONG) before
 * any call; the model runs with the agent's tools; output guardrails check the answer as it grows
 * (a blocked answer never leaves: GUARDRAIL_VIOLATION); then the conversation, both messages, the
 * usage (invocation, input and output tokens) and events commit in one transaction. A provider
 * failure writes nothing (LLM_PROVIDER_ERROR; a live call past LLM_TIMEOUT_MS is one). A client
 * that goes away mid-stream leaves the partial answer stored and marked `partial`. Live mode pays
 * each turn that calls the model from the credit balance (agents.billing.ts): reserved just before
 * the model runs, captured in the transaction that stores the answer, released when the turn fails.
 */
import { performance } from 'node:perf_hooks';
import type { ModelMessage } from 'ai';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { loadAi, type LlmProviders } from '../../providers/llm/types.ts';
import { contextWindow, estimatePromptTokens } from '../../providers/llm/tokens.ts';
import { Agent, AgentConversation, AgentMessage } from './agents.entities.ts';
import type { GuardrailDecision, ToolCallRecord } from './agents.model.ts';
import type { AgentsService } from './agents.service.ts';
import type { AgentTools } from './chat.tools.ts';
import { BLOCKED_REPLY, checkInput, checkOutput } from './guardrails.ts';
import { assertDeployed, providerError, sourcesOf, systemPrompt, toolTokens, usageOf, type TokensUsed } from './chat.rules.ts';
import { ESCALATION_PREFIX, TurnStore, type StoredTurn, type TurnOutcome } from './chat.persist.ts';
import { openAgentMessage, openConversation, type AgentsPhi } from './agents.phi.ts';
import type { PhiCodec } from '../../platform/phi.ts';
import { turnKeyOf, type AgentBilling, type TurnCharge } from './agents.billing.ts';

export type ChatEvent =
  | { event: 'chunk'; data: { content: string } }
  | { event: 'tool_call'; data: { tool: string; input: unknown } }
  | { event: 'tool_result'; data: { tool: string; output: unknown } }
  | { event: 'done'; data: { conversation_id: string; message_id: string; tokens_used: TokensUsed; latency_ms: number } }
  | { event: 'error'; data: { code: string; message: string; status: number; details: Record<string, unknown> } };


export type ChatResult = {
  conversationId: string;
  messageId: string;
  role: 'assistant';
  content: string;
  toolCalls: ToolCallRecord[];
  tokensUsed: TokensUsed;
  latencyMs: number;
  guardrails: GuardrailDecision[];
  handoff: boolean;
  ended: boolean;
  /** The guardrail that blocked the answer (the stored reply is the replacement). */
  blockedBy: string | undefined;
  /** HIPAA mode: the turn was stored sealed; whoever stores `content` elsewhere must not keep it in clear. */
  sealed: boolean;
};

export type TurnRequest = {
  agentId: string;
  message: string;
  conversationId?: string | null;
  context?: Record<string, unknown> | null;
  /** api (chat endpoint), test (simulation: nothing leaves, billed as test), sms, whatsapp, voice. */
  channel: string;
  contactAddress?: string | null;
  /** A blocked answer throws GUARDRAIL_VIOLATION (API); channels get the replacement instead. */
  throwOnBlocked: boolean;
  /** HIPAA mode: the caller's access to the conversation's history was checked and logged already (precheck). */
  historyChecked?: boolean;
  /**
   * Stable across retries of this one turn (the request's Idempotency-Key claim, a flow step): a
   * retry reuses the turn's credit reservation and usage keys, so it is paid and counted once.
   */
  retryKey?: string | null;
  /** What `precheck` read just before (the stream's turn starts from it). */
  prechecked?: { agent: Agent; conversation: AgentConversation | undefined };
};

/** A turn's credit reservation, and whether the transaction storing the answer captured it. */
type Billing = { charge: TurnCharge | undefined; captured: boolean };

const HISTORY_LIMIT = 40;
const MAX_STEPS = 5;
const HANDOFF_REPLY = 'I’m connecting you with a member of our team who will pick this up shortly.';

export class ChatService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #llm: LlmProviders;
  readonly #agents: AgentsService;
  readonly #tools: AgentTools;
  readonly #phi: AgentsPhi;
  readonly #billing: AgentBilling;
  readonly #turns: TurnStore;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock; llm: LlmProviders; agents: AgentsService; tools: AgentTools; phi: AgentsPhi; billing: AgentBilling }) {
    this.#turns = new TurnStore(deps);
    this.#phi = deps.phi;
    this.#billing = deps.billing;
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#llm = deps.llm;
    this.#agents = deps.agents;
    this.#tools = deps.tools;
  }

  /** The whole turn without streaming. */
  async chat(scope: Scope, req: TurnRequest): Promise<ChatResult> {
    const turn = this.turn(scope, req, 'generate');
    for (;;) {
      const step = await turn.next();
      if (step.done) return step.value;
    }
  }

  /** Stream events, ending with `done` (or an `error` event: the stream never throws once started). */
  async *stream(scope: Scope, req: TurnRequest): AsyncGenerator<ChatEvent, void> {
    const turn = this.turn(scope, req);
    try {
      for (;;) {
        const step = await turn.next();
        if (step.done) return;
        yield step.value;
      }
    } catch (e) {
      const se = e instanceof ServiceError ? e : new ServiceError('AGENT_ERROR', 'The agent failed during execution');
      yield { event: 'error', data: { code: se.code, message: se.message, status: se.status, details: se.details } };
    } finally {
      await turn.return(undefined as never);
    }
  }

  /**
   * The reads a turn starts from (the agent, deployed unless testing, and the conversation it
   * continues): nothing is written, so the chat operation runs them alongside its rate-limit
   * admission (Operation.prepare). The turn takes them as `prechecked`.
   */
  async prepare(scope: Scope, req: Pick<TurnRequest, 'agentId' | 'conversationId' | 'channel'>): Promise<NonNullable<TurnRequest['prechecked']>> {
    const agent = await this.#agents.forTurn(scope, req.agentId);
    if (req.channel !== 'test') assertDeployed(agent);
    const conversation = req.conversationId ? await this.#conversation(scope, agent.id, req.conversationId) : undefined;
    return { agent, conversation };
  }

  /**
   * Checks made before anything streams (so a REST stream can still answer with an HTTP error),
   * the credit balance included (live mode: it must cover one invocation; the reservation itself
   * is made by the turn).
   */
  async precheck(scope: Scope, req: TurnRequest): Promise<TurnRequest> {
    const { agent, conversation } = req.prechecked ?? await this.prepare(scope, req);
    if (req.conversationId) await this.#phi.assertMayContinue(scope, req.conversationId, 'agents.chat');
    await this.#billing.precheck(scope);
    // The turn starts from what was just read (one read of each fewer before the first chunk).
    return { ...req, prechecked: { agent, conversation }, historyChecked: true };
  }

  /**
   * One turn. `how`: `stream` passes the model's deltas on as they come (an output guardrail
   * stops the model at the first blocked delta); `generate` (the non-streamed chat, channels,
   * simulations, flows) takes each step's whole response, then applies the same checks to the
   * whole answer, and yields the answer as one `chunk`.
   */
  async *turn(scope: Scope, req: TurnRequest, how: 'stream' | 'generate' = 'stream'): AsyncGenerator<ChatEvent, ChatResult> {
    const started = performance.now();
    const agent = req.prechecked?.agent ?? await this.#agents.forTurn(scope, req.agentId);
    if (req.channel !== 'test') assertDeployed(agent);
    // HIPAA mode: the organization's codec seals what the turn stores (null outside HIPAA mode). A
    // streamed turn asks for it once the model's stream has begun (its lookup, a read every
    // HIPAA_MODE_CACHE_MS, overlaps the model's time to first token instead of preceding the call).
    let writing: Promise<PhiCodec | null> | undefined;
    const writer = () => {
      if (!writing) {
        writing = this.#phi.writer(scope.organizationId);
        writing.catch(() => {});
      }
      return writing;
    };
    const conversation = req.prechecked?.conversation ?? (req.conversationId ? await this.#conversation(scope, agent.id, req.conversationId) : null);
    if (conversation && !req.historyChecked) await this.#phi.assertMayContinue(scope, conversation.id, 'agents.chat');
    const history = conversation ? await this.#history(scope, conversation.id) : [];
    const input = checkInput(agent.guardrails, req.message);
    const outcome: TurnOutcome = {
      agent, conversation, req, userText: input.text, inputDecisions: input.decisions, answer: '', toolCalls: [], outputDecisions: [],
      tokens: { input: 0, output: 0 }, latencyMs: 0, handoff: input.escalate ? `${ESCALATION_PREFIX}${input.decisions.find((d) => d.action === 'escalated')?.detail}` : null,
      blockedBy: undefined, partial: false, conversationId: conversation?.id ?? newId('conv', this.#clock.now().getTime()), writer,
    };
    const turnKey = req.retryKey ? turnKeyOf(scope, req.retryKey) : undefined;
    if (turnKey) outcome.usageKey = turnKey;
    const billing: Billing = { charge: undefined, captured: false };

    if (input.blockedTopic || input.escalate) {
      outcome.answer = input.escalate ? HANDOFF_REPLY : `I’m not able to help with ${input.blockedTopic}. Is there anything else I can do?`;
      yield { event: 'chunk', data: { content: outcome.answer } };
      return yield* this.#finish(scope, outcome, started, billing);
    }

    const model = await this.#llm.model(scope.mode, agent.model);
    if (!model) throw new ServiceError('LLM_PROVIDER_ERROR', 'No live language model provider is configured (LLM_BASE_URL)', { reason: 'not_configured', model: agent.model });
    const system = systemPrompt(agent, { ...conversation?.context, ...req.context });
    const messages: ModelMessage[] = [...history, { role: 'user', content: input.text }];
    const tokens = estimatePromptTokens([system, ...messages.map((m) => String(m.content))]) + toolTokens(agent.tools);
    const limit = contextWindow(agent.model);
    if (tokens > limit) {
      throw new ServiceError('CONTEXT_TOO_LONG', `The conversation needs about ${tokens} tokens; model ${agent.model} takes ${limit}`, { tokens, limit, model: agent.model });
    }

    const abort = new AbortController();
    const { tools, toolsContext } = await this.#tools.build({
      scope, agent, toolSecret: () => this.#agents.toolSecret(agent), conversationId: () => outcome.conversationId, simulate: req.channel === 'test', signal: abort.signal,
      onHandoff: (reason) => { outcome.handoff = reason; },
    });
    // Live mode: one invocation is reserved before the model runs (402 INSUFFICIENT_CREDITS: no call, nothing stored).
    billing.charge = await this.#billing.reserve(scope, { key: turnKey, conversationId: outcome.conversationId });
    const buffered = !!agent.guardrails.pii_redaction;
    let finished = false;
    let failed = false;
    try {
      // The AI SDK is loaded on the first turn (it is heavy for every process start).
      const ai = await loadAi();
      const call = {
        // Each tool's context is the turn (chat.tools.ts: tool objects are kept per agent). A ToolSet built
        // at run time declares no context type, so the SDK's typing admits none: hence the cast.
        model, system, messages, tools, toolsContext: toolsContext as never, stopWhen: ai.stepCountIs(MAX_STEPS), maxRetries: 0, abortSignal: abort.signal,
        temperature: Number(agent.temperature), maxOutputTokens: agent.maxTokens,
        // The service traces with its own OpenTelemetry spans (platform/tracing.ts) and registers no
        // AI SDK telemetry: off, the SDK skips its per-call event copies, credential redaction and
        // tracing-channel lookups (~5 % of a non-streamed turn's CPU in a profile, and work before a stream's first delta).
        telemetry: { isEnabled: false },
      };
      let usage: () => Promise<TokensUsed>;
      if (how === 'generate') {
        // Nobody watches the answer grow: one model response per step (no stream to pass through).
        writer();
        const result = await ai.generateText(call);
        const pending = new Map<string, ToolCallRecord>();
        for (const step of result.steps) {
          for (const part of step.content) {
            if (part.type === 'text') outcome.answer += part.text;
            else if (part.type === 'tool-call') this.#toolCall(outcome, pending, part);
            else if (part.type === 'tool-result') this.#toolResult(pending, part, part.output);
            else if (part.type === 'tool-error') this.#toolResult(pending, part, undefined, part.error);
          }
        }
        outcome.tokens = { input: result.totalUsage.inputTokens ?? 0, output: result.totalUsage.outputTokens ?? 0 };
        const verdict = checkOutput(agent.guardrails, outcome.answer);
        if (verdict.blockedBy) Object.assign(outcome, { blockedBy: verdict.blockedBy, outputDecisions: verdict.decisions });
        usage = async () => outcome.tokens;
      } else {
        const result = ai.streamText({ ...call, onError: () => {} });
        usage = () => usageOf(result, outcome.tokens);
        const pending = new Map<string, ToolCallRecord>();
        for await (const part of result.fullStream) {
          writer();
          switch (part.type) {
            case 'text-delta': {
              const verdict = checkOutput(agent.guardrails, outcome.answer + part.text);
              if (verdict.blockedBy) {
                outcome.blockedBy = verdict.blockedBy;
                outcome.outputDecisions = verdict.decisions;
                abort.abort();
                break;
              }
              outcome.answer += part.text;
              if (!buffered) yield { event: 'chunk', data: { content: part.text } };
              break;
            }
            case 'tool-call':
              this.#toolCall(outcome, pending, part);
              yield { event: 'tool_call', data: { tool: part.toolName, input: part.input } };
              break;
            case 'tool-result':
              this.#toolResult(pending, part, part.output);
              yield { event: 'tool_result', data: { tool: part.toolName, output: part.output } };
              break;
            case 'tool-error': {
              const message = this.#toolResult(pending, part, undefined, part.error);
              yield { event: 'tool_result', data: { tool: part.toolName, output: { error: message } } };
              break;
            }
            case 'error':
              throw providerError(part.error, agent.model);
            case 'finish':
              outcome.tokens = { input: part.totalUsage.inputTokens ?? 0, output: part.totalUsage.outputTokens ?? 0 };
              break;
            default:
              break;
          }
          if (outcome.blockedBy) break;
        }
      }
      if (outcome.blockedBy) {
        outcome.tokens = await usage();
        const stored = yield* this.#finish(scope, outcome, started, billing);
        if (req.throwOnBlocked) {
          throw new ServiceError('GUARDRAIL_VIOLATION', `The agent's answer was blocked by the ${outcome.blockedBy} guardrail`, {
            guardrail: outcome.blockedBy, conversation_id: stored.conversationId, message_id: stored.messageId,
          });
        }
        return stored;
      }
      const failedTools = outcome.toolCalls.filter((t) => t.error);
      if (!outcome.answer.trim() && failedTools.length > 0) {
        throw new ServiceError('TOOL_EXECUTION_FAILED', `Tool ${failedTools[0]!.tool} failed and the agent could not recover: ${failedTools[0]!.error}`, {
          tool: failedTools[0]!.tool, error: failedTools[0]!.error,
        });
      }
      if (buffered) {
        const verdict = checkOutput(agent.guardrails, outcome.answer);
        outcome.answer = verdict.text;
        outcome.outputDecisions = verdict.decisions;
        if (outcome.answer) yield { event: 'chunk', data: { content: outcome.answer } };
      } else if (how === 'generate' && outcome.answer) {
        yield { event: 'chunk', data: { content: outcome.answer } };
      }
      if (outcome.handoff && !outcome.answer.trim()) outcome.answer = HANDOFF_REPLY;
      const stored = yield* this.#finish(scope, outcome, started, billing);
      finished = true;
      return stored;
    } catch (e) {
      failed = true;
      if (e instanceof ServiceError) throw e;
      throw providerError(e, agent.model);
    } finally {
      // A finished turn has nothing left running to stop (and an abort builds a DOMException with its
      // stack: ~0.09 ms of CPU per turn in a profile of streamed chat).
      if (!finished) abort.abort();
      try {
        // The consumer went away mid-stream (return() on the generator): keep what was produced (the model ran: paid).
        if (!finished && !failed && !outcome.blockedBy && outcome.answer) {
          outcome.partial = true;
          await this.#persist(scope, { ...outcome, latencyMs: Math.round(performance.now() - started) }, billing);
        }
      } finally {
        // Nothing stored (a failure, or the consumer left before any answer): the reservation goes back.
        if (!billing.captured) await this.#billing.release(scope, billing.charge);
      }
    }
  }

  #toolCall(outcome: TurnOutcome, pending: Map<string, ToolCallRecord>, part: { toolCallId: string; toolName: string; input: unknown }): void {
    const rec: ToolCallRecord = { tool: part.toolName, input: part.input };
    pending.set(part.toolCallId, rec);
    outcome.toolCalls.push(rec);
  }

  /** Records a tool's output (with the sources it cites) or its error; returns the error's message. */
  #toolResult(pending: Map<string, ToolCallRecord>, part: { toolCallId: string }, output: unknown, error?: unknown): string | undefined {
    const rec = pending.get(part.toolCallId);
    if (error !== undefined) {
      const message = error instanceof Error ? error.message : String(error);
      if (rec) Object.assign(rec, { error: message });
      return message;
    }
    if (rec) Object.assign(rec, { output }, sourcesOf(output));
    return undefined;
  }

  /** Stores the turn; the invocation's reservation is captured in the same transaction. */
  async #persist(scope: Scope, outcome: TurnOutcome, billing: Billing): Promise<StoredTurn> {
    const stored = await this.#turns.persist(scope, outcome, billing.charge ? (tx) => this.#billing.capture(scope, billing.charge, tx) : undefined);
    billing.captured = true;
    return stored;
  }

  async *#finish(scope: Scope, outcome: TurnOutcome, started: number, billing: Billing): AsyncGenerator<ChatEvent, ChatResult> {
    if (outcome.blockedBy) outcome.answer = BLOCKED_REPLY;
    outcome.latencyMs = Math.round(performance.now() - started);
    const stored = await this.#persist(scope, outcome, billing);
    // The answer is the caller's (generated for them): shown in clear even when stored sealed.
    const result: ChatResult = {
      conversationId: stored.conversation.id, messageId: stored.message.id, role: 'assistant', content: outcome.answer,
      toolCalls: outcome.toolCalls, tokensUsed: outcome.tokens, latencyMs: outcome.latencyMs,
      guardrails: [...outcome.inputDecisions, ...outcome.outputDecisions], handoff: stored.conversation.handoff,
      ended: stored.conversation.status !== 'active', blockedBy: outcome.blockedBy, sealed: stored.message.phi != null,
    };
    if (!outcome.blockedBy) {
      yield { event: 'done', data: { conversation_id: result.conversationId, message_id: result.messageId, tokens_used: result.tokensUsed, latency_ms: result.latencyMs } };
    }
    return result;
  }

  async #conversation(scope: Scope, agentId: string, id: string): Promise<AgentConversation> {
    const c = await tenantEm(this.#orm, scope).findOne(AgentConversation, { id, agentId });
    if (!c) throw notFound('Conversation', id);
    if (c.status !== 'active') throw new ServiceError('CONFLICT', `The conversation is ${c.status}; start a new one (omit conversation_id)`, { conversation_id: id, status: c.status });
    const codec = await this.#phi.opener(scope.organizationId, [c.phi]);
    return codec ? openConversation(c, codec) : c;
  }

  async #history(scope: Scope, conversationId: string): Promise<ModelMessage[]> {
    const rows = await tenantEm(this.#orm, scope).find(AgentMessage, { conversationId }, { orderBy: { id: 'desc' }, limit: HISTORY_LIMIT });
    const codec = await this.#phi.opener(scope.organizationId, rows.map((m) => m.phi));
    return rows.reverse().map((m) => (codec ? openAgentMessage(m, codec) : m)).map((m) => ({ role: m.role, content: m.content }));
  }
}
