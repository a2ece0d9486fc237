/** REST shapes (snake_case) of webhook endpoints, deliveries, attempts and events. */
import type { Event } from '../../platform/events/events.entities.ts';
import { publicEventData } from '../../platform/events/events.ts';
import type { WebhookAttempt, WebhookDelivery, WebhookEndpoint } from './webhooks.entities.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentEndpoint(e: WebhookEndpoint) {
  return {
    id: e.id, url: e.url, events: e.events, description: e.description ?? null, active: e.active,
    ...(e.disabledReason ? { disabled_reason: e.disabledReason } : {}), mode: e.mode, created_at: iso(e.createdAt), updated_at: iso(e.updatedAt),
  };
}

export function presentDelivery(d: WebhookDelivery) {
  return {
    id: d.id, endpoint_id: d.endpointId ?? null, url: d.url, event_id: d.eventId, event_type: d.eventType, status: d.status,
    http_status: d.httpStatus ?? null, response_time_ms: d.responseTimeMs ?? null, attempt: d.attempt,
    next_retry_at: iso(d.nextAttemptAt), delivered_at: iso(d.deliveredAt), last_error: d.lastError ?? null, created_at: iso(d.createdAt),
  };
}

export function presentAttempt(a: WebhookAttempt) {
  return {
    attempt: a.attempt, status: a.status, http_status: a.httpStatus ?? null, response_time_ms: a.responseTimeMs ?? null,
    error: a.error ?? null, next_retry_at: iso(a.nextRetryAt), created_at: iso(a.createdAt),
  };
}

/** An event as a webhook delivers it (`id`, `type`, `created_at`, `data`), with the resource it is about and its sequence. */
export function presentEvent(e: Event) {
  return { id: e.id, type: e.type, created_at: iso(e.createdAt), data: publicEventData(e.data), resource_type: e.resourceType, resource_id: e.resourceId, sequence: e.sequence };
}
