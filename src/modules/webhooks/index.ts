/**
 * Webhooks: endpoints, signed deliveries with retries and a dead-letter queue, and the event
 * subscriptions. The outbox relay hands every committed event to its fan-out; its delivery worker
 * runs with the workers.
 */
import { defineModule } from '../manifest.ts';
import { webhooksConfig } from './webhooks.config.ts';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint } from './webhooks.entities.ts';
import { createWebhooksServices } from './webhooks.service.ts';
import { WebhookWorker } from './webhooks.worker.ts';
import { webhookRoutes } from './webhooks.rest.ts';
import type { WebhooksServices } from './webhooks.operations.ts';
import './webhooks.graphql.ts';

export const WEBHOOK_EVENTS = ['webhook.test', 'webhook.delivery.dead'] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { webhooks: (typeof WEBHOOK_EVENTS)[number] }
}

export const webhooksModule = defineModule({
  name: 'webhooks',
  config: webhooksConfig,
  entities: [WebhookEndpoint, WebhookDelivery, WebhookAttempt],
  events: WEBHOOK_EVENTS,
  create: (p): WebhooksServices => createWebhooksServices({ orm: p.orm, clock: p.clock, config: p.config, cursors: p.cursors, eventTypes: p.eventTypes, instruments: p.instruments }),
  routes: webhookRoutes,
  workers: (s, p) => {
    const worker = new WebhookWorker({ deliveries: s.webhookDeliveries, fanOut: s.webhookFanOut, log: p.log, intervalMs: p.config.webhooks.pollIntervalMs, concurrency: p.config.webhooks.concurrency });
    // The outbox relay hands committed events to the fan-out, then wakes the delivery worker when
    // the fan-out left deliveries to claim (fresh ones within its free slots are handed over claimed).
    p.relay.addConsumer((tx, event) => s.webhookFanOut.fanOut(tx, event));
    p.relay.onDispatched = () => worker.dispatched();
    return { start: () => worker.start(), stop: () => worker.stop() };
  },
});
