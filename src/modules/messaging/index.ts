/**
 * Messaging: sends on five channels, delivery through the providers, status reports, inbound
 * messages, senders and templates. Needs the contacts context's consent check and inbound keyword
 * handling and the numbers context's inbound webhook lookup; offers sending (verify, contacts) and
 * sender registration (numbers), and answers billing's stale-reservation sweep for messages
 * (`messageCharges`).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { createMessagingProviders } from '../../providers/messaging/registry.ts';
import { PgSendStore, SANDBOX_SENDS_PURPOSE } from '../../providers/messaging/sendStore.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import { defineModule, type ProviderCallbackRequest } from '../manifest.ts';
import { messagingConfig } from './messaging.config.ts';
import { Message, MessageSender, MessageTemplate } from './messaging.entities.ts';
import { DELIVER_JOB, MessagingService, type ConsentPort } from './messaging.service.ts';
import { TemplatesService } from './templates.service.ts';
import { registerMessagingJobs, TEMPLATE_DECISION_JOB } from './messaging.jobs.ts';
import { messagingRoutes } from './messaging.rest.ts';
import { handleProviderCallback } from './messaging.callbacks.ts';
import { flowMessagesPort } from './flows.port.ts';
import { deliveryJobIds, SendPacing } from './messaging.pacing.ts';
import type { MessagingServices } from './messaging.operations.ts';
import { MESSAGING_EVENTS, type MessageSenderPort, type NumberSendersPort } from './messaging.ports.ts';
import { MessageOutcomes } from './messaging.outcomes.ts';
import { MessageRetention } from './messaging.retention.ts';
import { PhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import { MessagePhi } from './messaging.phi.ts';
import { SenderDirectory } from './messaging.senders.ts';
import { MessageDelivery } from './messaging.delivery.ts';
import { MessageInbound } from './messaging.inbound.ts';
import { MessageBilling, MessageCharges } from './messaging.billing.ts';
import { SandboxReportTimeline } from './messaging.timeline.ts';
import { DeliveryQueue } from './messaging.queue.ts';
import { PgCarrierSendStore } from '../../providers/messaging/carrierSends.ts';
import { MessagingConnector, MessagingRoute } from './carriers.entities.ts';
import { CarrierTable } from './carriers.table.ts';
import { CarrierRuntime } from './carriers.runtime.ts';
import { ProviderRouting } from './carriers.router.ts';
import { CarrierInbox } from './carriers.inbox.ts';
import { CarriersService } from './carriers.service.ts';
import { CarrierCallbacks } from './carriers.callbacks.ts';
import { HTTP_CONNECTOR_KINDS } from './carriers.entities.ts';
import { carrierRoutes } from './carriers.rest.ts';
import './messaging.graphql.ts';
import './carriers.graphql.ts';

declare module '../manifest.ts' {
  interface Ports {
    /** Sends a message as the organization (verify codes, keyword replies). */
    messageSender: MessageSenderPort;
    /** Registers an owned number as a sender of the channels it can carry. */
    numberSenders: NumberSendersPort;
    /** Consent check before every send (offered by contacts). */
    consent: ConsentPort;
    /** Runs in the transaction that stores an inbound message (offered by contacts). */
    inboundMessages: { handleInbound(tx: EntityManager, tenant: TenantRef, message: Message): Promise<void> };
    /** The callback URL of the number that received an inbound message (offered by numbers). */
    inboundWebhook: { inboundWebhookUrl(tenant: TenantRef, channel: Channel, to: string): Promise<string | null> };
  }
}

type MessagingModule = MessagingServices & {
  messageDelivery: MessageDelivery; messageRetention: MessageRetention; sandboxReports: SandboxReportTimeline; deliveries: DeliveryQueue;
  carrierRuntime: CarrierRuntime; carrierCallbacks: CarrierCallbacks; close(): Promise<void>;
};

/** Messaging's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { msg: 'Message', tpl: 'MessageTemplate', snd: 'MessageSender', conn: 'MessagingConnector', route: 'MessagingRoute' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

/** Messaging's error codes (the manifest's `errors`); `ServiceError` accepts them by the derived augmentation. */
const errors = {
  MESSAGE_SEND_FAILED: { status: 500, message: 'Downstream provider rejected the message' },
  CHANNEL_UNAVAILABLE: { status: 503, message: 'Channel is offline or not configured' },
  TEMPLATE_NOT_APPROVED: { status: 422, message: 'Template is not approved' },
  INVALID_RECIPIENT: { status: 422, message: 'Recipient is unreachable or blocked' },
  SENDER_NOT_CONFIGURED: { status: 422, message: 'No sender is configured for this channel' },
} as const;
declare module '../../platform/errors.ts' {
  interface ModuleErrorCodes extends Readonly<typeof errors> {}
}

export const messagingModule = defineModule({
  name: 'messaging',
  config: messagingConfig,
  entities: [Message, MessageTemplate, MessageSender, MessagingConnector, MessagingRoute],
  ids,
  errors,
  events: MESSAGING_EVENTS,
  requires: ['consent', 'inboundMessages', 'inboundWebhook'],
  optional: ['phi', 'credits', 'planQuotas', 'senderThroughput', 'ownedNumbers'],
  create: (p, ports): MessagingModule => {
    const later = (delayMs: number) => new Date(Date.now() + delayMs);
    // The sandbox reports back later through rows of its timeline (one ticker per instance claims
    // them), applied by the same code as real callbacks; template decisions through durable jobs.
    const sandboxReports = new SandboxReportTimeline({ pool: p.pool, log: p.log, now: () => p.clock.now() });
    // Accepted messages wait for their send as rows of the delivery queue (messaging.queue.ts).
    const m = p.config.messaging;
    const deliveries = new DeliveryQueue({
      pool: p.pool, url: p.databaseUrl, log: p.log, connectTimeoutMs: p.config.dbConnectTimeoutMs,
      batch: m.deliveryConcurrency, loops: 2, sendAttempts: m.sendAttempts, retryDelaySeconds: m.retryDelaySeconds,
    });
    const registry = createMessagingProviders({
      smtpUrl: p.config.messaging.smtpUrl,
      liveSandbox: p.config.messaging.liveSandbox,
      store: new PgSendStore(p.pool, new Sealer(p.config.appSecret, SANDBOX_SENDS_PURPOSE)),
      reports: sandboxReports,
      delays: p.config.messaging.sandbox,
      // Batched job inserts share one NOTIFY (see Jobs.enqueueBatched).
      decisions: { schedule: async (decision, delayMs) => { await p.jobs.enqueueBatched(TEMPLATE_DECISION_JOB, decision, { startAfter: later(delayMs) }); } },
      reviewAfterMs: p.config.messaging.sandbox.templateReviewMs,
    });
    // Live messages through carriers: the route table every instance holds, the connectors the workers bind.
    const carriers = m.carriers;
    const table = new CarrierTable({ pool: p.pool, url: p.databaseUrl, log: p.log, connectTimeoutMs: p.config.dbConnectTimeoutMs, operatorOrg: carriers.operatorOrg });
    const credentials = new Sealer(p.config.appSecret, 'messaging:connector-credentials');
    const carrierSends = new PgCarrierSendStore(p.pool);
    // Receipts and MO reach delivery and inbound, which are built on the routing below: bound once they exist.
    const inbox: { to?: CarrierInbox } = {};
    const carrierRuntime = new CarrierRuntime({
      table, pool: p.pool, sealer: credentials, store: carrierSends, log: p.log,
      timings: { sendTimeoutMs: carriers.sendTimeoutMs, reconnectMaxMs: carriers.reconnectMaxMs },
      apis: { publicBaseUrl: p.config.publicBaseUrl, apiUrls: carriers.apiUrls },
      events: { report: (r) => inbox.to!.report(r), inbound: (mo) => inbox.to!.inbound(mo) },
    });
    const providers = new ProviderRouting({ registry, table, runtime: carrierRuntime, liveSandbox: m.liveSandbox });
    const inbound = ports('inboundMessages');
    const numbers = ports('inboundWebhook');
    const phi = new MessagePhi(ports.optional('phi'));
    const consent = ports('consent');
    // Verify's concealed codes: the clear payload stays sealed until delivery.
    const sealer = new Sealer(p.config.appSecret, 'messaging:concealed-content');
    const messageSenders = new SenderDirectory({ orm: p.orm, pool: p.pool, clock: p.clock });
    const billing = new MessageBilling({ credits: ports.optional('credits'), quotas: ports.optional('planQuotas') });
    const messaging = new MessagingService({
      orm: p.orm, pool: p.pool, clock: p.clock, cursors: p.cursors, queue: deliveries, providers, consent, senders: messageSenders, phi, sealer, billing,
      numbers: ports.optional('ownedNumbers'),
    });
    const pacing = new SendPacing({ orm: p.orm, clock: p.clock, queue: deliveries, throughput: ports.optional('senderThroughput') });
    const messageDelivery = new MessageDelivery({ orm: p.orm, pool: p.pool, clock: p.clock, config: p.config, providers, consent, senders: messageSenders, phi, sealer, billing, pacing });
    sandboxReports.bind(messageDelivery);
    deliveries.bind(messageDelivery);
    const messageInbound = new MessageInbound({
      orm: p.orm, clock: p.clock, senders: messageSenders, phi,
      inboundWebhook: (tenant, channel, to) => numbers.inboundWebhookUrl(tenant, channel, to),
      inboundHook: (tx, tenant, message) => inbound.handleInbound(tx, tenant, message),
    });
    const messageRetention = new MessageRetention(new PhiHousekeeping({ pool: p.pool, clock: p.clock, phi: ports.optional('phi'), batchSize: p.config.phiBatchSize }));
    inbox.to = new CarrierInbox({ orm: p.orm, table, delivery: messageDelivery, inbound: messageInbound });
    const carrierCallbacks = new CarrierCallbacks({ table, sealer: credentials, pool: p.pool, store: carrierSends, inbox: inbox.to, publicBaseUrl: p.config.publicBaseUrl });
    const carrierService = new CarriersService({ orm: p.orm, clock: p.clock, cursors: p.cursors, sealer: credentials, table, operatorOrg: carriers.operatorOrg, publicBaseUrl: p.config.publicBaseUrl });
    const templates = new TemplatesService({ orm: p.orm, clock: p.clock, cursors: p.cursors, reviewer: registry.reviewer, jobs: p.jobs });
    return {
      messaging, templates, messageSenders, messageDelivery, messageInbound, messageRetention, sandboxReports, deliveries, carriers: carrierService, carrierRuntime, carrierCallbacks,
      close: async () => {
        await Promise.all([registry.close(), carrierRuntime.stop(), table.stop()]);
      },
    };
  },
  provides: (s, p) => {
    const flowMessages = flowMessagesPort(s.messaging, s.templates);
    return {
      messageSender: s.messaging, numberSenders: s.messageSenders, flowMessages, agentInbound: { inboundMessage: flowMessages.inboundMessage }, messageOutcomes: new MessageOutcomes(p.pool),
      messageCharges: new MessageCharges({ pool: p.pool, clock: p.clock, jobs: p.jobs, delivery: s.messageDelivery, queue: s.deliveries, deliverJob: { name: DELIVER_JOB, idsOf: deliveryJobIds } }),
    };
  },
  routes: [...messagingRoutes, ...carrierRoutes],
  jobs: (registry, s, p) => registerMessagingJobs(registry, { config: p.config, delivery: s.messageDelivery, templates: s.templates, retention: s.messageRetention }),
  workers: (s) => ({
    start: async () => {
      s.sandboxReports.start();
      await s.deliveries.start();
      await s.carrierRuntime.start();
    },
    stop: async () => {
      await Promise.all([s.sandboxReports.stop(), s.deliveries.stop()]);
      await s.carrierRuntime.stop();
    },
  }),
  callbacks: (s, p) => ({
    // Every messaging provider calls back on the same route; the handler checks the provider's signature.
    // The HTTP carrier APIs call back on their own provider names, signed their own way (carriers.callbacks.ts).
    ...Object.fromEntries(HTTP_CONNECTOR_KINDS.map((kind) => [kind, (_p: string, raw: string, _s: string | undefined, request: ProviderCallbackRequest) => s.carrierCallbacks.handle(kind, raw, request)])),
    '*': (provider, raw, signature) => handleProviderCallback({ delivery: s.messageDelivery, inbound: s.messageInbound, clock: p.clock, providerSecret: p.config.providerSecret }, provider, raw, signature),
  }),
  // WhatsApp Cloud's webhook subscription handshake is a GET on the same URL.
  pages: (s) => ({ whatsapp_cloud: (_provider, query) => s.carrierCallbacks.handshake(query) }),
  close: (s) => s.close(),
});
