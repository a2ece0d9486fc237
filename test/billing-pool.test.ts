/**
 * The plan's included messages are not paid from credits (issue 17: "beyond an included quota …
 * overage is billed from credits"): a live send the billing period's pool still covers takes a unit
 * from it (1 per message, 1 per email recipient) and reserves nothing; past the pool sends are
 * charged as before. Exact under concurrency (the pool is taken in the statement that accepts the
 * sends); an unlimited pool (enterprise) never charges; a new period starts a new pool. Live email
 * goes to a local SMTP server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemScope } from '../src/platform/auth/scope.ts';
import { includedOf } from '../src/modules/billing/billing.plans.ts';
import type { TestApp } from './helpers/testApp.ts';
import { expectError } from './helpers/assertions.ts';
import { liveOrgWithBalance, startPayingApp } from './helpers/billing.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startPayingApp({ workers: false });
});
afterAll(async () => { await t?.close(); });

const GROWTH_INCLUDED = includedOf('growth', 'messages');
async function state(orgId: string) {
  const { rows } = await t.db.query(
    `select (select balance::int from billing_accounts where organization_id = $1 and mode = 'live') as balance,
            (select coalesce(sum(used), 0)::int from billing_pool_usage where organization_id = $1 and mode = 'live' and quota = 'messages') as used,
            (select count(*)::int from credit_ledger_entries where organization_id = $1 and mode = 'live' and kind = 'reservation' and idempotency_key like 'msg_%') as reservations`, [orgId]);
  return rows[0] as { balance: number; used: number; reservations: number };
}
const setUsed = (orgId: string, used: number) => t.db.query(
  `insert into billing_pool_usage (organization_id, mode, quota, period_start, used)
     select organization_id, mode, 'messages', current_period_start, $2 from billing_accounts where organization_id = $1 and mode = 'live'
   on conflict (organization_id, mode, quota, period_start) do update set used = excluded.used`, [orgId, used]);
const email = (key: string, sender: string, to: string | string[] = 'a@example.com') => t.rest('POST', '/v1/messages/email', { key, body: { from: sender, to, subject: 'Hi', text: 'hi' } });

describe('the included messages pool', () => {
  it('a send inside the pool reserves nothing, even with no credit: it takes a unit (1 per email recipient)', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 0, undefined, 'fresh');
    expect((await email(o.liveKey, o.sender)).status).toBe(201);
    expect((await email(o.liveKey, o.sender, ['a@example.com', 'b@example.com', 'c@example.com'])).status).toBe(201);
    expect(await state(o.orgId)).toEqual({ balance: 0, used: 4, reservations: 0 });
  });

  it('exact at the edge under concurrency: with 3 left and credit for 2, 12 concurrent sends → 5 accepted (3 pooled, 2 paid), 7 × 402', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 2, undefined, 'fresh'); // growth: 1 per email recipient
    await setUsed(o.orgId, GROWTH_INCLUDED - 3);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => email(o.liveKey, o.sender, `r${i}@example.com`)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(5);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 402, 'INSUFFICIENT_CREDITS');
    expect(await state(o.orgId)).toEqual({ balance: 0, used: GROWTH_INCLUDED, reservations: 2 });
    expect((await t.db.query(`select count(*)::int as n from messages where organization_id = $1 and mode = 'live'`, [o.orgId])).rows[0].n).toBe(5);
  });

  it('sends made inside another context\'s transaction and campaign batches use the same pool (reserveSend, takePool)', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 10, undefined, 'fresh');
    await setUsed(o.orgId, GROWTH_INCLUDED - 2);
    const scope = systemScope(o.orgId, 'live', 'growth', 'req_test');
    const credits = t.app.services.credits;
    expect(await credits.reserveSend(scope, { amount: 1, key: 'msg_pool_1', units: 1 })).toBeNull();
    expect(await credits.takePool(scope, 'messages', [1, 1, 1])).toBe(1); // one unit left, then the pool is spent
    const paid = await credits.reserveSend(scope, { amount: 1, key: 'msg_pool_2', units: 1 });
    expect(paid?.reservationId).toMatch(/^cle_/);
    expect(await state(o.orgId)).toMatchObject({ balance: 9, used: GROWTH_INCLUDED });
  });

  it('an unlimited pool (enterprise) takes everything; a new billing period starts a new pool', async () => {
    expect(includedOf('enterprise', 'messages')).toBe(-1);
    const u = await liveOrgWithBalance(t, 'growth', 0, undefined, 'spent');
    // Enterprise accounts are set up by sales (no checkout): the pool function is asked directly with its unlimited -1.
    expect((await t.db.query(`select credits_take_pool($1, 'live', 'messages', array[5, 5, 5]::bigint[], -1) as n`, [u.orgId])).rows[0].n).toBe(3);

    const o = await liveOrgWithBalance(t, 'growth', 0, undefined, 'spent');
    expectError(await email(o.liveKey, o.sender), 402, 'INSUFFICIENT_CREDITS');
    await t.db.query(`update billing_accounts set current_period_start = current_period_end, current_period_end = current_period_end + interval '1 month' where organization_id = $1 and mode = 'live'`, [o.orgId]);
    expect((await email(o.liveKey, o.sender)).status).toBe(201);
    expect(await state(o.orgId)).toMatchObject({ balance: 0, reservations: 0 });
  });
});
