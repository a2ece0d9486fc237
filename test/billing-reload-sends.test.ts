/**
 * Auto-reload after paid message sends, over HTTP against the real database with workers (live
 * email through a local SMTP server, payments through the sandbox): the group commit's debit marks
 * the account when it crosses the threshold and the reload job is enqueued right after the commit,
 * as every other debit does, once however many concurrent sends cross together. The minute's
 * sweeper is taken out of this file's database, so only the send path can reload here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTO_RELOAD_SWEEP_JOB } from '../src/modules/billing/credits.service.ts';
import type { TestApp } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';
import { liveOrgWithBalance, startPayingApp } from './helpers/billing.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startPayingApp();
  // No sweeper: its schedule and any sweep already queued are removed.
  await t.db.query('delete from pgboss.schedule where name = $1', [AUTO_RELOAD_SWEEP_JOB]);
  await t.db.query(`delete from pgboss.job where name = $1 and state in ('created', 'retry')`, [AUTO_RELOAD_SWEEP_JOB]);
});
afterAll(async () => { await t?.close(); });

async function account(orgId: string) {
  const { rows } = await t.db.query(`select balance::int as balance, auto_reload_token as token,
      (select count(*)::int from credit_ledger_entries where organization_id = $1 and mode = 'live' and kind = 'topup') as topups,
      (select coalesce(sum(amount), 0)::int from credit_ledger_entries where organization_id = $1 and mode = 'live') as sum
    from billing_accounts where organization_id = $1 and mode = 'live'`, [orgId]);
  return rows[0] as { balance: number; token: string | null; topups: number; sum: number };
}

describe('auto-reload on message sends', () => {
  it('16 concurrent sends crossing the threshold: one reload, enqueued by the sends themselves', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 20); // growth: 1 per email recipient
    const put = await t.rest('PUT', '/v1/billing/credits/auto-reload', { key: o.liveKey, body: { enabled: true, threshold: 10, amount: 500 } });
    expect(put.status, put.text).toBe(200);
    expect((await account(o.orgId)).topups).toBe(1);
    const sends = await Promise.all(Array.from({ length: 16 }, (_, i) =>
      t.rest('POST', '/v1/messages/email', { key: o.liveKey, body: { from: o.sender, to: [`reader${i}@example.com`], subject: 'Hi', text: 'Hello' } })));
    for (const r of sends) expect(r.status, r.text).toBe(201);
    const reloaded = await eventually('the reload', async () => {
      const a = await account(o.orgId);
      return a.topups === 2 && a.token === null ? a : undefined;
    }, 15_000);
    expect(reloaded).toEqual({ balance: 20 - 16 + 500, token: null, topups: 2, sum: 20 - 16 + 500 });
    const { rows } = await t.db.query(`select count(*)::int as n from pgboss.job where name = 'billing.auto-reload' and data->'tenant'->>'organizationId' = $1`, [o.orgId]);
    expect(rows[0].n).toBe(1);
    // More sends above the threshold now: no further reload.
    for (let i = 0; i < 3; i++) {
      expect((await t.rest('POST', '/v1/messages/email', { key: o.liveKey, body: { from: o.sender, to: [`late${i}@example.com`], subject: 'Hi', text: 'Hello' } })).status).toBe(201);
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(await account(o.orgId)).toMatchObject({ balance: 20 - 19 + 500, topups: 2 });
  });
});
