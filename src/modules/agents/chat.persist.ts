/**
 * Stores one turn in one transaction: the conversation (created on its first turn), the user's and
 * the agent's messages with their guardrail decisions, max_turns and handoff outcomes, usage
 * (invocation, input and output tokens) and the conversation events; `within` runs in that
 * transaction too (the invocation's credit capture, agents.billing.ts). Usage keys are the turn's
 * `usageKey` (stable across retries of one turn) or the answer's message id, so a turn counts once.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { USAGE_COLUMNS, USAGE_ON_CONFLICT, usageRow } from '../../platform/usage/usage.ts';
import { AgentConversation, AgentMessage, type Agent } from './agents.entities.ts';
import type { GuardrailDecision, ToolCallRecord } from './agents.model.ts';
import type { AgentEvent } from './agents.ports.ts';
import type { PhiCodec } from '../../platform/phi.ts';
import { sealAgentMessage, sealConversationContext } from './agents.phi.ts';

export type TurnOutcome = {
  agent: Agent;
  conversation: AgentConversation | null;
  conversationId: string;
  req: { channel: string; contactAddress?: string | null; context?: Record<string, unknown> | null };
  userText: string;
  inputDecisions: GuardrailDecision[];
  answer: string;
  toolCalls: ToolCallRecord[];
  outputDecisions: GuardrailDecision[];
  tokens: { input: number; output: number };
  latencyMs: number;
  /** Why the conversation goes to a human, when it does. */
  handoff: string | null;
  blockedBy: string | undefined;
  partial: boolean;
  /** HIPAA mode: the codec sealing the messages and a new conversation's context (null outside it). */
  writer: Promise<PhiCodec | null>;
  /** The base of the usage entries' keys when the turn has a retry key (a retried turn counts once). */
  usageKey?: string;
};

/** How an escalation-keyword handoff's reason starts (chat.service.ts). */
export const ESCALATION_PREFIX = 'escalation keyword: ';

export async function persistTurn(
  orm: MikroORM, clock: Clock, scope: Scope, o: TurnOutcome, within?: (tx: EntityManager) => Promise<void>,
): Promise<{ conversation: AgentConversation; message: AgentMessage }> {
  const codec = await o.writer;
  const seal = <T extends Pick<AgentMessage, 'id' | 'content' | 'toolCalls'>>(m: T) => (codec ? sealAgentMessage(m, codec) : m);
  return tenantEm(orm, scope).transactional(async (tx) => {
    const now = clock.now();
    const t = now.getTime();
    const emit = (type: AgentEvent, c: AgentConversation, data: Record<string, unknown> = {}) =>
      emitEvent(tx, scope, { type, resourceType: 'conversation', resourceId: c.id, sequence: c.turns, data: { conversation_id: c.id, agent_id: c.agentId, ...data } }, now);
    let c: AgentConversation;
    if (o.conversation) {
      const locked = await tx.findOne(AgentConversation, { id: o.conversation.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!locked || locked.status !== 'active') {
        throw new ServiceError('CONFLICT', 'The conversation ended while the agent was answering', { conversation_id: o.conversation.id, status: locked?.status });
      }
      c = locked;
    } else {
      const fields = { id: o.conversationId, context: o.req.context ?? {} };
      c = tx.create(AgentConversation, {
        ...(codec ? sealConversationContext(fields, codec) : fields), organizationId: scope.organizationId, mode: scope.mode, agentId: o.agent.id, status: 'active',
        channel: o.req.channel, contactAddress: o.req.contactAddress ?? null, turns: 0, handoff: false,
        endedReason: null, lastMessageAt: now, createdAt: now, updatedAt: now, endedAt: null,
      });
      emit('conversation.started', c, { channel: c.channel });
    }
    c.turns += 1;
    c.lastMessageAt = now;
    c.updatedAt = now;
    const assistantDecisions = [...o.outputDecisions];
    if (o.handoff && !c.handoff) {
      c.handoff = true;
      // HIPAA mode: events carry no content, so the reason is its kind (the matched keyword or the model's words are PHI).
      emit('conversation.handoff', c, { reason: codec ? (o.handoff.startsWith(ESCALATION_PREFIX) ? 'escalation_keyword' : 'human_handoff') : o.handoff });
    }
    const maxTurns = o.agent.guardrails.max_turns;
    if (maxTurns && c.turns >= maxTurns && !o.partial) {
      Object.assign(c, { status: 'completed', endedReason: 'max_turns', endedAt: now });
      assistantDecisions.push({ guardrail: 'max_turns', action: 'ended', detail: String(maxTurns) });
      emit('conversation.completed', c, { reason: 'max_turns' });
    }
    const base = { organizationId: scope.organizationId, mode: scope.mode, conversationId: c.id, agentId: o.agent.id, createdAt: now };
    tx.create(AgentMessage, {
      ...base, ...seal({ id: newId('amsg', t - 1), content: o.userText, toolCalls: [] }), role: 'user', guardrails: o.inputDecisions,
      tokensInput: 0, tokensOutput: 0, latencyMs: null, partial: false,
    });
    const message = tx.create(AgentMessage, {
      ...base, ...seal({ id: newId('amsg', t), content: o.answer, toolCalls: o.toolCalls }), role: 'assistant', guardrails: assistantDecisions,
      tokensInput: o.tokens.input, tokensOutput: o.tokens.output, latencyMs: o.latencyMs, partial: o.partial,
    });
    await tx.flush();
    // The invocation and its tokens in one statement (a turn is on the hot path).
    const kind = o.req.channel === 'test' ? 'agent.test_invocation' : 'agent.invocation';
    const entries = ([[kind, 1], ['agent.tokens.input', o.tokens.input], ['agent.tokens.output', o.tokens.output]] as const)
      .filter(([, q]) => q > 0)
      .map(([k, quantity]) => usageRow(scope, { context: 'agents', kind: k, quantity, resourceId: o.agent.id, idempotencyKey: `${o.usageKey ?? message.id}:${k}` }, now));
    const params = entries.flatMap((e) => USAGE_COLUMNS.map((col) => e[col]));
    const values = entries.map(() => `(${USAGE_COLUMNS.map(() => '?').join(', ')})`).join(', ');
    await tx.getConnection().execute(`insert into usage_entries (${USAGE_COLUMNS.join(', ')}) values ${values} ${USAGE_ON_CONFLICT}`, params, 'run', tx.getTransactionContext());
    if (within) await within(tx);
    return { conversation: c, message };
  });
}
