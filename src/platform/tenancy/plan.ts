/**
 * An organization's plan, read where work runs without a caller (jobs, the SIP gateway, a flow's
 * webhook trigger) to build the system Scope that prices and limits it. Undefined: no such
 * organization.
 */
import { sqlQuery, type PgQueryable } from '../db/sql.ts';
import type { Kysely, Transaction } from 'kysely';
import type { Plan } from './tenancy.entities.ts';

export async function organizationPlan(db: Kysely<unknown> | Transaction<unknown> | PgQueryable, organizationId: string): Promise<Plan | undefined> {
  const [row] = await sqlQuery<{ plan: Plan }>(db, 'select plan from organizations where id = $1', [organizationId]);
  return row?.plan;
}
