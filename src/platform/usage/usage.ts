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

export { UsageEntry };
