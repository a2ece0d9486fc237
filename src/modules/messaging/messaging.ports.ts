/**
 * The public face of messaging for other modules: its event types and the port types it offers.
 * Other modules import from here (or the manifest), never messaging's services or entities.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import type { MessagingService, SendOptions } from './messaging.service.ts';
import type { Message } from './messaging.entities.ts';

export const MESSAGING_EVENTS = [
  'message.queued', 'message.sent', 'message.delivered', 'message.read', 'message.failed', 'message.received',
  'template.approved', 'template.rejected',
] as const;

declare module '../../platform/events/events.ts' {
  interface EventCatalog { messaging: (typeof MESSAGING_EVENTS)[number] }
}

/** Sending as the organization: the same use cases as the API, with the options other contexts need. */
export type MessageSenderPort = Pick<MessagingService, 'sendSms' | 'sendEmail' | 'sendWhatsApp' | 'sendRcs' | 'sendViber' | 'sendBatch'>;
export type { SendOptions };
/** Sends gathered in one transaction and written together (`messageSender.sendBatch()`, SendOptions.batch). */
export type { SendBatch } from './messaging.batching.ts';
/** A stored message as other contexts see it (inbound hooks). */
export type MessageRecord = Message;

/** Sender registration for owned numbers (numbers calls it in the purchase and release transactions). */
export type NumberSendersPort = {
  attachNumberSender(tx: EntityManager, tenant: TenantRef, address: string, channels: readonly Channel[]): Promise<void>;
  detachNumberSender(tx: EntityManager, tenant: TenantRef, address: string): Promise<void>;
};
