/**
 * The organization states bench/run.ts measures SMS acceptance in besides plain test mode: live mode
 * paid from credits (issue 17) and HIPAA mode on (issue 18), each judged against test mode.
 */
import type pg from 'pg';
import { call, runNode, sleep } from './support.ts';

/** Issue 17: accepted live-mode SMS per second (each past the included pool: a ledger reservation) over test mode's. */
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

/**
 * The live scenario's organization: business plan, its current period's included messages spent
 * (as if a month of sends had used them), so each live send reserves its price.
 */
export async function createPaidOrganization(env: NodeJS.ProcessEnv): Promise<{ organization_id: string; live_api_key: string }> {
  const out = await runNode(['src/admin.ts', 'org', 'create', '--name', 'Bench paid', '--plan', 'business', '--json'], env);
  return JSON.parse(out.trim().split('\n').pop()!) as { organization_id: string; live_api_key: string };
}

/** What `spendIncludedMessages` marks as used (subtracted when the bench counts pooled sends). */
export const SPENT_POOL_UNITS = 100_000_000;

/** Marks the live account's included messages of its current period as used (after `fundLiveSends`, which makes sure the account exists). */
export async function spendIncludedMessages(db: pg.Client, organizationId: string): Promise<void> {
  const r = await db.query(`insert into billing_pool_usage (organization_id, mode, quota, period_start, used)
      select organization_id, mode, 'messages', current_period_start, $2 from billing_accounts where organization_id = $1 and mode = 'live'
      on conflict (organization_id, mode, quota, period_start) do update set used = excluded.used`, [organizationId, SPENT_POOL_UNITS]);
  if (r.rowCount !== 1) throw new Error(`no live billing account for ${organizationId}`);
}

/**
 * The HIPAA scenario's organization: enterprise like the bench's own, so its sends run beside the
 * plain ones round by round (the mode is turned on with `enableHipaa` and stays on).
 */
export async function createHipaaOrganization(env: NodeJS.ProcessEnv): Promise<{ organization_id: string; test_api_key: string; live_api_key: string }> {
  const out = await runNode(['src/admin.ts', 'org', 'create', '--name', 'Bench HIPAA', '--plan', 'enterprise', '--json'], env);
  return JSON.parse(out.trim().split('\n').pop()!) as { organization_id: string; test_api_key: string; live_api_key: string };
}

/** Issue 18: accepted SMS per second with HIPAA mode on, over the same with it off. */
export const TARGET_HIPAA = 0.9;

/** Signs the BAA, names a compliance officer and turns HIPAA mode on for an organization (with its live owner key: a test-mode key may not change them). */
export async function enableHipaa(port: number, ownerKey: string): Promise<void> {
  const headers = { 'X-API-Key': ownerKey, 'Content-Type': 'application/json' };
  const baa = await call(port, 'PUT', '/v1/settings/hipaa/baa', headers, JSON.stringify({ status: 'signed', signed_date: '2026-11-01' }));
  const on = await call(port, 'PUT', '/v1/settings/hipaa', headers, JSON.stringify({ enabled: true, compliance_officer: { name: 'Bench Officer', email: 'officer@bench.test' } }));
  if (baa.status !== 200 || on.status !== 200) throw new Error(`enabling HIPAA mode failed: ${baa.status} ${on.status} ${on.body.slice(0, 300)}`);
  // Every instance sees the mode within HIPAA_MODE_CACHE_MS (1 s).
  await sleep(1500);
}

