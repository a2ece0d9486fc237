/**
 * Messaging context: accepts outbound messages on five channels, delivers them through the
 * channel's provider on a durable job, applies provider status reports, stores inbound messages,
 * and manages senders. Templates live in templates.service.ts. Every accepted message commits
 * with its delivery job, its usage entry and its `message.queued` event in one transaction.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm, type Mode, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { validateLimit, type CursorCodec, type Page } from '../../platform/pagination.ts';
import { recordUsage } from '../../platform/usage/usage.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import { emitEvent, type EventInput, type EventType } from '../../platform/events/events.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Pool } from 'pg';
import { IDEMPOTENCY_TTL_MS, type RecordedKey } from '../../platform/idempotency.ts';
import { AcceptanceWriter, MessageReader, SenderLookup, TransitionWriter } from './messaging.batching.ts';
import { ProviderError, type Channel, type MessagingProvider, type OutboundMessage, type ReportedStatus } from '../../providers/messaging/types.ts';
import { Message, MessageSender, MessageTemplate, type MessageStatus } from './messaging.entities.ts';
import { segmentSms, SMS_MAX_CHARACTERS } from './segmentation.ts';
import { renderTemplate, renderWhatsAppTemplate } from './templating.ts';
import type { SendEmailInput, SendRcsInput, SendSmsInput, SendViberInput, SendWhatsAppInput, ListMessagesInput } from './messaging.schemas.ts';
import { normalizePhone, isEmail } from '../../platform/recipients.ts';
import type { PhiCodec, PhiPort } from '../../platform/phi.ts';
import { MESSAGE_PHI_FIELDS, openMessage, redactMessage, sealMessage } from './messaging.phi.ts';

export const DELIVER_JOB = 'messaging.deliver';
export const STATUS_REPORT_JOB = 'messaging.status-report';

/** Addresses test-mode keys always send from. */
export const SANDBOX_SENDERS: Record<Channel, string> = {
  sms: '+15005550006',
  whatsapp: '+15005550006',
  email: 'sandbox@sandbox.test',
  rcs: 'sandbox_rcs_agent',
  viber: 'SandboxViber',
};

/** A free-form WhatsApp message is allowed this long after the recipient's last inbound message. */
export const WHATSAPP_SESSION_MS = 24 * 3600 * 1000;


export type ProvidersPort = { forMode(mode: Mode, channel: Channel): MessagingProvider | undefined };

/**
 * Where an inbound message to one of the organization's addresses is called back (the numbers
 * context answers with the receiving number's sms_webhook_url). Its `message.received` event then
 * carries `webhook_url` and the webhook fan-out delivers it there, signed like any per-resource callback.
 */
export type InboundWebhookLookup = (tenant: TenantRef, channel: Channel, to: string) => Promise<string | null>;

/**
 * The contacts context's consent check: throws RECIPIENT_OPTED_OUT when the recipient opted out of
 * the channel. Called for every recipient before a message is accepted (nothing is stored on refusal).
 */
export type ConsentPort = { assertCanMessage(tenant: TenantRef, channel: Channel, recipient: string): Promise<void> };

/**
 * Runs inside the transaction that stores an inbound message (the contacts context answers SMS
 * keywords: STOP opts the sender out and confirms, START opts back in, HELP replies).
 */
export type InboundHook = (tx: EntityManager, tenant: TenantRef, message: Message) => Promise<void>;

/** How a send is stored (the provider always gets the message as written). */
export type SendOptions = {
  /**
   * Secrets inside the message (one-time codes): the stored body and content show each one masked
   * with `*`, so no read, list or event reveals them; the clear payload is kept sealed until delivery.
   */
  conceal?: readonly string[];
  /**
   * An EntityManager of the same tenant inside the caller's transaction: the message, its usage,
   * event and delivery job commit or roll back with the caller's change (verify's send).
   */
  within?: EntityManager;
  /** Skips the consent check: only for the keyword confirmations (the last message an opted-out recipient gets). */
  bypassConsent?: boolean;
  /**
   * The request's Idempotency-Key (RequestContext.idempotency.next()): recorded on the message, so
   * a request that runs again after its first attempt committed returns that message instead of
   * sending a second one (the first attempt's process may have died before the response was stored).
   */
  idempotency?: RecordedKey;
};

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
  bypassConsent?: boolean;
  idempotency?: RecordedKey;
  /** A retry carries the original's sealed payload along. */
  sealedContent?: string | null;
};

export class MessagingService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>;
  readonly #writer: AcceptanceWriter;
  readonly #transitions: TransitionWriter;
  readonly #reader: MessageReader;
  readonly #senders: SenderLookup;
  readonly #providers: ProvidersPort;
  readonly #inboundWebhook: InboundWebhookLookup | undefined;
  readonly #consent: ConsentPort | undefined;
  readonly #inboundHook: InboundHook | undefined;
  readonly #sealer: Sealer;
  readonly #phi: () => PhiPort | undefined;

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock; config: Config; cursors: CursorCodec; jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>; providers: ProvidersPort; inboundWebhook?: InboundWebhookLookup; consent?: ConsentPort; inboundHook?: InboundHook; phi?: () => PhiPort | undefined }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#cursors = deps.cursors;
    this.#jobs = deps.jobs;
    this.#transitions = new TransitionWriter(deps.pool);
    this.#reader = new MessageReader({ orm: deps.orm, pool: deps.pool });
    this.#writer = new AcceptanceWriter({ orm: deps.orm, pool: deps.pool, jobs: deps.jobs, jobName: DELIVER_JOB });
    this.#senders = new SenderLookup(deps.pool);
    this.#providers = deps.providers;
    this.#inboundWebhook = deps.inboundWebhook;
    this.#consent = deps.consent;
    this.#inboundHook = deps.inboundHook;
    this.#sealer = new Sealer(deps.config.appSecret, 'messaging:concealed-content');
    this.#phi = deps.phi ?? (() => undefined);
  }

  // ---- sending ----

  async sendSms(scope: Scope, input: SendSmsInput, options: SendOptions = {}): Promise<Message> {
    return this.#accept(scope, {
      channel: 'sms', recipients: [input.to], from: input.from, body: input.body ?? null, content: {},
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
      if (earlier) return (await this.#reveal(scope, [earlier], 'messaging.retryMessage'))[0]!;
    }
    const stored = await tenantEm(this.#orm, scope).findOne(Message, { id });
    if (!stored || stored.direction !== 'outbound') throw notFound('Message', id);
    const original = stored.phi ? openMessage(stored, await this.#codec(scope.organizationId, [stored.phi])) : stored;
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
    return (await this.#reveal(scope, [retried], 'messaging.retryMessage'))[0]!;
  }

  async #accept(scope: Scope, draft: Draft): Promise<Message> {
    const recorded = draft.idempotency;
    // Taken over from an attempt that did not finish: its message may have committed.
    if (recorded?.resumed) {
      const earlier = await this.#acceptedUnder(scope, recorded, draft.within);
      if (earlier) return earlier;
    }
    const now = this.#clock.now();
    if (!this.#providers.forMode(scope.mode, draft.channel)) {
      throw new ServiceError('CHANNEL_UNAVAILABLE', `The ${draft.channel} channel has no provider configured in ${scope.mode} mode`, { channel: draft.channel });
    }
    // The consent checks and the sender lookup run at once (each joins its own batched statement);
    // the outcome is the same as one after the other: the first refused recipient, in order, is
    // reported before a sender problem.
    const consent = this.#consent && !draft.bypassConsent ? draft.recipients.map((recipient) => this.#consent!.assertCanMessage(scope, draft.channel, recipient)) : [];
    // HIPAA mode: the organization's codec seals the stored row (cached lookup; null outside HIPAA mode).
    const phiWriter = this.#phi()?.writer(scope.organizationId) ?? Promise.resolve(null);
    phiWriter.catch(() => {});
    const settled = await Promise.allSettled([...consent, this.#resolveSender(draft.within, scope, draft.channel, draft.from ?? null)]);
    const refused = settled.find((r) => r.status === 'rejected');
    if (refused) throw refused.reason;
    const from = (settled[settled.length - 1] as PromiseFulfilledResult<string>).value;
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
      idempotencyHash: recorded?.hash ?? null, sequence: 1, createdAt: now, updatedAt: now,
      sentAt: null, deliveredAt: null, readAt: null, failedAt: null, phi: null, contentPurgedAt: null,
    };
    const writer = await phiWriter;
    const stored = writer ? sealMessage(fields, writer) : fields;
    const job = { data: { messageId: fields.id }, id: uuidFromMessageId(fields.id) };
    if (!draft.within) {
      // The common case: group-committed with concurrent sends (messaging.batching.ts).
      const acceptance = { scope, message: stored, event: messageEvent(fields, 'message.queued'), usage: usageOf(fields), job };
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
    return draft.within.transactional(async (tx) => {
      const message = tx.create(Message, stored);
      this.#emit(tx, message, 'message.queued', now);
      await tx.flush();
      await recordUsage(tx, scope, usageOf(fields), now);
      await this.#jobs.enqueue(DELIVER_JOB, job.data, { scope, em: tx, id: job.id });
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
    return earlier.phi ? openMessage(earlier, await this.#codec(scope.organizationId, [earlier.phi])) : earlier;
  }

  async #resolveSender(em: EntityManager | undefined, scope: Scope, channel: Channel, requested: string | null): Promise<string> {
    const normalized = requested === null ? null : channel === 'email' ? requested.toLowerCase() : channel === 'sms' || channel === 'whatsapp' ? (normalizePhone(requested) ?? requested) : requested;
    if (normalized !== null && scope.mode === 'test' && normalized === SANDBOX_SENDERS[channel]) return normalized;
    // Inside a caller's transaction the lookup uses it; otherwise it joins concurrent lookups in one statement.
    const found = em
      ? (await em.find(MessageSender, normalized === null ? { channel } : { channel, address: normalized }, { orderBy: { isDefault: 'desc', id: 'asc' }, limit: 1 }))[0]?.address ?? null
      : await this.#senders.find({ tenant: scope, channel, address: normalized });
    if (normalized !== null) {
      if (found) return found;
      throw new ServiceError('SENDER_NOT_CONFIGURED', `${requested} is not a ${channel} sender of this account`, { field: 'from', channel });
    }
    if (found) return found;
    if (scope.mode === 'test') return SANDBOX_SENDERS[channel];
    throw new ServiceError('SENDER_NOT_CONFIGURED', `No ${channel} sender is configured; add one or pass from`, { channel });
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

  // ---- delivery (jobs) ----

  /** The delivery job: sends a queued message once through its provider. Safe to run twice. */
  async deliver(tenant: TenantRef, messageId: string, attempt: number): Promise<void> {
    const found = await this.#reader.byId(messageId);
    const message = found && found.organizationId === tenant.organizationId && found.mode === tenant.mode ? found : null;
    if (!message || message.status !== 'queued') return;
    const channel: Channel = message.channel;
    const provider = this.#providers.forMode(tenant.mode, channel);
    if (!provider) return this.#fail(tenant, messageId, 'CHANNEL_UNAVAILABLE', `No ${channel} provider in ${tenant.mode} mode`);
    const opened = message.phi ? openMessage(message, await this.#codec(tenant.organizationId, [message.phi])) : message;
    const clear = message.sealedContent
      ? (JSON.parse(this.#sealer.open(message.sealedContent)) as { body: string | null; content: Record<string, unknown> })
      : { body: opened.body ?? null, content: opened.content };
    const outbound: OutboundMessage = { id: message.id, channel, from: message.from, to: message.recipients, body: clear.body, content: clear.content };
    try {
      if (channel === 'rcs' && !(await provider.supports(message.to))) throw new ProviderError('RCS_NOT_SUPPORTED', 'Recipient cannot receive RCS', false);
      const result = await provider.send(outbound);
      await this.#markSent(tenant, messageId, provider.name, result.providerMessageId);
    } catch (e) {
      if (!(e instanceof ProviderError)) throw e;
      let failure: ProviderError = e;
      const wantsFallback = (opened.content.fallback as { channel?: string } | undefined)?.channel === 'sms';
      if (e.code === 'RCS_NOT_SUPPORTED' && channel === 'rcs' && wantsFallback) {
        const sms = this.#providers.forMode(tenant.mode, 'sms');
        if (!sms) return this.#fail(tenant, messageId, 'CHANNEL_UNAVAILABLE', 'No SMS provider for the fallback');
        // The fallback is an SMS: the recipient's SMS consent applies to it.
        try {
          await this.#consent?.assertCanMessage(tenant, 'sms', message.to);
        } catch (refusal) {
          if (refusal instanceof ServiceError && refusal.code === 'RECIPIENT_OPTED_OUT') {
            return this.#fail(tenant, messageId, 'RECIPIENT_OPTED_OUT', 'RCS is not supported and the recipient opted out of SMS');
          }
          throw refusal;
        }
        const fallback = await this.#switchToSms(tenant, opened);
        try {
          const result = await sms.send({ ...outbound, channel: 'sms', from: fallback.from, body: fallback.body, content: {} });
          await this.#markSent(tenant, messageId, sms.name, result.providerMessageId);
          return;
        } catch (inner) {
          if (!(inner instanceof ProviderError)) throw inner;
          failure = inner;
        }
      }
      if (failure.retryable && attempt + 1 < this.#config.messaging.sendAttempts) throw failure;
      await this.#fail(tenant, messageId, failure.code, failure.message);
    }
  }

  /** RCS → SMS fallback: records it on the message, with the SMS sender, body, encoding and segments. */
  async #switchToSms(tenant: TenantRef, message: Message): Promise<{ from: string; body: string }> {
    const em = tenantEm(this.#orm, tenant);
    const now = this.#clock.now();
    const fallbackSpec = message.content.fallback as { body?: string } | undefined;
    const card = message.content.card as { title?: string; description?: string } | undefined;
    const body = fallbackSpec?.body ?? message.body ?? [card?.title, card?.description].filter(Boolean).join('\n');
    const scope = { organizationId: tenant.organizationId, mode: tenant.mode } as Scope;
    const from = await this.#resolveSender(em, { ...scope, actor: { type: 'system', id: 'system' } } as Scope, 'sms', null);
    const { encoding, segments } = segmentSms(body);
    await em.transactional(async (tx) => {
      const m = await tx.findOneOrFail(Message, { id: message.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (m.fallback) return;
      m.fallback = { channel: 'sms', reason: 'RCS_NOT_SUPPORTED', at: now.toISOString() };
      m.from = from;
      if (m.phi) {
        // HIPAA mode: the SMS body joins the sealed content.
        const codec = await this.#codec(tenant.organizationId, [m.phi]);
        m.phi = sealMessage({ ...openMessage(m, codec), body }, codec).phi;
      } else {
        m.body = body;
      }
      m.encoding = encoding;
      m.segments = segments;
      m.updatedAt = now;
      await tx.flush();
      await recordUsage(tx, tenant, { context: 'messaging', kind: 'sms.segment', quantity: segments, resourceId: m.id, idempotencyKey: `${m.id}:fallback-sms` }, now);
    });
    return { from, body };
  }

  async #markSent(tenant: TenantRef, messageId: string, provider: string, providerMessageId: string): Promise<void> {
    await this.#transition(tenant, messageId, 'sent', this.#clock.now(), { provider, providerMessageId });
  }

  async #fail(tenant: TenantRef, messageId: string, code: string, detail: string): Promise<void> {
    await this.#transition(tenant, messageId, 'failed', this.#clock.now(), { errorMessage: detail }, code);
  }

  /**
   * Applies a status change if it moves the message forward: queued → sent → delivered → read,
   * or → failed from queued/sent. Late or out-of-order reports are ignored (returns false). Batched
   * with concurrent transitions into one statement with its events (see TransitionWriter).
   */
  async #transition(tenant: TenantRef, messageId: string, status: MessageStatus, at: Date, also: { provider?: string; providerMessageId?: string; errorMessage?: string } = {}, errorCode?: string): Promise<boolean> {
    const now = this.#clock.now();
    return this.#transitions.apply({ tenant, messageId, status, at, errorCode: errorCode ?? null, ...also, now, eventId: newId('evt', now.getTime()) });
  }

  /** A provider's report (sandbox job or a real provider's callback). Unknown messages are ignored. */
  async applyStatusReport(report: { messageId?: string; provider?: string; providerMessageId: string; status: ReportedStatus; errorCode?: string; at: Date }): Promise<boolean> {
    // Sandbox reports name our message id (batched read); provider callbacks name their own id.
    const message = report.messageId
      ? await this.#reader.byId(report.messageId)
      : await this.#orm.em.fork().findOne(Message, { provider: report.provider, providerMessageId: report.providerMessageId }, ALL_TENANTS);
    if (!message) return false;
    // The provider can report before our `sent` update commits: retry the report later.
    if (message.providerMessageId === null && message.status === 'queued' && report.messageId) throw new ReportTooEarly(message.id);
    if (message.providerMessageId !== report.providerMessageId) return false;
    const tenant = { organizationId: message.organizationId, mode: message.mode };
    return this.#transition(tenant, message.id, report.status, report.at, {}, report.errorCode);
  }

  // ---- inbound ----

  /** Stores an inbound message (direction inbound, status delivered); it opens the WhatsApp session window. */
  async receiveInbound(tenant: TenantRef, input: { channel: Channel; from: string; to: string; body: string | null; provider?: string; providerMessageId?: string; content?: Record<string, unknown> }): Promise<Message> {
    const now = this.#clock.now();
    const em = tenantEm(this.#orm, tenant);
    const [webhookUrl, writer] = await Promise.all([
      this.#inboundWebhook?.(tenant, input.channel, input.to) ?? null,
      this.#phi()?.writer(tenant.organizationId) ?? null,
    ]);
    return em.transactional(async (tx) => {
      const message: Message = {
        id: newId('msg', now.getTime()), organizationId: tenant.organizationId, mode: tenant.mode, channel: input.channel,
        direction: 'inbound', to: input.to, recipients: [input.to], from: input.from, body: input.body, content: input.content ?? {},
        status: 'delivered', statusHistory: [{ status: 'delivered', at: now.toISOString() }], encoding: null, segments: null,
        errorCode: null, errorMessage: null, provider: input.provider ?? null, providerMessageId: input.providerMessageId ?? null,
        templateId: null, variables: null, fallback: null, originalMessageId: null, metadata: {}, webhookUrl, sequence: 1, sealedContent: null, idempotencyKey: null, idempotencyHash: null,
        createdAt: now, updatedAt: now, sentAt: null, deliveredAt: now, readAt: null, failedAt: null, phi: null, contentPurgedAt: null,
      };
      if (message.channel === 'sms') Object.assign(message, segmentSms(message.body ?? ''));
      tx.create(Message, writer ? sealMessage(message, writer) : message);
      this.#emit(tx, message, 'message.received', now);
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
    const to = await this.#resolveSender(tenantEm(this.#orm, scope), scope, input.channel, input.to ?? null);
    return this.receiveInbound(scope, { channel: input.channel, from, to, body: input.body, provider: 'sandbox' });
  }

  /** A provider callback's inbound message: the tenant is the owner of the receiving sender address. */
  async receiveProviderInbound(provider: string, input: { channel: Channel; from: string; to: string; body: string | null; providerMessageId?: string }): Promise<Message | undefined> {
    const sender = await this.#orm.em.fork().findOne(MessageSender, { channel: input.channel, address: input.to }, ALL_TENANTS);
    if (!sender) return undefined;
    return this.receiveInbound({ organizationId: sender.organizationId, mode: sender.mode }, { ...input, provider });
  }

  // ---- reading ----

  async getMessage(scope: Scope, id: string): Promise<Message> {
    const m = await tenantEm(this.#orm, scope).findOne(Message, { id });
    if (!m) throw notFound('Message', id);
    return (await this.#reveal(scope, [m], 'messaging.getMessage'))[0]!;
  }

  /** The flows port's read: the message opened, and whether it is PHI (stored sealed). */
  async inboundForFlows(tenant: TenantRef, id: string): Promise<{ direction: Message['direction']; body: string | null; sealed: boolean }> {
    const m = await tenantEm(this.#orm, tenant).findOne(Message, { id });
    if (!m) throw notFound('Message', id);
    const opened = m.phi ? openMessage(m, await this.#codec(tenant.organizationId, [m.phi])) : m;
    return { direction: m.direction, body: opened.body ?? null, sealed: m.phi !== null };
  }

  async listMessages(scope: Scope, input: ListMessagesInput): Promise<Page<Message>> {
    const limit = validateLimit(input.limit);
    const filters = { channel: input.channel ?? null, status: input.status ?? null, to: input.to ?? null, direction: input.direction ?? null };
    const key = { list: 'messages', filters };
    const after = input.cursor ? this.#cursors.decode(scope, key, input.cursor) : undefined;
    const where: Record<string, unknown> = {};
    if (after) where.id = { $lt: after };
    if (input.channel) where.channel = input.channel;
    if (input.status) where.status = input.status;
    if (input.direction) where.direction = input.direction;
    if (input.to) {
      const to = input.to.includes('@') ? input.to.toLowerCase() : (normalizePhone(input.to) ?? input.to);
      where.$or = [{ to }, { recipients: { $contains: [to] } }];
    }
    const rows = await tenantEm(this.#orm, scope).find(Message, where, { orderBy: { id: 'desc' }, limit: limit + 1 });
    const page = this.#cursors.page(scope, key, rows, limit);
    return { ...page, items: await this.#reveal(scope, page.items, 'messaging.listMessages') };
  }

  // ---- senders ----

  async listSenders(scope: Scope, channel?: Channel | null): Promise<MessageSender[]> {
    return tenantEm(this.#orm, scope).find(MessageSender, channel ? { channel } : {}, { orderBy: { id: 'asc' } });
  }

  async addSender(scope: Scope, input: { channel: Channel; address: string; is_default?: boolean | null }): Promise<MessageSender> {
    let address = input.address.trim();
    if (input.channel === 'sms' || input.channel === 'whatsapp') {
      const phone = normalizePhone(address);
      if (!phone) throw new ServiceError('INVALID_PHONE_NUMBER', `${address} is not an E.164 number`, { field: 'address' });
      address = phone;
    } else if (input.channel === 'email') {
      address = address.toLowerCase();
      if (!isEmail(address)) throw new ServiceError('INVALID_EMAIL', `${address} is not an email address`, { field: 'address' });
    }
    const now = this.#clock.now();
    const em = tenantEm(this.#orm, scope);
    try {
      return await em.transactional(async (tx) => {
        const existing = await tx.count(MessageSender, { channel: input.channel });
        const isDefault = input.is_default ?? existing === 0;
        if (isDefault) await tx.nativeUpdate(MessageSender, { channel: input.channel }, { isDefault: false });
        return tx.create(MessageSender, { id: newId('snd', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, channel: input.channel, address, isDefault, createdAt: now });
      });
    } catch (e) {
      if ((e as { code?: string }).code === '23505' || /unique/i.test(String((e as Error).message))) {
        throw new ServiceError('ALREADY_EXISTS', `${address} is already a ${input.channel} sender`, { field: 'address' });
      }
      throw e;
    }
  }

  async removeSender(scope: Scope, id: string): Promise<void> {
    const em = tenantEm(this.#orm, scope);
    const removed = await em.nativeDelete(MessageSender, { id });
    if (removed === 0) throw notFound('Sender', id);
  }

  /**
   * The numbers context's hook: an owned phone number becomes a sender of its organization and
   * mode on these channels, inside the caller's transaction (`tx`, bound to the same tenant). The
   * first sender of a channel becomes its default. An address already registered (by anyone) is
   * left as it is: no error, so the caller's transaction is not aborted.
   */
  async attachNumberSender(tx: EntityManager, tenant: TenantRef, address: string, channels: readonly Channel[]): Promise<void> {
    const now = this.#clock.now();
    for (const channel of channels) {
      await tx.getConnection().execute(
        `insert into message_senders (id, organization_id, mode, channel, address, is_default, created_at)
         select ?, ?, ?, ?, ?, not exists (select 1 from message_senders where organization_id = ? and mode = ? and channel = ?), ?
         on conflict (mode, channel, address) do nothing`,
        [newId('snd', now.getTime()), tenant.organizationId, tenant.mode, channel, address, tenant.organizationId, tenant.mode, channel, now],
        'run', tx.getTransactionContext(),
      );
    }
  }

  /** The numbers context's hook: a released number stops being a sender of its organization and mode. */
  async detachNumberSender(tx: EntityManager, tenant: TenantRef, address: string): Promise<void> {
    await tx.getConnection().execute(
      `delete from message_senders where organization_id = ? and mode = ? and address = ? and channel in ('sms', 'whatsapp')`,
      [tenant.organizationId, tenant.mode, address], 'run', tx.getTransactionContext(),
    );
  }

  // ---- internals ----

  /**
   * Messages as this caller may see them: sealed PHI opened and the disclosure logged (HIPAA mode),
   * or redacted for callers without PHI access (viewer, billing, a developer without a reason code).
   */
  async #reveal(scope: Scope, rows: Message[], operation: string): Promise<Message[]> {
    const port = this.#phi();
    if (!port || rows.length === 0) return rows;
    const sealed = rows.map((r) => r.phi).filter((x): x is string => !!x);
    const access = await port.access(scope);
    if (!access.hipaa && sealed.length === 0) return rows;
    const codec = sealed.length > 0 ? await port.codec(scope.organizationId, sealed) : undefined;
    if (!access.granted) return rows.map((r) => redactMessage(r, access.isPhiKey, codec));
    await access.record({ resourceType: 'message', resourceIds: rows.map((r) => r.id), fields: MESSAGE_PHI_FIELDS, operation });
    return codec ? rows.map((r) => openMessage(r, codec)) : rows;
  }

  async #codec(organizationId: string, sealed: string[]): Promise<PhiCodec> {
    const port = this.#phi();
    if (!port) throw new Error('a message holds sealed PHI but no module provides the phi port');
    return port.codec(organizationId, sealed);
  }

  #emit(em: EntityManager, m: Message, type: EventType, now: Date): void {
    emitEvent(em, { organizationId: m.organizationId, mode: m.mode }, messageEvent(m, type), now);
  }
}

/** A message event: its resource, sequence and the data every message event carries. */
function messageEvent(m: Message, type: EventType): EventInput {
  return {
    type, resourceType: 'message', resourceId: m.id, sequence: m.sequence,
    data: {
      message_id: m.id, channel: m.channel, from: m.from, to: m.to, status: m.status, direction: m.direction,
      ...(m.errorCode ? { error_code: m.errorCode } : {}),
      ...(m.webhookUrl ? { webhook_url: m.webhookUrl } : {}),
    },
  };
}

/** A status report for a message whose send has not been recorded yet (the report job retries). */
export class ReportTooEarly extends Error {
  readonly expected = true;
  constructor(messageId: string) {
    super(`status report for ${messageId} arrived before the send was recorded`);
    this.name = 'ReportTooEarly';
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

/** pg-boss job ids are UUIDs: derive one from the message id, so enqueueing the same delivery twice is a no-op. */
function uuidFromMessageId(id: string): string {
  const hex = Buffer.from(id).toString('hex').padEnd(32, '0').slice(-32);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** The unique violation of `messages_idempotency_idx`: a message with this send's Idempotency-Key exists. */
function isIdempotencyConflict(e: unknown): boolean {
  return (e as { code?: string }).code === '23505' && (e as { constraint?: string }).constraint === 'messages_idempotency_idx';
}
