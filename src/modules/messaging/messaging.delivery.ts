/**
 * Delivery: the job that sends a queued message once through its channel's provider (RCS falls
 * back to SMS when the recipient cannot receive RCS), and the status reports providers send back,
 * applied forward-only in batched statements with their events.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Pool } from 'pg';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { recordUsage } from '../../platform/usage/usage.ts';
import type { Sealer } from '../../platform/crypto/seal.ts';
import { ProviderError, type Channel, type OutboundMessage, type ReportedStatus } from '../../providers/messaging/types.ts';
import { MessageReader } from './messaging.batching.ts';
import { TransitionWriter } from './messaging.transitions.ts';
import { Message, type MessageStatus } from './messaging.entities.ts';
import type { ConsentPort, ProvidersPort } from './messaging.model.ts';
import { openMessage, sealMessage, type MessagePhi } from './messaging.phi.ts';
import type { SenderDirectory } from './messaging.senders.ts';
import type { MessageBilling } from './messaging.billing.ts';
import { segmentSms } from './segmentation.ts';
import type { SendPacing } from './messaging.pacing.ts';

export class MessageDelivery {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #transitions: TransitionWriter;
  readonly #reader: MessageReader;
  readonly #providers: ProvidersPort;
  readonly #consent: ConsentPort | undefined;
  readonly #senders: SenderDirectory;
  readonly #phi: MessagePhi;
  readonly #sealer: Sealer;
  readonly #billing: MessageBilling;
  readonly #pacing: SendPacing | undefined;

  constructor(deps: {
    orm: MikroORM; pool: Pool; clock: Clock; config: Config; providers: ProvidersPort; consent?: ConsentPort; senders: SenderDirectory; phi: MessagePhi; sealer: Sealer; billing: MessageBilling;
    pacing?: SendPacing;
  }) {
    this.#pacing = deps.pacing;
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#transitions = new TransitionWriter(deps.pool);
    this.#reader = new MessageReader({ orm: deps.orm, pool: deps.pool });
    this.#providers = deps.providers;
    this.#consent = deps.consent;
    this.#senders = deps.senders;
    this.#phi = deps.phi;
    this.#sealer = deps.sealer;
    this.#billing = deps.billing;
  }


  /**
   * A delivery (of the delivery queue, messaging.queue.ts, or an old `messaging.deliver` job):
   * sends a queued message once through its provider. Safe to run twice. An API SMS from a
   * 10DLC-registered number first takes its slot of the number's pace (messaging.pacing.ts;
   * `paced`: the delivery already runs in its slot). Resolves true when it moved the delivery to a
   * later slot instead of sending; throws a retryable provider error before the last attempt.
   */
  async deliver(tenant: Scope, messageId: string, attempt: number, paced = false): Promise<boolean> {
    return (await this.#send(tenant, messageId, attempt, paced)) === 'deferred';
  }

  async #send(tenant: Scope, messageId: string, attempt: number, paced: boolean): Promise<'deferred' | void> {
    const found = await this.#reader.byId(messageId);
    const message = found && found.organizationId === tenant.organizationId && found.mode === tenant.mode ? found : null;
    if (!message || message.status !== 'queued') return;
    const channel: Channel = message.channel;
    await this.#providers.ready(tenant);
    const provider = this.#providers.forTenant(tenant, channel);
    if (!provider) return this.#fail(tenant, messageId, 'CHANNEL_UNAVAILABLE', `No ${channel} provider in ${tenant.mode} mode`);
    const opened = message.phi ? openMessage(message, await this.#phi.codec(tenant.organizationId, [message.phi])) : message;
    if (!paced && attempt === 0 && await this.#pacing?.deferred(tenant, opened)) return 'deferred';
    const clear = message.sealedContent
      ? (JSON.parse(this.#sealer.open(message.sealedContent)) as { body: string | null; content: Record<string, unknown> })
      : { body: opened.body ?? null, content: opened.content };
    const outbound: OutboundMessage = { id: message.id, channel, from: message.from, to: message.recipients, body: clear.body, content: clear.content };
    try {
      if (channel === 'rcs' && !(await provider.supports(message.to))) throw new ProviderError('RCS_NOT_SUPPORTED', 'Recipient cannot receive RCS', false);
      const result = await provider.send(outbound);
      await this.#markSent(tenant, messageId, result.provider ?? provider.name, result.providerMessageId);
      // Email has no delivery report over SMTP: a live email's reservation is final once the server accepted it.
      if (channel === 'email') await this.#billing.settle(tenant, messageId, 'delivered');
    } catch (e) {
      if (!(e instanceof ProviderError)) throw e;
      let failure: ProviderError = e;
      const wantsFallback = (opened.content.fallback as { channel?: string } | undefined)?.channel === 'sms';
      if (e.code === 'RCS_NOT_SUPPORTED' && channel === 'rcs' && wantsFallback) {
        const sms = this.#providers.forTenant(tenant, 'sms');
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
          await this.#markSent(tenant, messageId, result.provider ?? sms.name, result.providerMessageId);
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
    const from = await this.#senders.resolve(em, { ...scope, actor: { type: 'system', id: 'system' } } as Scope, 'sms', null);
    const { encoding, segments } = segmentSms(body);
    await em.transactional(async (tx) => {
      const m = await tx.findOneOrFail(Message, { id: message.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (m.fallback) return;
      m.fallback = { channel: 'sms', reason: 'RCS_NOT_SUPPORTED', at: now.toISOString() };
      m.from = from;
      if (m.phi) {
        // HIPAA mode: the SMS body joins the sealed content.
        const codec = await this.#phi.codec(tenant.organizationId, [m.phi]);
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

  /**
   * A queued message whose delivery job ended without moving it (failed after its retries, or gone)
   * will never be sent: it fails now (MESSAGE_SEND_FAILED, `message.failed`) and its reservation is
   * released. Call only once the job is known to be over. Returns whether it failed it.
   */
  async abandon(tenant: TenantRef, messageId: string): Promise<boolean> {
    const failed = await this.#transition(tenant, messageId, 'failed', this.#clock.now(), { errorMessage: 'The delivery ended without sending the message; send it again' }, 'MESSAGE_SEND_FAILED');
    if (failed) await this.#billing.settle(tenant, messageId, 'failed');
    return failed;
  }

  async #markSent(tenant: TenantRef, messageId: string, provider: string, providerMessageId: string): Promise<void> {
    await this.#transition(tenant, messageId, 'sent', this.#clock.now(), { provider, providerMessageId });
  }

  async #fail(tenant: TenantRef, messageId: string, code: string, detail: string): Promise<void> {
    if (await this.#transition(tenant, messageId, 'failed', this.#clock.now(), { errorMessage: detail }, code)) await this.#billing.settle(tenant, messageId, 'failed');
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
    const applied = await this.#transition(tenant, message.id, report.status, report.at, {}, report.errorCode);
    // A live send's reservation: captured once delivered, released when it failed.
    if (applied && (report.status === 'delivered' || report.status === 'failed')) await this.#billing.settle(tenant, message.id, report.status);
    return applied;
  }
}

/** A status report for a message whose send has not been recorded yet (the report job retries). */
export class ReportTooEarly extends Error {
  readonly expected = true;
  constructor(messageId: string) {
    super(`status report for ${messageId} arrived before the send was recorded`);
    this.name = 'ReportTooEarly';
  }
}
