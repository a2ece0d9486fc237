/** Records billable usage. Call inside the transaction of the change that consumed the unit. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../ids.ts';
import type { Scope } from '../auth/scope.ts';
import { UsageEntry } from './usage.entities.ts';

export type UsageInput = {
  context: string;
  kind: string;
  quantity: number;
  resourceId?: string | null;
  /** Stable per consumed unit (e.g. `msg_…:segments`): a retried job records it once. */
  idempotencyKey: string;
};

/**
 * Inserts the entry now, in the EntityManager's current transaction if it has one; an entry with
 * the same idempotency key already recorded makes this a no-op (returns false).
 */
export async function recordUsage(em: EntityManager, scope: Pick<Scope, 'organizationId' | 'mode'>, input: UsageInput, now: Date): Promise<boolean> {
  const result = await em.getConnection().execute(
    `insert into usage_entries (id, organization_id, mode, context, kind, quantity, resource_id, idempotency_key, created_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (idempotency_key) do nothing`,
    [newId('use', now.getTime()), scope.organizationId, scope.mode, input.context, input.kind, input.quantity, input.resourceId ?? null, input.idempotencyKey, now],
    'run',
    em.getTransactionContext(),
  );
  return (result as { affectedRows?: number }).affectedRows === 1;
}

/** The usage_entries columns written by {@link usageRow}. */
export const USAGE_COLUMNS = ['id', 'organization_id', 'mode', 'context', 'kind', 'quantity', 'resource_id', 'idempotency_key', 'created_at'] as const;

/**
 * The same entry as a row for a group commit's multi-row insert; insert it with
 * `on conflict (idempotency_key) do nothing` ({@link USAGE_ON_CONFLICT}) as recordUsage does.
 */
export function usageRow(scope: Pick<Scope, 'organizationId' | 'mode'>, input: UsageInput, now: Date): Record<(typeof USAGE_COLUMNS)[number], unknown> {
  return {
    id: newId('use', now.getTime()), organization_id: scope.organizationId, mode: scope.mode, context: input.context, kind: input.kind,
    quantity: input.quantity, resource_id: input.resourceId ?? null, idempotency_key: input.idempotencyKey, created_at: now,
  };
}

export const USAGE_ON_CONFLICT = 'on conflict (idempotency_key) do nothing';

export { UsageEntry };
