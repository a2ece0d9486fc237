/**
 * What connectors receive, into today's paths. A delivery receipt that decided a message's outcome
 * is a status report (MessageDelivery.applyStatusReport: forward-only, with its event and webhooks);
 * one that overtakes the recording of the send (`ReportTooEarly`) is tried again for up to two
 * seconds before the connector answers the SMSC with a temporary error (it repeats the receipt).
 * A mobile-originated message is an inbound message (MessageInbound.receiveInbound: contacts' STOP,
 * START and HELP handling and the agent and flow triggers in its transaction) of the connector's
 * organization in live mode, on the connector's channel (SMS; WhatsApp for WhatsApp Cloud, where it
 * opens the 24-hour window); on a shared connector, of the organization whose live sender of that
 * channel the message was sent to (none: the connector refuses it).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ALL_TENANTS } from '../../platform/db/tenant.ts';
import type { CarrierEvents } from '../../providers/messaging/types.ts';
import { ReportTooEarly, type MessageDelivery } from './messaging.delivery.ts';
import { MessageSender } from './messaging.entities.ts';
import type { MessageInbound } from './messaging.inbound.ts';
import type { CarrierTable } from './carriers.table.ts';

const EARLY_REPORT_RETRIES = 40;
const EARLY_REPORT_WAIT_MS = 50;

export class CarrierInbox implements Omit<CarrierEvents, 'status'> {
  readonly #orm: MikroORM;
  readonly #table: Pick<CarrierTable, 'connector'>;
  readonly #delivery: Pick<MessageDelivery, 'applyStatusReport'>;
  readonly #inbound: Pick<MessageInbound, 'receiveInbound'>;

  constructor(deps: { orm: MikroORM; table: Pick<CarrierTable, 'connector'>; delivery: Pick<MessageDelivery, 'applyStatusReport'>; inbound: Pick<MessageInbound, 'receiveInbound'> }) {
    this.#orm = deps.orm;
    this.#table = deps.table;
    this.#delivery = deps.delivery;
    this.#inbound = deps.inbound;
  }

  /** `messageId` absent: the message is found by the connector and the provider's id. */
  async report(report: Omit<Parameters<CarrierEvents['report']>[0], 'messageId'> & { messageId?: string }): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#delivery.applyStatusReport(report);
        return;
      } catch (e) {
        if (!(e instanceof ReportTooEarly) || attempt >= EARLY_REPORT_RETRIES) throw e;
        await sleep(EARLY_REPORT_WAIT_MS);
      }
    }
  }

  async inbound(message: Parameters<CarrierEvents['inbound']>[0]): Promise<'stored' | 'no_owner'> {
    const connector = this.#table.connector(message.connectorId);
    if (!connector) return 'no_owner';
    let organizationId = connector.organizationId;
    if (connector.shared) {
      const sender = await this.#orm.em.fork().findOne(MessageSender, { channel: connector.channel, mode: 'live', address: message.to }, ALL_TENANTS);
      if (!sender) return 'no_owner';
      organizationId = sender.organizationId;
    }
    const media = message.mediaUrls && message.mediaUrls.length > 0 ? { media_urls: message.mediaUrls } : {};
    const content = { ...message.content, ...media };
    await this.#inbound.receiveInbound({ organizationId, mode: 'live' }, {
      channel: connector.channel, from: message.from, to: message.to, body: message.body, provider: message.connectorId,
      ...(message.providerMessageId ? { providerMessageId: message.providerMessageId } : {}),
      ...(Object.keys(content).length > 0 ? { content } : {}),
    });
    return 'stored';
  }
}
