/**
 * The event outbox: a state change and the events it emits commit in one transaction, so an event
 * exists if and only if its change committed. Dispatch (webhooks, subscriptions, flow triggers)
 * reads from here.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../db/tenant.ts';

export const Event = defineEntity({
  name: 'Event',
  tableName: 'events',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    /** From the catalog in events.catalog.ts, e.g. `message.delivered`. */
    type: p.string(),
    resourceType: p.string(),
    resourceId: p.string(),
    /** The resource's sequence number at this change: consumers order a resource's events by it. */
    sequence: p.integer(),
    data: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
    /**
     * No longer written (the relay takes an event's id off `events_outbox` instead; set on events
     * dispatched before that). An event inserted with it set is never queued for the relay.
     */
    dispatchedAt: p.datetime().nullable(),
    /** W3C `traceparent` of the request or job that emitted it, when tracing is on. */
    traceParent: p.string().nullable(),
  },
});
export type Event = InferEntity<typeof Event>;
