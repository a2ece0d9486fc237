/**
 * Plain SQL over `campaign_recipients` (the frozen audience), always inside the caller's
 * transaction. A row is keyed by (campaign_id, seq) and unique per address; its status moves once
 * from pending to sent, skipped, failed or cancelled, guarded by `status = 'pending'` under a row lock.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import { prepared, sqlQuery } from '../../platform/db/sql.ts';
import { genericArrays } from '../../platform/db/plans.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { StoredVars } from './campaigns.phi.ts';

export type RecipientStatus = 'pending' | 'sent' | 'skipped' | 'failed' | 'cancelled';
export type WaitReason = 'quiet_hours' | 'ab_test_winner';

export type NewRecipient = {
  seq: number; contactId: string; address: string | null; variant: string | null;
  status: 'pending' | 'skipped'; reason: string | null; waitReason: WaitReason | null; vars: StoredVars;
};

/** `vars` as stored: sealed in HIPAA mode (campaigns.phi.ts `openVars`). */
export type PendingRecipient = { seq: number; contactId: string; address: string; variant: string | null; vars: StoredVars };
export type RecipientOutcome = { seq: number; status: RecipientStatus; reason: string | null; messageId: string | null; waitReason?: WaitReason | null; notBefore?: Date | null };

/**
 * One statement in the EntityManager's transaction (or on its pool): `?` placeholders, arrays bind
 * as PostgreSQL arrays (MikroORM's own `execute` would expand them into lists).
 */
export async function sql<R = Record<string, unknown>>(tx: EntityManager, text: string, params: readonly unknown[]): Promise<R[]> {
  let n = 0;
  return run<R>(tx, text.replace(/\?/g, () => `$${++n}`), params);
}

/** One statement with `$1`, `$2`, … placeholders, as {@link sql}. */
function run<R>(tx: EntityManager, text: string, params: readonly unknown[]): Promise<R[]> {
  const db = tx.getTransactionContext<Transaction<unknown>>() ?? tx.getConnection().getClient<unknown>();
  return sqlQuery<R>(db, text, params);
}

const INSERT_CHUNK = 5000;

export async function insertRecipients(tx: EntityManager, tenant: TenantRef, campaignId: string, rows: readonly NewRecipient[]): Promise<void> {
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    const chunk = rows.slice(i, i + INSERT_CHUNK);
    await sql(tx, `insert into campaign_recipients (campaign_id, seq, organization_id, mode, contact_id, address, variant, status, reason, wait_reason, vars)
      select ?, r.seq, ?, ?, r.contact_id, r.address, r.variant, r.status, r.reason, r.wait_reason, r.vars
        from unnest(?::int[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::jsonb[])
          as r(seq, contact_id, address, variant, status, reason, wait_reason, vars)
      on conflict do nothing`, [
      campaignId, tenant.organizationId, tenant.mode,
      chunk.map((r) => r.seq), chunk.map((r) => r.contactId), chunk.map((r) => r.address), chunk.map((r) => r.variant),
      chunk.map((r) => r.status), chunk.map((r) => r.reason), chunk.map((r) => r.waitReason), chunk.map((r) => JSON.stringify(r.vars)),
    ]);
  }
}

/** Pending, not waiting rows of a campaign (optionally a seq range), in seq order. */
export async function pendingSeqs(tx: EntityManager, campaignId: string): Promise<number[]> {
  const rows = await sql<{ seq: number }>(tx, `select seq from campaign_recipients where campaign_id = ? and status = 'pending' and wait_reason is null order by seq`, [campaignId]);
  return rows.map((r) => r.seq);
}

/**
 * A batch's pending rows, locked: $1 campaign, $2 and $3 the seq range. A prepared statement of
 * every batch (sql.ts `prepared`), like {@link RECORD_OUTCOMES_SQL} and {@link HAS_PENDING_SQL};
 * exported for test/messaging-plans.test.ts, which checks their generic plans. The campaign and
 * the range (and the outcomes' arrays) are read through sub-selects (platform/db/plans.ts
 * `genericArrays`): with the values known, the custom plans looked cheaper than the generic one
 * and four batches in five were planned again (a 100,000-recipient drain, session 13).
 */
export const LOCK_PENDING_SQL = prepared(`select seq, contact_id, address, variant, vars from campaign_recipients
      where campaign_id = ${genericArrays(['$1::text'])} and seq between ${genericArrays(['$2::int'])} and ${genericArrays(['$3::int'])} and status = 'pending' and wait_reason is null
      order by seq for update`);

/** Locks the batch's pending rows (waiting until a concurrent run of the same batch commits or rolls back). */
export async function lockPending(tx: EntityManager, campaignId: string, from: number, to: number): Promise<PendingRecipient[]> {
  const rows = await run<{ seq: number; contact_id: string; address: string; variant: string | null; vars: StoredVars | string }>(tx, LOCK_PENDING_SQL, [campaignId, from, to]);
  return rows.map((r) => ({ seq: r.seq, contactId: r.contact_id, address: r.address, variant: r.variant, vars: typeof r.vars === 'string' ? JSON.parse(r.vars) : r.vars }));
}

/**
 * The batch's outcomes in one statement. The seq range bounds the rows the plan may read: a new
 * campaign's rows are unknown to the table's statistics (rows of a campaign_id estimated at one),
 * and without the range the planner hashed the whole campaign's rows for every batch (an index
 * scan of every recipient: 30 ms per batch of 50 at 30,000 recipients, growing with the campaign).
 * Exported for test/messaging-plans.test.ts.
 */
export const RECORD_OUTCOMES_SQL = prepared(`update campaign_recipients r set status = o.status, reason = o.reason, message_id = o.message_id,
      wait_reason = o.wait_reason, not_before = o.not_before, processed_at = case when o.status = 'pending' then null else $1::timestamptz end
      from unnest(${genericArrays(['$2::int[]', '$3::text[]', '$4::text[]', '$5::text[]', '$6::text[]', '$7::timestamptz[]'])}) as o(seq, status, reason, message_id, wait_reason, not_before)
     where r.campaign_id = ${genericArrays(['$8::text'])} and r.seq between ${genericArrays(['$9::int'])} and ${genericArrays(['$10::int'])} and r.seq = o.seq and r.status = 'pending'`);

export async function recordOutcomes(tx: EntityManager, campaignId: string, outcomes: readonly RecipientOutcome[], now: Date): Promise<void> {
  if (outcomes.length === 0) return;
  const seqs = outcomes.map((o) => o.seq);
  await run(tx, RECORD_OUTCOMES_SQL, [
    now, seqs, outcomes.map((o) => o.status), outcomes.map((o) => o.reason), outcomes.map((o) => o.messageId),
    outcomes.map((o) => o.waitReason ?? null), outcomes.map((o) => o.notBefore ?? null), campaignId, Math.min(...seqs), Math.max(...seqs),
  ]);
}

/** Messages sent to each address (of `addresses`) by any campaign of the tenant since `since`. */
export async function recentSends(tx: EntityManager, tenant: TenantRef, addresses: readonly string[], since: Date): Promise<Map<string, number>> {
  if (addresses.length === 0) return new Map();
  const rows = await sql<{ address: string; n: number }>(tx,
    `select address, count(*)::int as n from campaign_recipients
      where organization_id = ? and mode = ? and status = 'sent' and address = any(?::text[]) and processed_at > ?
      group by address`, [tenant.organizationId, tenant.mode, [...addresses], since]);
  return new Map(rows.map((r) => [r.address, Number(r.n)]));
}

/** Whether the campaign ($1) still has a pending recipient (after every batch). */
export const HAS_PENDING_SQL = prepared(`select 1 from campaign_recipients where campaign_id = $1 and status = 'pending' limit 1`);

export async function hasPending(tx: EntityManager, campaignId: string): Promise<boolean> {
  const rows = await run(tx, HAS_PENDING_SQL, [campaignId]);
  return rows.length > 0;
}

/** Frees the rows whose quiet hours are over; returns their seqs. */
export async function releaseDeferred(tx: EntityManager, campaignId: string, now: Date): Promise<{ released: number[]; next: Date | null }> {
  const released = await sql<{ seq: number }>(tx,
    `update campaign_recipients set wait_reason = null, not_before = null
      where campaign_id = ? and status = 'pending' and wait_reason = 'quiet_hours' and not_before <= ? returning seq`, [campaignId, now]);
  const next = await sql<{ at: string | Date | null }>(tx,
    `select min(not_before) as at from campaign_recipients where campaign_id = ? and status = 'pending' and wait_reason = 'quiet_hours'`, [campaignId]);
  const at = next[0]?.at;
  return { released: released.map((r) => r.seq).sort((a, b) => a - b), next: at ? new Date(at) : null };
}
