/**
 * A deployed agent bound to a number answers inbound SMS and WhatsApp messages on that number:
 * - the outbox relay hands every committed `message.received` to `consume`, in the transaction
 *   that marks it dispatched; an inbound message to an active agent's bound number on one of its
 *   deployed channels enqueues one `agents.inbound-reply` job (a job id derived from the message,
 *   so it is enqueued once);
 * - the job runs one turn of the contact's conversation (one active conversation per agent,
 *   channel and contact; a new one when none is active) and sends the answer back from the bound
 *   number through messaging (consent, opt-outs, the WhatsApp session window — the inbound message
 *   just opened it — and live-mode charges apply as for any send). The reply is sent under a key
 *   derived from the inbound message: a retried job never sends twice. A turn that fails (the model
 *   provider) is retried by the job; a reply messaging refuses (an opted-out contact) is logged and
 *   not retried. A crash between the stored turn and the send runs the turn again on retry (its
 *   charge is not doubled: the turn's retry key), which can leave an extra turn in the history.
 */
import { systemScope, type Scope } from '../../platform/auth/scope.ts';
import { isServiceError } from '../../platform/errors.ts';
import type { OutboxEvent, RelayTx } from '../../platform/events/relay.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import { stableJobId } from '../../platform/jobs/jobIds.ts';
import type { Logger } from '../../platform/logger.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import type { MessageSenderPort } from '../messaging/messaging.ports.ts';
import type { ChatService } from './chat.service.ts';
import type { AgentInboundPort } from './agents.ports.ts';

export const INBOUND_REPLY_JOB = 'agents.inbound-reply';
const CHANNELS = new Set(['sms', 'whatsapp']);

export type InboundReplyJob = { messageId: string; agentId: string; channel: 'sms' | 'whatsapp'; from: string; to: string };

type Deps = { orm: MikroORM; log: Logger; jobs: Pick<Jobs, 'insertStatement'>; chat: ChatService; sender: MessageSenderPort; messages: () => AgentInboundPort | undefined };

export class AgentInbound {
  readonly #d: Deps;

  constructor(deps: Deps) {
    this.#d = deps;
  }

  /** Outbox consumer: an inbound message to an active agent's bound number enqueues its reply job (once). */
  async consume(tx: RelayTx, event: OutboxEvent): Promise<void> {
    if (event.type !== 'message.received' || event.data.direction === 'outbound') return;
    const channel = String(event.data.channel);
    const to = String(event.data.to);
    if (!CHANNELS.has(channel)) return;
    const [agent] = await tx.query<{ id: string; plan: Plan }>(
      `select a.id, o.plan from agents a join organizations o on o.id = a.organization_id
        where a.organization_id = $1 and a.mode = $2 and a.status = 'active' and a.bound_number = $3 and a.deployed_channels ? $4
        order by a.deployed_at desc nulls last, a.id limit 1`, [event.organizationId, event.mode, to, channel]);
    if (!agent) return;
    const messageId = String(event.data.message_id);
    const data: InboundReplyJob = { messageId, agentId: agent.id, channel: channel as InboundReplyJob['channel'], from: String(event.data.from), to };
    const statement = await this.#d.jobs.insertStatement(INBOUND_REPLY_JOB, [{
      data, scope: systemScope(event.organizationId, event.mode, agent.plan, event.id), id: stableJobId(INBOUND_REPLY_JOB, messageId),
    }]);
    await tx.query(statement.text, [statement.value]);
  }

  /** The reply job: one turn of the contact's conversation, the answer sent back from the bound number. */
  async reply(scope: Scope, job: InboundReplyJob): Promise<void> {
    const inbound = await this.#d.messages()?.inboundMessage(scope, job.messageId);
    if (!inbound || inbound.body === null || inbound.body.trim() === '') return;
    const [open] = await sqlQuery<{ id: string }>(sqlClient(this.#d.orm),
      `select id from agent_conversations where organization_id = $1 and mode = $2 and agent_id = $3 and channel = $4 and contact_address = $5 and status = 'active'
        order by last_message_at desc limit 1`, [scope.organizationId, scope.mode, job.agentId, job.channel, job.from]);
    let turn;
    try {
      turn = await this.#d.chat.chat(scope, {
        agentId: job.agentId, message: inbound.body, conversationId: open?.id ?? null, channel: job.channel, contactAddress: job.from,
        throwOnBlocked: false, retryKey: `inbound:${job.messageId}`,
      });
    } catch (e) {
      // Paused, deleted or misconfigured since the message arrived: nothing to answer with.
      if (isServiceError(e) && (e.code === 'AGENT_NOT_DEPLOYED' || e.code === 'NOT_FOUND' || e.code === 'CONFLICT')) {
        this.#d.log.info({ agent_id: job.agentId, message_id: job.messageId, code: e.code }, 'inbound message not answered by the agent');
        return;
      }
      throw e;
    }
    if (!turn.content) return;
    const metadata = { agent_id: job.agentId, conversation_id: turn.conversationId, in_reply_to: job.messageId };
    const idempotency = { key: `agent-reply:${job.messageId}`, hash: 'agent-reply', resumed: true };
    try {
      if (job.channel === 'sms') {
        await this.#d.sender.sendSms(scope, { to: job.from, from: job.to, body: turn.content, metadata }, { idempotency });
      } else {
        await this.#d.sender.sendWhatsApp(scope, { to: job.from, from: job.to, kind: 'text', text: { body: turn.content }, metadata }, { idempotency });
      }
    } catch (e) {
      if (!isServiceError(e) || e.status >= 500) throw e;
      this.#d.log.warn({ agent_id: job.agentId, message_id: job.messageId, code: e.code }, 'agent reply refused by messaging');
    }
  }
}
