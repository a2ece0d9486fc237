/**
 * Moving a tenant's plan: the billing account's `plan_id` (the subscription `GET /v1/billing/plan`
 * shows) and the organization's plan of that mode (`organizations.plan` live, `test_plan` test:
 * what the mode's keys act on — rate limits, quotas, HIPAA's plan check) change in one
 * transaction, with one `billing.subscription_updated` event; every instance drops its cached
 * credentials at commit (`notifyAuthChanged`), so the next request runs on the new plan. Used by a
 * completed checkout or a provider's subscription update (billing.service.ts), an owner's plan
 * change (`PUT /v1/billing/plan`) and the operator's `npm run -s admin -- org plan`.
 */
import { LockMode } from '@mikro-orm/core';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import { notifyAuthChanged } from '../../platform/auth/authenticate.ts';
import { sqlQuery, type sqlClient } from '../../platform/db/sql.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { planColumn, type Plan } from '../../platform/tenancy/tenancy.entities.ts';
import { BillingAccount, type SubscriptionState } from './billing.entities.ts';

export function dbOf(em: EntityManager): ReturnType<typeof sqlClient> | Transaction<unknown> {
  return (em.getTransactionContext() as Transaction<unknown> | undefined) ?? em.getConnection().getClient<unknown>();
}

/**
 * Sets the organization's plan of `tenant.mode` in `tx`; returns whether it changed (then every
 * instance's credential cache is cleared at commit; call the service's `authChanged` after it).
 */
export async function moveOrganizationPlan(tx: EntityManager, tenant: TenantRef, plan: Plan, now: Date): Promise<boolean> {
  const column = planColumn(tenant.mode);
  const moved = await sqlQuery(dbOf(tx), `update organizations set ${column} = $2, updated_at = $3 where id = $1 and ${column} <> $2 returning id`,
    [tenant.organizationId, plan, now]);
  if (moved.length === 0) return false;
  await notifyAuthChanged(tx);
  return true;
}

/** The subscription as it was before a change (for the event's `previous_*`). */
export type SubscriptionBefore = { plan: Plan; status: SubscriptionState };

/** `billing.subscription_updated` for the account as it is now in `tx` (its `sequence` already moved). */
export function emitSubscriptionUpdated(tx: EntityManager, tenant: TenantRef, a: BillingAccount, before: SubscriptionBefore, now: Date): void {
  emitEvent(tx, tenant, {
    type: 'billing.subscription_updated', resourceType: 'subscription', resourceId: a.subscriptionId ?? tenant.organizationId, sequence: a.sequence,
    data: {
      plan_id: a.planId, previous_plan_id: before.plan, status: a.status, previous_status: before.status, cancel_at_period_end: a.cancelAtPeriodEnd,
      current_period_start: a.currentPeriodStart.toISOString(), current_period_end: a.currentPeriodEnd.toISOString(),
    },
  }, now);
}

/**
 * Puts a tenant on `plan` in `tx`: the account (locked) when it exists — its `subscriptionEventAt`
 * set to `eventAt` when given, so a provider event about the same change that is not newer is
 * ignored — and the organization's plan of the mode. Returns whether the organization's plan
 * changed (then call `authChanged` after the commit).
 */
export async function putOnPlan(tx: EntityManager, tenant: TenantRef, plan: Plan, now: Date, eventAt?: Date): Promise<boolean> {
  const a = await tx.findOne(BillingAccount, { organizationId: tenant.organizationId, mode: tenant.mode }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
  if (a && a.planId !== plan) {
    const before = { plan: a.planId, status: a.status };
    a.planId = plan;
    if (eventAt) a.subscriptionEventAt = eventAt;
    a.sequence += 1;
    a.updatedAt = now;
    await tx.flush();
    emitSubscriptionUpdated(tx, tenant, a, before, now);
  }
  return moveOrganizationPlan(tx, tenant, plan, now);
}

/**
 * The operator's plan change (`npm run -s admin -- org plan`): no payment provider is asked — the
 * operator's word is the contract (custom pricing included). Returns the modes whose plan changed.
 */
export async function operatorSetPlan(orm: MikroORM, organizationId: string, modes: readonly TenantRef['mode'][], plan: Plan, now: Date): Promise<TenantRef['mode'][]> {
  const changed: TenantRef['mode'][] = [];
  for (const mode of modes) {
    const tenant = { organizationId, mode };
    const moved = await tenantEm(orm, tenant).transactional((tx) => putOnPlan(tx, tenant, plan, now));
    if (moved) changed.push(mode);
  }
  return changed;
}
