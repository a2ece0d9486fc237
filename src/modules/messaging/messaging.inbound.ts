/**
 * Inbound messages: stored with direction inbound and status delivered (they open the WhatsApp
 * session window), from providers' callbacks or, in test mode, simulated; the contacts context's
 * keyword handling runs in the same transaction.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { normalizePhone, isEmail } from '../../platform/recipients.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import { Message, MessageSender } from './messaging.entities.ts';
import { emitMessageEvent, type InboundHook, type InboundWebhookLookup } from './messaging.model.ts';
import { sealMessage, type MessagePhi } from './messaging.phi.ts';
import type { SenderDirectory } from './messaging.senders.ts';
import { segmentSms } from './segmentation.ts';

export class MessageInbound {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #senders: SenderDirectory;
  readonly #phi: MessagePhi;
  readonly #inboundWebhook: InboundWebhookLookup | undefined;
  readonly #inboundHook: InboundHook | undefined;

  constructor(deps: { orm: MikroORM; clock: Clock; senders: SenderDirectory; phi: MessagePhi; inboundWebhook?: InboundWebhookLookup; inboundHook?: InboundHook }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#senders = deps.senders;
    this.#phi = deps.phi;
    this.#inboundWebhook = deps.inboundWebhook;
    this.#inboundHook = deps.inboundHook;
  }


  /** Stores an inbound message (direction inbound, status delivered); it opens the WhatsApp session window. */
  async receiveInbound(tenant: TenantRef, input: { channel: Channel; from: string; to: string; body: string | null; provider?: string; providerMessageId?: string; content?: Record<string, unknown> }): Promise<Message> {
    const now = this.#clock.now();
    const em = tenantEm(this.#orm, tenant);
    const [webhookUrl, writer] = await Promise.all([
      this.#inboundWebhook?.(tenant, input.channel, input.to) ?? null,
      this.#phi.writer(tenant.organizationId),
    ]);
    return em.transactional(async (tx) => {
      const message: Message = {
        id: newId('msg', now.getTime()), organizationId: tenant.organizationId, mode: tenant.mode, channel: input.channel,
        direction: 'inbound', to: input.to, recipients: [input.to], from: input.from, body: input.body, content: input.content ?? {},
        status: 'delivered', statusHistory: [{ status: 'delivered', at: now.toISOString() }], encoding: null, segments: null,
        errorCode: null, errorMessage: null, provider: input.provider ?? null, providerMessageId: input.providerMessageId ?? null,
        templateId: null, variables: null, fallback: null, originalMessageId: null, metadata: {}, webhookUrl, sequence: 1, sealedContent: null, idempotencyKey: null, idempotencyHash: null, chainDepth: null,
        createdAt: now, updatedAt: now, sentAt: null, deliveredAt: now, readAt: null, failedAt: null, phi: null, contentPurgedAt: null,
      };
      if (message.channel === 'sms') Object.assign(message, segmentSms(message.body ?? ''));
      tx.create(Message, writer ? sealMessage(message, writer) : message);
      emitMessageEvent(tx, message, 'message.received', now);
      await this.#inboundHook?.(tx, tenant, message);
      return message;
    });
  }

  /** Test mode: simulates a recipient writing to the organization (to its sandbox or own sender). */
  async simulateInbound(scope: Scope, input: { channel: Channel; from: string; to?: string | null; body: string }): Promise<Message> {
    if (scope.mode !== 'test') throw new ServiceError('FORBIDDEN', 'Simulated inbound messages are available to test-mode credentials only');
    const from = input.channel === 'email' ? input.from.toLowerCase() : normalizePhone(input.from);
    if (!from || (input.channel === 'email' && !isEmail(from))) {
      throw new ServiceError(input.channel === 'email' ? 'INVALID_EMAIL' : 'INVALID_PHONE_NUMBER', `${input.from} is not a valid sender address`, { field: 'from' });
    }
    const to = await this.#senders.resolve(tenantEm(this.#orm, scope), scope, input.channel, input.to ?? null);
    return this.receiveInbound(scope, { channel: input.channel, from, to, body: input.body, provider: 'sandbox' });
  }

  /** A provider callback's inbound message: the tenant is the owner of the receiving sender address. */
  async receiveProviderInbound(provider: string, input: { channel: Channel; from: string; to: string; body: string | null; providerMessageId?: string }): Promise<Message | undefined> {
    const sender = await this.#orm.em.fork().findOne(MessageSender, { channel: input.channel, address: input.to }, ALL_TENANTS);
    if (!sender) return undefined;
    return this.receiveInbound({ organizationId: sender.organizationId, mode: sender.mode }, { ...input, provider });
  }
}
