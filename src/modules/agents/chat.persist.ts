/**
 * Stores one turn atomically: the conversation (created on its first turn), the user's and the
 * agent's messages with their guardrail decisions, max_turns and handoff outcomes, usage
 * (invocation, input and output tokens) and the conversation events. Usage keys are the turn's
 * `usageKey` (stable across retries of one turn) or the answer's message id, so a turn counts once.
 *
 * Two paths, one set of rows (`turnRows`):
 * - a turn that continues a conversation, or whose credit capture must commit with it (`within`,
 *   agents.billing.ts), runs in a transaction that locks the conversation (it may have ended
 *   meanwhile: CONFLICT) and counts the turn on it;
 * - a turn that starts a conversation and pays nothing (test mode, free or uncharged turns: the
 *   hot path of the chat endpoint) has nothing to lock: it joins a group commit (platform/db/
 *   groupInsert.ts), one multi-table INSERT statement for every such turn of the moment.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { EVENT_COLUMNS, emitEvent, eventRow, type EventInput } from '../../platform/events/events.ts';
import { entityColumns, GroupInsert } from '../../platform/db/groupInsert.ts';
import { USAGE_COLUMNS, USAGE_ON_CONFLICT, usageRow, type UsageInput } from '../../platform/usage/usage.ts';
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
  /** HIPAA mode: the codec sealing the messages and a new conversation's context (null outside it); asked for once. */
  writer: () => Promise<PhiCodec | null>;
  /** The base of the usage entries' keys when the turn has a retry key (a retried turn counts once). */
  usageKey?: string;
};

/** How an escalation-keyword handoff's reason starts (chat.service.ts). */
export const ESCALATION_PREFIX = 'escalation keyword: ';

export type StoredTurn = { conversation: AgentConversation; message: AgentMessage };

/** What a turn writes besides the conversation itself (which `turnRows` updates in place). */
type TurnRows = { messages: AgentMessage[]; events: EventInput[]; usage: UsageInput[] };

/** A new conversation's turn in the group commit. */
type FreshTurn = { scope: Scope; conversation: AgentConversation; rows: TurnRows; now: Date };

export class TurnStore {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #fresh: GroupInsert<FreshTurn>;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    const meta = deps.orm.getMetadata();
    const conversationColumns = entityColumns(meta.get(AgentConversation).properties);
    const messageColumns = entityColumns(meta.get(AgentMessage).properties);
    this.#fresh = new GroupInsert<FreshTurn>({
      pool: deps.pool, name: 'agents_turn', maxInFlight: 2,
      sets: [
        // The entities go in as they are (`properties`: each column's value under its property).
        { table: 'agent_conversations', columns: conversationColumns.map((c) => c.column), properties: conversationColumns.map((c) => c.property), row: (t) => t.conversation },
        { table: 'agent_messages', columns: messageColumns.map((c) => c.column), properties: messageColumns.map((c) => c.property), rows: (t) => t.rows.messages },
        { table: 'events', columns: EVENT_COLUMNS, rows: (t) => t.rows.events.map((e) => eventRow(t.scope, e, t.now)) },
        { table: 'usage_entries', columns: USAGE_COLUMNS, onConflict: USAGE_ON_CONFLICT, rows: (t) => t.rows.usage.map((u) => usageRow(t.scope, u, t.now)) },
      ],
    });
  }

  async persist(scope: Scope, o: TurnOutcome, within?: (tx: EntityManager) => Promise<void>): Promise<StoredTurn> {
    const codec = await o.writer();
    if (!o.conversation && !within) {
      const now = this.#clock.now();
      const conversation = newConversation(scope, o, codec, now);
      const rows = turnRows(scope, o, conversation, codec, now);
      await this.#fresh.submit({ scope, conversation, rows, now });
      return { conversation, message: rows.messages[1]! };
    }
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const now = this.#clock.now();
      let c: AgentConversation;
      if (o.conversation) {
        const locked = await tx.findOne(AgentConversation, { id: o.conversation.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        if (!locked || locked.status !== 'active') {
          throw new ServiceError('CONFLICT', 'The conversation ended while the agent was answering', { conversation_id: o.conversation.id, status: locked?.status });
        }
        c = locked;
      } else {
        c = tx.create(AgentConversation, newConversation(scope, o, codec, now));
      }
      const rows = turnRows(scope, o, c, codec, now);
      for (const e of rows.events) emitEvent(tx, scope, e, now);
      const [, message] = rows.messages.map((m) => tx.create(AgentMessage, m));
      await tx.flush();
      const entries = rows.usage.map((u) => usageRow(scope, u, now));
      const params = entries.flatMap((e) => USAGE_COLUMNS.map((col) => e[col]));
      const values = entries.map(() => `(${USAGE_COLUMNS.map(() => '?').join(', ')})`).join(', ');
      await tx.getConnection().execute(`insert into usage_entries (${USAGE_COLUMNS.join(', ')}) values ${values} ${USAGE_ON_CONFLICT}`, params, 'run', tx.getTransactionContext());
      if (within) await within(tx);
      return { conversation: c, message: message! };
    });
  }
}

/** A conversation's row as its first turn creates it (turns 0: `turnRows` counts the turn). */
function newConversation(scope: Scope, o: TurnOutcome, codec: PhiCodec | null, now: Date): AgentConversation {
  const fields = { id: o.conversationId, context: o.req.context ?? {} };
  return {
    ...(codec ? sealConversationContext(fields, codec) : { ...fields, phi: null }), organizationId: scope.organizationId, mode: scope.mode, agentId: o.agent.id, status: 'active',
    channel: o.req.channel, contactAddress: o.req.contactAddress ?? null, turns: 0, handoff: false,
    endedReason: null, lastMessageAt: now, createdAt: now, updatedAt: now, endedAt: null, contentPurgedAt: null,
  };
}

/**
 * The turn counted on conversation `c` (changed in place: turns, last message, handoff, max_turns
 * end) and what it writes: the two messages (user, then the answer), the conversation's events and
 * the usage entries (the invocation and its tokens).
 */
function turnRows(scope: Scope, o: TurnOutcome, c: AgentConversation, codec: PhiCodec | null, now: Date): TurnRows {
  const t = now.getTime();
  const events: EventInput[] = [];
  const emit = (type: AgentEvent, data: Record<string, unknown> = {}) =>
    events.push({ type, resourceType: 'conversation', resourceId: c.id, sequence: c.turns, data: { conversation_id: c.id, agent_id: c.agentId, ...data } });
  if (c.turns === 0) emit('conversation.started', { channel: c.channel });
  c.turns += 1;
  c.lastMessageAt = now;
  c.updatedAt = now;
  const assistantDecisions = [...o.outputDecisions];
  if (o.handoff && !c.handoff) {
    c.handoff = true;
    // HIPAA mode: events carry no content, so the reason is its kind (the matched keyword or the model's words are PHI).
    emit('conversation.handoff', { reason: codec ? (o.handoff.startsWith(ESCALATION_PREFIX) ? 'escalation_keyword' : 'human_handoff') : o.handoff });
  }
  const maxTurns = o.agent.guardrails.max_turns;
  if (maxTurns && c.turns >= maxTurns && !o.partial) {
    Object.assign(c, { status: 'completed', endedReason: 'max_turns', endedAt: now });
    assistantDecisions.push({ guardrail: 'max_turns', action: 'ended', detail: String(maxTurns) });
    emit('conversation.completed', { reason: 'max_turns' });
  }
  const seal = <T extends Pick<AgentMessage, 'id' | 'content' | 'toolCalls'>>(m: T): T & { phi: string | null } => (codec ? sealAgentMessage(m, codec) : { ...m, phi: null });
  const base = { organizationId: scope.organizationId, mode: scope.mode, conversationId: c.id, agentId: o.agent.id, createdAt: now, contentPurgedAt: null };
  const user: AgentMessage = {
    ...base, ...seal({ id: newId('amsg', t - 1), content: o.userText, toolCalls: [] }), role: 'user', guardrails: o.inputDecisions,
    tokensInput: 0, tokensOutput: 0, latencyMs: null, partial: false,
  };
  const answer: AgentMessage = {
    ...base, ...seal({ id: newId('amsg', t), content: o.answer, toolCalls: o.toolCalls }), role: 'assistant', guardrails: assistantDecisions,
    tokensInput: o.tokens.input, tokensOutput: o.tokens.output, latencyMs: o.latencyMs, partial: o.partial,
  };
  const kind = o.req.channel === 'test' ? 'agent.test_invocation' : 'agent.invocation';
  const usage = ([[kind, 1], ['agent.tokens.input', o.tokens.input], ['agent.tokens.output', o.tokens.output]] as const)
    .filter(([, q]) => q > 0)
    .map(([k, quantity]): UsageInput => ({ context: 'agents', kind: k, quantity, resourceId: o.agent.id, idempotencyKey: `${o.usageKey ?? answer.id}:${k}` }));
  return { messages: [user, answer], events, usage };
}
