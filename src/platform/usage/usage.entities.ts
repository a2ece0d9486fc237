/**
 * Usage entries: one row per billable unit a context consumed (message segments, call minutes,
 * number rentals, agent tokens). Billing reads them later; every context writes them through
 * recordUsage in the same transaction as the change that consumed the unit.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../db/tenant.ts';

export const UsageEntry = defineEntity({
  name: 'UsageEntry',
  tableName: 'usage_entries',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    /** Bounded context that consumed the unit: messaging, voice, numbers, agents, verify, … */
    context: p.string(),
    /** What was consumed, e.g. `sms.segment`, `voice.minute`, `number.monthly`. */
    kind: p.string(),
    quantity: p.integer(),
    resourceId: p.string().nullable(),
    /** Makes recording idempotent: a job that runs twice records once. */
    idempotencyKey: p.string().unique(),
    createdAt: p.datetime(),
  },
});
export type UsageEntry = InferEntity<typeof UsageEntry>;
