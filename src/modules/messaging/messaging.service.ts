/**
 * Messaging context: accepts outbound messages on five channels and reads them back. Every
 * accepted message commits with its row of the delivery queue (messaging.queue.ts), its usage
 * entry and its `message.queued` event in one transaction. Delivery and status reports live in messaging.delivery.ts, inbound messages
 * in messaging.inbound.ts, senders in messaging.senders.ts, templates in templates.service.ts.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { raw } from '@mikro-orm/core';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { listConfigured } from '../../platform/configured.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { recordUsage } from '../../platform/usage/usage.ts';
import type { Sealer } from '../../platform/crypto/seal.ts';
import type { Transaction } from 'kysely';
import type { Pool } from 'pg';
import { IDEMPOTENCY_TTL_MS, type RecordedKey } from '../../platform/idempotency.ts';
import { AcceptanceWriter, SendBatch } from './messaging.batching.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import { Message, MessageTemplate } from './messaging.entities.ts';
import { segmentSms, SMS_MAX_CHARACTERS } from './segmentation.ts';
import { renderTemplate, renderWhatsAppTemplate } from './templating.ts';
import type { SendEmailInput } from './schemas/email.ts';
import type { SendRcsInput } from './schemas/rcs.ts';
import type { SendSmsInput } from './schemas/sms.ts';
import type { SendViberInput } from './schemas/viber.ts';
import type { SendWhatsAppInput } from './schemas/whatsapp.ts';
import type { ListMessagesInput } from './schemas/messages.ts';
import { normalizePhone } from '../../platform/recipients.ts';
import { openMessage, sealMessage, type MessagePhi } from './messaging.phi.ts';
import { emitMessageEvent, messageEvent, WHATSAPP_SESSION_MS, type ConsentPort, type ProvidersPort, type SendOptions } from './messaging.model.ts';
import type { SenderDirectory } from './messaging.senders.ts';
import type { MessageBilling, PricedMessage } from './messaging.billing.ts';
import type { DeliveryQueue } from './messaging.queue.ts';

export {
  DELIVER_JOB, STATUS_REPORT_JOB, SANDBOX_SENDERS, WHATSAPP_SESSION_MS,
  type ConsentPort, type InboundHook, type InboundWebhookLookup, type ProvidersPort, type SendOptions,
} from './messaging.model.ts';
export { ReportTooEarly } from './messaging.delivery.ts';

/** What every channel's request becomes before acceptance. */
type Draft = {
  channel: Channel;
  recipients: string[];
  from?: string | null;
  body: string | null;
  content: Record<string, unknown>;
  templateId?: string | null;
  variables?: Record<string, unknown> | null;
  metadata?: Record<string, unknown> | null;
  webhookUrl?: string | null;
  originalMessageId?: string | null;
  conceal?: readonly string[];
  within?: EntityManager;
  batch?: SendBatch;
  bypassConsent?: boolean;
  idempotency?: RecordedKey;
  /** A retry carries the original's sealed payload along. */
  sealedContent?: string | null;
};

/** What messaging asks the numbers context (port `ownedNumbers`): a number's capabilities, null when the tenant does not hold it. */
export type NumberCapabilities = { capabilitiesOf(tenant: TenantRef, number: string): Promise<readonly string[] | null> };

export class MessagingService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #queue: Pick<DeliveryQueue, 'enqueueWithin' | 'handOffLease' | 'handOff'>;
  readonly #writer: AcceptanceWriter;
  readonly #senders: SenderDirectory;
  readonly #providers: ProvidersPort;
  readonly #consent: ConsentPort | undefined;
  readonly #sealer: Sealer;
  readonly #phi: MessagePhi;
  readonly #billing: MessageBilling;
  readonly #numbers: () => NumberCapabilities | undefined;

  constructor(deps: {
    orm: MikroORM; pool: Pool; clock: Clock; cursors: CursorCodec; queue: Pick<DeliveryQueue, 'enqueueWithin' | 'handOffLease' | 'handOff'>; providers: ProvidersPort; consent?: ConsentPort;
    senders: SenderDirectory; phi: MessagePhi; sealer: Sealer; billing: MessageBilling; numbers?: () => NumberCapabilities | undefined;
  }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#queue = deps.queue;
    this.#writer = new AcceptanceWriter({ orm: deps.orm, pool: deps.pool, reservations: () => deps.billing.reservations(), deliveries: deps.queue });
    this.#senders = deps.senders;
    this.#providers = deps.providers;
    this.#consent = deps.consent;
    this.#sealer = deps.sealer;
    this.#phi = deps.phi;
    this.#billing = deps.billing;
    this.#numbers = deps.numbers ?? (() => undefined);
  }

  // ---- sending ----

  async sendSms(scope: Scope, input: SendSmsInput, options: SendOptions = {}): Promise<Message> {
    return this.#accept(scope, {
      channel: 'sms', recipients: [input.to], from: input.from, body: input.body ?? null, content: input.media_urls ? { media_urls: input.media_urls } : {},
      templateId: input.template_id, variables: input.variables, metadata: input.metadata, webhookUrl: input.webhook_url, ...options,
    });
  }

  async sendWhatsApp(scope: Scope, input: SendWhatsAppInput, options: SendOptions = {}): Promise<Message> {
    const content: Record<string, unknown> = { type: input.kind };
    let body: string | null = null;
    if (input.kind === 'text') body = input.text!.body;
    if (input.kind === 'media') {
      content.media = input.media;
      body = input.media?.caption ?? null;
    }
    if (input.kind === 'template') content.template = input.template;
    return this.#accept(scope, { channel: 'whatsapp', recipients: [input.to], from: input.from, body, content, metadata: input.metadata, webhookUrl: input.webhook_url, ...options });
  }

  async sendEmail(scope: Scope, input: SendEmailInput, options: SendOptions = {}): Promise<Message> {
    const content: Record<string, unknown> = { subject: input.subject };
    if (input.html !== undefined) content.html = input.html;
    if (input.text !== undefined) content.text = input.text;
    if (input.reply_to !== undefined) content.reply_to = input.reply_to;
    return this.#accept(scope, {
      channel: 'email', recipients: input.to, from: input.from, body: input.text ?? null, content,
      metadata: input.metadata, webhookUrl: input.webhook_url, ...options,
    });
  }

  async sendRcs(scope: Scope, input: SendRcsInput, options: SendOptions = {}): Promise<Message> {
    const content: Record<string, unknown> = { type: input.type };
    if (input.suggestions) content.suggestions = input.suggestions;
    if (input.card) content.card = input.card;
    if (input.cards) content.cards = input.cards;
    if (input.fallback) content.fallback = input.fallback;
    return this.#accept(scope, {
      channel: 'rcs', recipients: [input.to], from: input.from, body: input.body ?? null, content,
      templateId: input.template_id, variables: input.variables, metadata: input.metadata, webhookUrl: input.webhook_url, ...options,
    });
  }

  async sendViber(scope: Scope, input: SendViberInput, options: SendOptions = {}): Promise<Message> {
    const content: Record<string, unknown> = {};
    if (input.media_url) content.media_url = input.media_url;
    if (input.button) content.button = input.button;
    return this.#accept(scope, {
      channel: 'viber', recipients: [input.to], from: input.from, body: input.body ?? null, content,
      templateId: input.template_id, variables: input.variables, metadata: input.metadata, webhookUrl: input.webhook_url, ...options,
    });
  }

  /** A failed message is sent again as a new message with the same parameters. */
  async retryMessage(scope: Scope, id: string, options: Pick<SendOptions, 'idempotency'> = {}): Promise<Message> {
    // A retry of this request after its first attempt committed finds the new message, not a failed original.
    if (options.idempotency?.resumed) {
      const earlier = await this.#acceptedUnder(scope, options.idempotency);
      if (earlier) return (await this.#phi.reveal(scope, [earlier], 'messaging.retryMessage'))[0]!;
    }
    const stored = await tenantEm(this.#orm, scope).findOne(Message, { id });
    if (!stored || stored.direction !== 'outbound') throw notFound('Message', id);
    const original = stored.phi ? openMessage(stored, await this.#phi.codec(scope.organizationId, [stored.phi])) : stored;
    if (original.status !== 'failed') {
      throw new ServiceError('CONFLICT', `Only failed messages can be retried; this one is ${original.status}`, { status: original.status });
    }
    // A WhatsApp template is found again by its name in `content.template` (and must still be approved).
    const templateId = original.channel === 'whatsapp' ? null : original.templateId;
    const retried = await this.#accept(scope, {
      channel: original.channel, recipients: original.recipients, from: original.from, body: templateId ? null : (original.body ?? null),
      content: original.content, templateId, variables: original.variables, metadata: original.metadata,
      webhookUrl: original.webhookUrl, originalMessageId: original.id, sealedContent: original.sealedContent, ...options,
    });
    // The new message shows the original's content: PHI, so it is disclosed (or redacted) as a read is.
    return (await this.#phi.reveal(scope, [retried], 'messaging.retryMessage'))[0]!;
  }

  /** A batch of sends made inside one transaction, written together (SendOptions.batch). */
  sendBatch(): SendBatch {
    return new SendBatch(this.#writer);
  }

  async #accept(scope: Scope, draft: Draft): Promise<Message> {
    const recorded = draft.idempotency;
    // Taken over from an attempt that did not finish: its message may have committed.
    if (recorded?.resumed) {
      const earlier = await this.#acceptedUnder(scope, recorded, draft.within);
      if (earlier) return earlier;
    }
    const now = this.#clock.now();
    await this.#providers.ready(scope);
    if (!this.#providers.forTenant(scope, draft.channel)) {
      throw new ServiceError('CHANNEL_UNAVAILABLE', `The ${draft.channel} channel has no provider configured in ${scope.mode} mode`, { channel: draft.channel });
    }
    // The consent checks and the sender lookup run at once (each joins its own batched statement);
    // the outcome is the same as one after the other: the first refused recipient, in order, is
    // reported before a sender problem.
    const consent = this.#consent && !draft.bypassConsent ? draft.recipients.map((recipient) => this.#consent!.assertCanMessage(scope, draft.channel, recipient)) : [];
    // HIPAA mode: the organization's codec seals the stored row (cached lookup; null outside HIPAA mode).
    const phiWriter = this.#phi.writer(scope.organizationId);
    phiWriter.catch(() => {});
    const resolveSender = () => this.#senders.resolve(draft.within, scope, draft.channel, draft.from ?? null);
    const sender = draft.batch ? draft.batch.sender(`${draft.channel}\n${draft.from ?? ''}`, resolveSender) : resolveSender();
    const settled = await Promise.allSettled([...consent, sender, this.#billing.checkQuota(scope, draft.channel, draft.recipients.length)]);
    const refused = settled.find((r) => r.status === 'rejected');
    if (refused) throw refused.reason;
    const from = (settled[settled.length - 2] as PromiseFulfilledResult<string>).value;
    const media = Array.isArray(draft.content.media_urls) && draft.content.media_urls.length > 0;
    if (media && draft.channel === 'sms') await this.#assertSendsMms(scope, from);
    // Live messages through carriers: a route must match the destination and the sender, now rather than at delivery.
    const unrouted = draft.recipients.find((to) => !this.#providers.routable(scope, draft.channel, to, from, { media }));
    if (unrouted !== undefined) {
      const routes = this.#providers.routes(scope, draft.channel);
      throw new ServiceError('CHANNEL_UNAVAILABLE', `No ${draft.channel} route carries ${media ? 'MMS' : 'messages'} from ${from} to ${unrouted}; the ${draft.channel} routes: ${listConfigured(routes)}`, { channel: draft.channel, from, to: unrouted, routes, ...(media ? { mms: true } : {}) });
    }
    // An EntityManager only for the reads that need one (templates, the WhatsApp session).
    const em = () => draft.within ?? tenantEm(this.#orm, scope);
    let body = draft.body;
    if (draft.templateId) body = await this.#renderStoredTemplate(em(), draft.channel, draft.templateId, draft.variables ?? {});
    if (draft.channel === 'whatsapp') body = await this.#checkWhatsApp(em(), draft, body, now);
    let encoding: string | null = null;
    let segments: number | null = null;
    if (draft.channel === 'sms') {
      if ([...(body ?? '')].length > SMS_MAX_CHARACTERS) {
        throw new ServiceError('MESSAGE_TOO_LONG', `SMS body is longer than ${SMS_MAX_CHARACTERS} characters after rendering`, { field: 'body', max: SMS_MAX_CHARACTERS });
      }
      ({ encoding, segments } = segmentSms(body ?? ''));
    }
    let content = draft.content;
    let sealedContent = draft.sealedContent ?? null;
    const secrets = (draft.conceal ?? []).filter((secret) => secret.length > 0);
    if (secrets.length > 0) {
      // Segments were counted on the clear body; the mask keeps its length and GSM-7 encoding.
      sealedContent = this.#sealer.seal(JSON.stringify({ body, content }));
      body = body === null ? null : maskSecrets(body, secrets);
      content = maskSecrets(content, secrets);
    }
    const fields: Message = {
      id: newId('msg', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, channel: draft.channel,
      direction: 'outbound', to: draft.recipients[0]!, recipients: draft.recipients, from, body, content, sealedContent,
      status: 'queued', statusHistory: [{ status: 'queued', at: now.toISOString() }], encoding, segments,
      errorCode: null, errorMessage: null, provider: null, providerMessageId: null, templateId: draft.templateId ?? null,
      variables: draft.variables ?? null, fallback: null, originalMessageId: draft.originalMessageId ?? null,
      metadata: draft.metadata ?? {}, webhookUrl: draft.webhookUrl ?? null, idempotencyKey: recorded?.key ?? null,
      idempotencyHash: recorded?.hash ?? null, chainDepth: scope.chainDepth ?? null, sequence: 1, createdAt: now, updatedAt: now,
      sentAt: null, deliveredAt: null, readAt: null, failedAt: null, phi: null, contentPurgedAt: null,
    };
    const writer = await phiWriter;
    const stored = writer ? sealMessage(fields, writer) : fields;
    const usage = usageOf(fields);
    const charge = this.#billing.chargeOf(scope, fields, usage);
    if (!draft.within) {
      // The common case: group-committed with concurrent sends (messaging.batching.ts).
      const acceptance = { scope, message: stored, event: messageEvent(fields, 'message.queued'), usage, ...(charge ? { charge } : {}) };
      try {
        await this.#writer.accept(acceptance);
      } catch (e) {
        // Another attempt of the same send committed first (a batch with the conflict is rerun item
        // by item, so only this send fails): answer with its message. An expired one is released, once.
        if (!recorded || !isIdempotencyConflict(e)) throw e;
        const earlier = await this.#acceptedUnder(scope, recorded);
        if (earlier) return earlier;
        await this.#writer.accept(acceptance);
      }
      return fields;
    }
    if (draft.batch && !charge) {
      // Gathered: written with the rest of the caller's batch, in its transaction (SendBatch.commit).
      draft.batch.add({ scope, message: stored, event: messageEvent(fields, 'message.queued'), usage });
      return fields;
    }
    return draft.within.transactional(async (tx) => {
      const message = tx.create(Message, stored);
      emitMessageEvent(tx, message, 'message.queued', now);
      await tx.flush();
      await this.#billing.reserveWithin(scope, charge, tx);
      await recordUsage(tx, scope, usage, now);
      await this.#queue.enqueueWithin(tx.getTransactionContext<Transaction<unknown>>()!, scope, fields.id);
      return fields;
    });
  }

  /**
   * The message an earlier attempt of this send accepted under the same Idempotency-Key, if any.
   * The same key with a different request is CONFLICT (as the idempotency store answers while it
   * holds the key). A message older than the key's lifetime (24 h) no longer holds it: its key is
   * cleared and null returned, so the key can be used again.
   */
  async #acceptedUnder(scope: Scope, recorded: RecordedKey, within?: EntityManager): Promise<Message | null> {
    const em = within ?? tenantEm(this.#orm, scope);
    const earlier = await em.findOne(Message, { idempotencyKey: recorded.key });
    if (!earlier) return null;
    if (this.#clock.now().getTime() - earlier.createdAt.getTime() > IDEMPOTENCY_TTL_MS) {
      await em.nativeUpdate(Message, { id: earlier.id, idempotencyKey: recorded.key }, { idempotencyKey: null, idempotencyHash: null });
      return null;
    }
    if (earlier.idempotencyHash !== recorded.hash) {
      throw new ServiceError('CONFLICT', 'This Idempotency-Key was already used with a different request', { idempotency_key: recorded.key.slice(recorded.key.indexOf(':') + 1) });
    }
    // The caller sent this content: it gets it back as its first answer showed it (HIPAA mode: opened).
    return earlier.phi ? openMessage(earlier, await this.#phi.codec(scope.organizationId, [earlier.phi])) : earlier;
  }

  async #renderStoredTemplate(em: EntityManager, channel: Channel, templateId: string, variables: Record<string, unknown>): Promise<string> {
    const template = await em.findOne(MessageTemplate, { id: templateId });
    if (!template) throw new ServiceError('NOT_FOUND', 'Template not found', { field: 'template_id', id: templateId });
    if (template.channel !== channel) {
      throw new ServiceError('INVALID_TEMPLATE', `Template ${templateId} is for ${template.channel}, not ${channel}`, { field: 'template_id' });
    }
    if (template.status === 'rejected') throw new ServiceError('TEMPLATE_NOT_APPROVED', 'Template was rejected', { field: 'template_id', status: template.status });
    return renderTemplate(template.content, variables);
  }

  /**
   * MMS only from a number that can send it: a sender that is one of the organization's numbers
   * (numbers context) must have the `mms` capability, else SENDER_NOT_CONFIGURED (422) and nothing
   * is stored. A sender registered by hand (a number held at a carrier) is not in the inventory:
   * its capability is the carrier's to know, and a refusal comes back in the message's error_code.
   */
  async #assertSendsMms(scope: Scope, from: string): Promise<void> {
    const capabilities = await this.#numbers()?.capabilitiesOf(scope, from);
    if (!capabilities || capabilities.includes('mms')) return;
    throw new ServiceError('SENDER_NOT_CONFIGURED', `${from} cannot send MMS (its capabilities: ${capabilities.join(', ')}); send from a number with mms, or without media_urls`, {
      field: 'from', from, capability: 'mms', capabilities,
    });
  }

  /**
   * WhatsApp: templates must be approved; free-form (text, media) only inside the 24-hour window
   * after the recipient's last inbound message. Returns the rendered body.
   */
  async #checkWhatsApp(em: EntityManager, draft: Draft, body: string | null, now: Date): Promise<string | null> {
    const type = draft.content.type;
    if (type === 'template') {
      const t = draft.content.template as { name: string; language: string; components?: { type: string; parameters?: { type: string; text?: string }[] }[] };
      const templates = await em.find(MessageTemplate, { channel: 'whatsapp', name: t.name });
      const template = templates.find((x) => x.language === t.language) ?? templates[0];
      if (!template) throw new ServiceError('NOT_FOUND', `WhatsApp template ${t.name} not found`, { field: 'template.name' });
      if (template.status !== 'approved') {
        throw new ServiceError('TEMPLATE_NOT_APPROVED', `WhatsApp template ${t.name} is ${template.status}`, { field: 'template.name', status: template.status });
      }
      draft.templateId = template.id;
      return renderWhatsAppTemplate(template.content, t.components);
    }
    const since = new Date(now.getTime() - WHATSAPP_SESSION_MS);
    const inbound = await em.findOne(Message, {
      direction: 'inbound', channel: 'whatsapp', from: draft.recipients[0]!, createdAt: { $gte: since },
    }, { orderBy: { createdAt: 'desc' } });
    if (!inbound) {
      throw new ServiceError('TEMPLATE_NOT_APPROVED',
        'Business-initiated WhatsApp messages need an approved template; free-form messages are allowed within 24 hours of the recipient\'s last message',
        { field: 'template', session_open: false });
    }
    return body;
  }

  // ---- reading ----

  async getMessage(scope: Scope, id: string): Promise<PricedMessage> {
    const m = await tenantEm(this.#orm, scope).findOne(Message, { id });
    if (!m) throw notFound('Message', id);
    return (await this.#priced(scope, await this.#phi.reveal(scope, [m], 'messaging.getMessage')))[0]!;
  }

  /** The messages with what the ledger charged for each (`charge`, null until charged). */
  async #priced(scope: Scope, messages: Message[]): Promise<PricedMessage[]> {
    const charges = await this.#billing.chargesOf(scope, messages.map((m) => m.id));
    return messages.map((m) => Object.assign(m, { charge: charges.get(m.id) ?? null }));
  }

  /** The flows port's read: the message opened, and whether it is PHI (stored sealed). */
  async inboundForFlows(tenant: TenantRef, id: string): Promise<{ direction: Message['direction']; body: string | null; sealed: boolean }> {
    const m = await tenantEm(this.#orm, tenant).findOne(Message, { id });
    if (!m) throw notFound('Message', id);
    const opened = m.phi ? openMessage(m, await this.#phi.codec(tenant.organizationId, [m.phi])) : m;
    return { direction: m.direction, body: opened.body ?? null, sealed: m.phi !== null };
  }

  async listMessages(scope: Scope, input: ListMessagesInput): Promise<Page<PricedMessage>> {
    const filters = { channel: input.channel ?? null, status: input.status ?? null, to: input.to ?? null, direction: input.direction ?? null };
    const key = { list: 'messages', filters };
    const where: Record<string, unknown> = {};
    if (input.channel) where.channel = input.channel;
    if (input.status) where.status = input.status;
    if (input.direction) where.direction = input.direction;
    if (input.to) {
      const to = input.to.includes('@') ? input.to.toLowerCase() : (normalizePhone(input.to) ?? input.to);
      // A further recipient is only in a message with several (the GIN index covers only those).
      where.$or = [{ to }, { recipients: { $contains: [to] }, [raw((alias) => `jsonb_array_length(${alias}.recipients)`)]: { $gt: 1 } }];
    }
    const page = await this.#cursors.findPage(tenantEm(this.#orm, scope), Message, scope, key, input, where);
    return { ...page, items: await this.#priced(scope, await this.#phi.reveal(scope, page.items, 'messaging.listMessages')) };
  }
}


/** `value` with every occurrence of each secret, in every string inside it, replaced by as many `*`. */
function maskSecrets<T>(value: T, secrets: readonly string[]): T {
  if (typeof value === 'string') return secrets.reduce((text, secret) => text.split(secret).join('*'.repeat(secret.length)), value as string) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => maskSecrets(v, secrets)) as T;
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskSecrets(v, secrets)])) as T;
  }
  return value;
}


function usageOf(m: Message): { context: string; kind: string; quantity: number; resourceId: string; idempotencyKey: string } {
  const quantity = m.channel === 'sms' ? (m.segments ?? 1) : m.channel === 'email' ? m.recipients.length : 1;
  const kind = m.channel === 'sms' ? 'sms.segment' : m.channel === 'email' ? 'email.recipient' : `${m.channel}.message`;
  return { context: 'messaging', kind, quantity, resourceId: m.id, idempotencyKey: `${m.id}:accepted` };
}

/** The unique violation of `messages_idempotency_idx`: a message with this send's Idempotency-Key exists. */
function isIdempotencyConflict(e: unknown): boolean {
  return (e as { code?: string }).code === '23505' && (e as { constraint?: string }).constraint === 'messages_idempotency_idx';
}
