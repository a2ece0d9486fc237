/** Webhooks context: endpoints, one delivery per (event, target), and every attempt. */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns, type Mode } from '../../platform/db/tenant.ts';

export const WebhookEndpoint = defineEntity({
  name: 'WebhookEndpoint',
  tableName: 'webhook_endpoints',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    url: p.string(),
    description: p.string().nullable(),
    /** Event types, `prefix.*` wildcards or `*`. */
    events: p.json<string[]>(),
    active: p.boolean(),
    /** The signing secret, sealed with a key derived from APP_SECRET (shown to the user only at creation). */
    signingSecretSealed: p.string(),
    disabledReason: p.string().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type WebhookEndpoint = InferEntity<typeof WebhookEndpoint>;

export const DELIVERY_STATUSES = ['pending', 'success', 'failed', 'dead', 'cancelled'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export const WebhookDelivery = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    /** Null for a per-resource callback (a message's webhook_url). */
    endpointId: p.string().nullable(),
    url: p.string(),
    eventId: p.string(),
    eventType: p.string(),
    /** The exact body sent on every attempt. */
    payload: p.text(),
    status: p.string().$type<DeliveryStatus>(),
    /** Attempts made so far. */
    attempt: p.integer(),
    nextAttemptAt: p.datetime().nullable(),
    lockedUntil: p.datetime().nullable(),
    httpStatus: p.integer().nullable(),
    responseTimeMs: p.integer().nullable(),
    lastError: p.string().nullable(),
    deliveredAt: p.datetime().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    /** The event's W3C `traceparent` (tracing on): each attempt continues that trace. */
    traceParent: p.string().nullable(),
  },
});
export type WebhookDelivery = InferEntity<typeof WebhookDelivery>;

export const WebhookAttempt = defineEntity({
  name: 'WebhookAttempt',
  tableName: 'webhook_attempts',
  filters: tenantFilter('organization+mode'),
  properties: {
    id: p.string().primary(),
    deliveryId: p.string(),
    organizationId: p.string(),
    mode: p.string().$type<Mode>(),
    attempt: p.integer(),
    status: p.string().$type<'success' | 'failed'>(),
    httpStatus: p.integer().nullable(),
    responseTimeMs: p.integer().nullable(),
    error: p.string().nullable(),
    nextRetryAt: p.datetime().nullable(),
    createdAt: p.datetime(),
  },
});
export type WebhookAttempt = InferEntity<typeof WebhookAttempt>;
