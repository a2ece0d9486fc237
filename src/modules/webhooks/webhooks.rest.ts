/** The /v1/webhooks routes. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import type { WebhookAttempt, WebhookDelivery, WebhookEndpoint } from './webhooks.entities.ts';
import type { TestResult } from './webhooks.service.ts';
import {
  callbackSecretOp, createWebhookOp, deleteWebhookOp, getDeliveryOp, getEventOp, getWebhookOp, listDeadLettersOp, listDeliveriesOp, listEventsOp,
  listWebhooksOp, replayDeliveryOp, testWebhookOp, updateWebhookOp,
} from './webhooks.operations.ts';
import { presentAttempt, presentDelivery, presentEndpoint, presentEvent } from './webhooks.presenters.ts';

export const webhookRoutes = [
  route({
    method: 'GET', path: '/v1/events', operation: listEventsOp, query: [...PAGE_QUERY, 'type', 'created_after', 'created_before'], paginated: true, output: presentEvent,
    input: (r) => ({ ...pageQuery(r.query), types: r.query.type?.split(',').map((t) => t.trim()).filter(Boolean), created_after: r.query.created_after, created_before: r.query.created_before }),
  }),
  route({ method: 'GET', path: '/v1/events/{id}', operation: getEventOp, input: (r) => r.params, output: presentEvent, resource: 'evt' }),
  route({
    method: 'POST', path: '/v1/webhooks', operation: createWebhookOp, status: 201, input: (r) => r.body,
    output: (res: { endpoint: WebhookEndpoint; signingSecret: string }) => ({ ...presentEndpoint(res.endpoint), signing_secret: res.signingSecret }),
  }),
  route({ method: 'GET', path: '/v1/webhooks', operation: listWebhooksOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: presentEndpoint }),
  route({ method: 'GET', path: '/v1/webhooks/dead-letters', operation: listDeadLettersOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: presentDelivery }),
  route({ method: 'GET', path: '/v1/webhooks/callback-secret', operation: callbackSecretOp, output: (secret: string) => ({ signing_secret: secret }) }),
  route({
    method: 'GET', path: '/v1/webhooks/deliveries/{id}', operation: getDeliveryOp, input: (r) => r.params, resource: 'dlv',
    output: (res: { delivery: WebhookDelivery; attempts: WebhookAttempt[] }) => ({ ...presentDelivery(res.delivery), attempts: res.attempts.map(presentAttempt) }),
  }),
  route({ method: 'POST', path: '/v1/webhooks/deliveries/{id}/replay', operation: replayDeliveryOp, input: (r) => r.params, output: presentDelivery, resource: 'dlv' }),
  route({ method: 'GET', path: '/v1/webhooks/{id}', operation: getWebhookOp, input: (r) => r.params, output: presentEndpoint, resource: 'wh' }),
  route({ method: 'PUT', path: '/v1/webhooks/{id}', operation: updateWebhookOp, input: (r) => ({ ...r.body, id: r.params.id }), output: presentEndpoint, resource: 'wh' }),
  route({ method: 'DELETE', path: '/v1/webhooks/{id}', operation: deleteWebhookOp, status: 204, input: (r) => r.params, resource: 'wh' }),
  route({
    method: 'POST', path: '/v1/webhooks/{id}/test', operation: testWebhookOp, input: (r) => r.params, resource: 'wh',
    output: (res: TestResult) => ({ ...res, delivered_at: res.delivered_at ? res.delivered_at.toISOString() : null }),
  }),
  route({
    method: 'GET', path: '/v1/webhooks/{id}/deliveries', operation: listDeliveriesOp, query: [...PAGE_QUERY, 'status'], resource: 'wh',
    input: (r) => ({ ...pageQuery(r.query), id: r.params.id, status: r.query.status }), paginated: true, output: presentDelivery,
  }),
];
