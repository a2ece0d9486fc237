/** Emitting events into the outbox, inside the caller's transaction. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../ids.ts';
import type { TenantRef } from '../db/tenant.ts';
import { Event } from './events.entities.ts';
import { currentTraceparent, tracingEnabled } from '../tracing.ts';

/**
 * The event catalog: each module declares the event types it emits in its manifest (`events`) and
 * adds them to this interface by augmentation, so `emitEvent` only takes documented types:
 * `declare module '../../platform/events/events.ts' { interface EventCatalog { numbers: NumbersEvent } }`.
 * Webhook endpoints subscribe to these names or a `prefix.*` wildcard.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface EventCatalog {}
export type EventType = EventCatalog[keyof EventCatalog];

/** Event data as webhooks and the event log show it: the per-message callback URL is not part of it. */
export function publicEventData(data: Record<string, unknown>): Record<string, unknown> {
  const { webhook_url: _callback, ...rest } = data;
  return rest;
}

/** Whether an event type matches any of the patterns (a name, `prefix.*` or `*`). */
export function eventMatches(patterns: readonly string[], type: string): boolean {
  return patterns.some((p) => p === '*' || p === type || (p.endsWith('.*') && type.startsWith(p.slice(0, -1))));
}

export type EventInput = {
  type: EventType;
  resourceType: string;
  resourceId: string;
  sequence: number;
  data: Record<string, unknown>;
};

/** A tenant, or a Scope carrying the trace context of its request or job (and, acting for a flow execution, its chain depth). */
type Emitter = TenantRef & { traceparent?: string; chainDepth?: number };

/**
 * Persists the event with the caller's unit of work: it commits with the change, or not at all.
 * With tracing on, it keeps the emitter's trace context (the scope's, else the current one). An
 * emitter acting for a flow execution (`chainDepth`) adds `depth` to the data.
 */
export function emitEvent(em: EntityManager, tenant: Emitter, input: EventInput, now: Date): Event {
  return em.create(Event, eventFields(tenant, input, now));
}

function eventFields(tenant: Emitter, input: EventInput, now: Date) {
  return {
    id: newId('evt', now.getTime()),
    organizationId: tenant.organizationId,
    mode: tenant.mode,
    type: input.type,
    resourceType: input.resourceType,
    resourceId: input.resourceId,
    sequence: input.sequence,
    // Caused by a flow execution (Scope.chainDepth): the flow triggers read how deep the chain is.
    data: tenant.chainDepth !== undefined && input.data.depth === undefined ? { ...input.data, depth: tenant.chainDepth } : input.data,
    createdAt: now,
    dispatchedAt: null,
    traceParent: tracingEnabled() ? tenant.traceparent ?? currentTraceparent() ?? null : null,
  };
}

/** The events table's columns written by {@link eventRow}. */
export const EVENT_COLUMNS = ['id', 'organization_id', 'mode', 'type', 'resource_type', 'resource_id', 'sequence', 'data', 'created_at', 'trace_parent'] as const;

/** The same event as a row for a group commit's multi-row insert (see platform/db/rowsets.ts). */
export function eventRow(tenant: Emitter, input: EventInput, now: Date): Record<(typeof EVENT_COLUMNS)[number], unknown> {
  const e = eventFields(tenant, input, now);
  return {
    id: e.id, organization_id: e.organizationId, mode: e.mode, type: e.type, resource_type: e.resourceType,
    resource_id: e.resourceId, sequence: e.sequence, data: e.data, created_at: e.createdAt, trace_parent: e.traceParent,
  };
}
