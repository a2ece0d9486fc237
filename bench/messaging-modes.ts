/**
 * The organization states bench/run.ts measures SMS acceptance in besides plain test mode: live mode
 * paid from credits (issue 17) and HIPAA mode on (issue 18), each judged against test mode.
 */
import type pg from 'pg';
import { call, sleep } from './support.ts';

/** Issue 17: accepted live-mode SMS per second (each through the billing statement: the included pool or a reservation) over test mode's. */
export const TARGET_LIVE = 0.9;

/**
 * The live scenario's account: an SMS sender for live mode and a balance no run can spend (an
 * `adjustment` entry, so the ledger still sums to the balance).
 */
export async function fundLiveSends(port: number, db: pg.Client, organizationId: string, liveOwnerKey: string): Promise<void> {
  const sender = await call(port, 'POST', '/v1/messages/senders', { 'X-API-Key': liveOwnerKey, 'Content-Type': 'application/json' }, JSON.stringify({ channel: 'sms', address: '+15005550006' }));
  if (sender.status !== 201) throw new Error(`live sender: ${sender.status} ${sender.body.slice(0, 300)}`);
  const credits = await call(port, 'GET', '/v1/billing/credits', { 'X-API-Key': liveOwnerKey });
  if (credits.status !== 200) throw new Error(`live billing account: ${credits.status} ${credits.body.slice(0, 300)}`);
  const amount = 1_000_000_000;
  await db.query(`insert into credit_ledger_entries (id, organization_id, mode, kind, amount, description, created_at)
    values ('cle_bench_' || $1, $1, 'live', 'adjustment', $2, 'bench funding', now())`, [organizationId, amount]);
  await db.query(`update billing_accounts set balance = balance + $2, status = 'active' where organization_id = $1 and mode = 'live'`, [organizationId, amount]);
}

/** Issue 18: accepted SMS per second with HIPAA mode on, over the same with it off. */
export const TARGET_HIPAA = 0.9;

/** Signs the BAA, names a compliance officer and turns HIPAA mode on for the bench organization. */
export async function enableHipaa(port: number, ownerKey: string): Promise<void> {
  const headers = { 'X-API-Key': ownerKey, 'Content-Type': 'application/json' };
  const baa = await call(port, 'PUT', '/v1/settings/hipaa/baa', headers, JSON.stringify({ status: 'signed', signed_date: '2026-11-01' }));
  const on = await call(port, 'PUT', '/v1/settings/hipaa', headers, JSON.stringify({ enabled: true, compliance_officer: { name: 'Bench Officer', email: 'officer@bench.test' } }));
  if (baa.status !== 200 || on.status !== 200) throw new Error(`enabling HIPAA mode failed: ${baa.status} ${on.status} ${on.body.slice(0, 300)}`);
  // Every instance sees the mode within HIPAA_MODE_CACHE_MS (1 s).
  await sleep(1500);
}

