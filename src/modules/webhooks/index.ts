/**
 * Webhooks: endpoints, signed deliveries with retries and a dead-letter queue, and the event
 * subscriptions. The outbox relay hands every committed event to its fan-out; its delivery worker
 * runs with the workers.
 */
import { defineModule } from '../manifest.ts';
import { webhooksConfig } from './webhooks.config.ts';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint } from './webhooks.entities.ts';
import { createWebhooksServices, type WebhooksServices } from './webhooks.service.ts';
import { WebhookWorker } from './webhooks.worker.ts';
import { webhookRoutes } from './webhooks.rest.ts';
import './webhooks.graphql.ts';

export const WEBHOOK_EVENTS = ['webhook.test', 'webhook.delivery.dead'] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { webhooks: (typeof WEBHOOK_EVENTS)[number] }
}

/** Webhooks's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { wh: 'WebhookEndpoint', dlv: 'WebhookDelivery', wha: 'WebhookAttempt' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

/** Webhooks's error codes (the manifest's `errors`); `ServiceError` accepts them by the derived augmentation. */
const errors = {
  WEBHOOK_DELIVERY_FAILED: { status: 500, message: 'Delivery to the webhook endpoint failed' },
} as const;
declare module '../../platform/errors.ts' {
  interface ModuleErrorCodes extends Readonly<typeof errors> {}
}

export const webhooksModule = defineModule({
  name: 'webhooks',
  config: webhooksConfig,
  entities: [WebhookEndpoint, WebhookDelivery, WebhookAttempt],
  ids,
  errors,
  events: WEBHOOK_EVENTS,
  create: (p): WebhooksServices => createWebhooksServices({ orm: p.orm, clock: p.clock, config: p.config, cursors: p.cursors, eventTypes: p.eventTypes, instruments: p.instruments }),
  routes: webhookRoutes,
  jobs: (registry, _s, p) => registry.register({
    name: 'webhooks.events-prune',
    tenant: false,
    schedule: '41 3 * * *',
    handler: async (ctx) => {
      const removed = await p.events.prune(new Date(ctx.clock.now().getTime() - p.config.webhooks.eventRetentionDays * 86_400_000));
      if (removed > 0) ctx.log.info({ removed }, 'events past EVENTS_RETENTION_DAYS removed from the history');
    },
  }),
  workers: (s, p) => {
    const worker = new WebhookWorker({ deliveries: s.webhookDeliveries, fanOut: s.webhookFanOut, log: p.log, intervalMs: p.config.webhooks.pollIntervalMs, concurrency: p.config.webhooks.concurrency });
    // The outbox relay hands committed events to the fan-out, then wakes the delivery worker when
    // the fan-out left deliveries to claim (fresh ones within its free slots are handed over claimed).
    p.relay.addConsumer((tx, event) => s.webhookFanOut.fanOut(tx, event));
    p.relay.onDispatched = () => worker.dispatched();
    return { start: () => worker.start(), stop: () => worker.stop() };
  },
});
