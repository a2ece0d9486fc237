/** Conversations of an agent: lists, messages, ending one, and the sweep that marks idle ones abandoned. */
import type { MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../platform/clock.ts';
import { notFound } from '../../platform/errors.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { Agent, AgentConversation, AgentMessage } from './agents.entities.ts';
import type { ListConversationsInput, ListMessagesInput } from './agents.schemas.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { openConversation, type AgentsPhi } from './agents.phi.ts';

export const ABANDON_SWEEP_JOB = 'agents.abandon-sweep';
const SWEEP_BATCH = 500;

export class ConversationsService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #idleSeconds: number;
  readonly #phi: AgentsPhi;

  constructor(deps: { orm: MikroORM; clock: Clock; cursors: CursorCodec; idleSeconds: number; phi: AgentsPhi }) {
    this.#phi = deps.phi;
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#idleSeconds = deps.idleSeconds;
  }

  /** HIPAA mode: contexts opened (and the read logged) or redacted, by the caller's PHI access. */
  async list(scope: Scope, input: ListConversationsInput): Promise<Page<AgentConversation>> {
    const em = tenantEm(this.#orm, scope);
    if (!(await em.count(Agent, { id: input.id }))) throw notFound('Agent', input.id);
    const where = { agentId: input.id, ...(input.status ? { status: input.status } : {}) };
    const page = await this.#cursors.findPage(em, AgentConversation, scope, { list: 'agent_conversations', filters: { agent: input.id, status: input.status ?? null } }, input, where);
    return { ...page, items: await this.#phi.conversations(scope, page.items, 'agents.conversations') };
  }

  /** HIPAA mode: content and tool calls opened (and the read logged) or redacted, by the caller's PHI access. */
  async messages(scope: Scope, input: ListMessagesInput): Promise<Page<AgentMessage>> {
    const em = tenantEm(this.#orm, scope);
    // The agent must exist in the tenant; an id that is no conversation of it lists nothing.
    if (!(await em.count(Agent, { id: input.id }))) throw notFound('Agent', input.id);
    const page = await this.#cursors.findPage(em, AgentMessage, scope, { list: 'agent_messages', filters: { conversation: input.conversation_id } }, input, { conversationId: input.conversation_id, agentId: input.id });
    return { ...page, items: await this.#phi.messages(scope, page.items, 'agents.conversationMessages') };
  }

  async end(tenant: TenantRef, id: string, reason: string): Promise<void> {
    if (!(await this.#close(tenant, id, reason))) throw notFound('Conversation', id);
  }

  /** Ends the conversation if it is still active; false when there is no such conversation. */
  async #close(tenant: TenantRef, id: string, reason: string): Promise<boolean> {
    return tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const c = await tx.findOne(AgentConversation, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!c) return false;
      if (c.status !== 'active') return true;
      const now = this.#clock.now();
      Object.assign(c, { status: 'completed', endedReason: reason, endedAt: now, updatedAt: now });
      emitEvent(tx, tenant, { type: 'conversation.completed', resourceType: 'conversation', resourceId: c.id, sequence: c.turns + 1, data: { conversation_id: c.id, agent_id: c.agentId, reason } }, now);
      return true;
    });
  }

  /**
   * Ends the agent's active voice conversations on a call (their context's `call_id`; a context
   * sealed in HIPAA mode is opened for the match, nothing is disclosed to anyone): status
   * `completed` with `reason`. Returns how many it ended. The call's agent has few of these at once.
   */
  async endCall(tenant: TenantRef, agentId: string, callId: string, reason: string): Promise<number> {
    const active = await tenantEm(this.#orm, tenant).find(AgentConversation, { agentId, channel: 'voice', status: 'active' });
    const codec = await this.#phi.opener(tenant.organizationId, active.map((c) => c.phi));
    const onCall = active.filter((c) => (c.phi && codec ? openConversation(c, codec) : c).context.call_id === callId);
    // One deleted meanwhile (its agent was) has nothing left to end.
    let ended = 0;
    for (const c of onCall) if (await this.#close(tenant, c.id, reason)) ended++;
    return ended;
  }

  /** Marks conversations idle longer than the timeout abandoned (a batch); returns how many. */
  async abandonIdle(): Promise<number> {
    const em = this.#orm.em.fork({ clear: true });
    return em.transactional(async (tx) => {
      const now = this.#clock.now();
      const before = new Date(now.getTime() - this.#idleSeconds * 1000);
      const idle = await tx.find(AgentConversation, { status: 'active', lastMessageAt: { $lt: before } }, {
        ...ALL_TENANTS, limit: SWEEP_BATCH, lockMode: LockMode.PESSIMISTIC_PARTIAL_WRITE,
      });
      for (const c of idle) {
        Object.assign(c, { status: 'abandoned', endedReason: 'idle', endedAt: now, updatedAt: now });
        emitEvent(tx, c, { type: 'conversation.abandoned', resourceType: 'conversation', resourceId: c.id, sequence: c.turns + 1, data: { conversation_id: c.id, agent_id: c.agentId, idle_seconds: this.#idleSeconds } }, now);
      }
      return idle.length;
    });
  }
}
