/**
 * The messaging context's shared vocabulary: job names, sandbox senders, the ports it is given,
 * send options, and the event every message change emits.
 */
import type { SendBatch } from './messaging.batching.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { emitEvent, type EventInput, type EventType } from '../../platform/events/events.ts';
import type { RecordedKey } from '../../platform/idempotency.ts';
import type { Channel, MessagingProvider } from '../../providers/messaging/types.ts';
import type { Message } from './messaging.entities.ts';

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

/**
 * Which provider carries a tenant's messages (carriers.router.ts): the sandbox in test mode; in
 * live mode the carrier router for a channel the organization has routes on, else the configured
 * live provider (SMTP for email) or none (CHANNEL_UNAVAILABLE).
 */
export type ProvidersPort = {
  /** Loads what `forTenant` and `routable` read (the route table, live mode only); resolves at once after the first time. */
  ready(tenant: TenantRef): Promise<void>;
  forTenant(tenant: TenantRef, channel: Channel): MessagingProvider | undefined;
  /** Whether a route carries a live message from `from` to `to` (always true where no routes apply). */
  /** `media`: an MMS, which only connectors that carry media may take. */
  routable(tenant: TenantRef, channel: Channel, to: string, from: string, opts?: { media?: boolean }): boolean;
  /** The routes a live message on `channel` may take, described for an error that none matched. */
  routes(tenant: TenantRef, channel: Channel): string[];
};

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
  /**
   * With `within`: gathered into this batch (MessagingService.sendBatch) instead of written at
   * once; the caller writes the batch with `commit(tx)` before its transaction ends (campaigns).
   */
  batch?: SendBatch;
  /** Skips the consent check: only for the keyword confirmations (the last message an opted-out recipient gets). */
  bypassConsent?: boolean;
  /**
   * The request's Idempotency-Key (RequestContext.idempotency.next()): recorded on the message, so
   * a request that runs again after its first attempt committed returns that message instead of
   * sending a second one (the first attempt's process may have died before the response was stored).
   */
  idempotency?: RecordedKey;
};

/** A message event: its resource, sequence and the data every message event carries. */
export function messageEvent(m: Message, type: EventType): EventInput {
  return {
    type, resourceType: 'message', resourceId: m.id, sequence: m.sequence,
    data: {
      message_id: m.id, channel: m.channel, from: m.from, to: m.to, status: m.status, direction: m.direction,
      ...(m.errorCode ? { error_code: m.errorCode } : {}),
      ...(m.webhookUrl ? { webhook_url: m.webhookUrl } : {}),
      ...(m.chainDepth != null ? { depth: m.chainDepth } : {}),
    },
  };
}

/** Adds the message's event to the outbox of `em`'s transaction. */
export function emitMessageEvent(em: EntityManager, m: Message, type: EventType, now: Date): void {
  emitEvent(em, { organizationId: m.organizationId, mode: m.mode }, messageEvent(m, type), now);
}
