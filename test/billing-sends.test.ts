/**
 * Live-mode sends paid from the credit ledger, over HTTP against the real database with workers
 * (live email through a local SMTP server; payments through the sandbox): the price is reserved in
 * the transaction that accepts the message, so 64 concurrent senders on a balance that covers
 * exactly N messages get exactly N accepted and the rest 402 INSUFFICIENT_CREDITS, with the balance
 * at 0 and the ledger summing to it; a failed send gives its reservation back; a starter plan past
 * its included messages answers 429 QUOTA_EXCEEDED; test mode never touches the ledger.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from './helpers/testApp.ts';
import { eventually, expectError, expectGqlError } from './helpers/assertions.ts';
import { liveOrgWithBalance, startPayingApp } from './helpers/billing.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startPayingApp({
    smtp: {
      onRcptTo(address, _session, callback) {
        if (address.address.startsWith('reject')) return callback(Object.assign(new Error('no such user'), { responseCode: 550 }));
        return callback();
      },
    },
  });
});
afterAll(async () => { await t?.close(); });

async function ledger(orgId: string) {
  const { rows } = await t.db.query(
    `select (select balance::int from billing_accounts where organization_id = $1 and mode = 'live') as balance,
            (select coalesce(sum(amount), 0)::int from credit_ledger_entries where organization_id = $1 and mode = 'live') as sum,
            (select count(*)::int from credit_ledger_entries where organization_id = $1 and mode = 'live' and kind = 'reservation' and idempotency_key like 'msg_%') as reservations,
            (select count(*)::int from credit_ledger_entries where organization_id = $1 and mode = 'live' and kind = 'release') as releases`, [orgId]);
  return rows[0] as { balance: number; sum: number; reservations: number; releases: number };
}

describe('paid live sends', () => {
  it('64 concurrent senders on a balance that covers exactly 10 emails: 10 accepted, the rest 402, balance 0, ledger consistent', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 10); // growth: 1 per email recipient
    const results = await Promise.all(Array.from({ length: 64 }, (_, i) =>
      t.rest('POST', '/v1/messages/email', { key: o.liveKey, body: { from: o.sender, to: [`reader${i}@example.com`], subject: 'Hi', text: 'Hello' } })));
    const accepted = results.filter((r) => r.status === 201);
    expect(accepted).toHaveLength(10);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 402, 'INSUFFICIENT_CREDITS');
    const l = await ledger(o.orgId);
    expect(l).toMatchObject({ balance: 0, sum: 0, reservations: 10 });
    // Nothing refused was stored.
    const { rows } = await t.db.query(`select count(*)::int as n from messages where organization_id = $1 and mode = 'live'`, [o.orgId]);
    expect(rows[0].n).toBe(10);
    expect((await t.rest('GET', '/v1/billing/credits', { key: o.liveKey })).body.data.balance).toBe(0);
    // The GraphQL twin is refused the same way, and stores nothing either.
    const gql = await t.gql('mutation($i: SendEmailInput!) { sendEmail(input: $i) { id } }',
      { i: { from: o.sender, to: ['late@example.com'], subject: 'Hi', text: 'Hello' } }, { key: o.liveKey });
    expectGqlError(gql, 'INSUFFICIENT_CREDITS');
    expect((await t.db.query(`select count(*)::int as n from messages where organization_id = $1 and mode = 'live'`, [o.orgId])).rows[0].n).toBe(10);
    // An email is final once the SMTP server took it (no delivery report follows): each reservation captured once.
    await eventually('the reservations captured', async () => {
      const { rows: c } = await t.db.query(`select count(*)::int as n from credit_ledger_entries where organization_id = $1 and mode = 'live' and kind = 'capture'`, [o.orgId]);
      return c[0].n === 10 ? true : undefined;
    }, 20_000);
    expect(await ledger(o.orgId)).toMatchObject({ balance: 0, sum: 0, releases: 0 });
  });

  it('a failed send gives its reservation back once; a test-mode send never touches the ledger', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 3);
    const sent = await t.rest('POST', '/v1/messages/email', { key: o.liveKey, body: { from: o.sender, to: ['reject-me@example.com'], subject: 'Hi', text: 'x' } });
    expect(sent.status, sent.text).toBe(201);
    expect((await ledger(o.orgId)).balance).toBe(2);
    await eventually('the send failed', async () => ((await t.rest('GET', `/v1/messages/${sent.body.data.id}`, { key: o.liveKey })).body.data.status === 'failed' ? true : undefined), 20_000);
    await eventually('the reservation released', async () => ((await ledger(o.orgId)).releases === 1 ? true : undefined));
    expect(await ledger(o.orgId)).toMatchObject({ balance: 3, sum: 3, releases: 1 });
    const test = await t.rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: '+14155550100', body: 'free' } });
    expect(test.status).toBe(201);
    const { rows } = await t.db.query(`select count(*)::int as n from credit_ledger_entries where organization_id = $1 and mode = 'test'`, [o.orgId]);
    expect(rows[0].n).toBe(0);
  });

  it('a starter plan past its included messages answers 429 QUOTA_EXCEEDED and stores nothing', async () => {
    const o = await liveOrgWithBalance(t, 'starter', 100);
    await t.db.query(`insert into usage_entries (id, organization_id, mode, context, kind, quantity, resource_id, idempotency_key, created_at)
      select 'use_fixture_' || $1 || '_' || g, $1, 'live', 'messaging', 'email.recipient', 1, null, 'fixture:' || $1 || ':' || g, now() from generate_series(1, 5000) g`, [o.orgId]);
    const refused = expectError(await t.rest('POST', '/v1/messages/email', { key: o.liveKey, body: { from: o.sender, to: ['a@example.com'], subject: 'Hi', text: 'x' } }), 429, 'QUOTA_EXCEEDED');
    expect(refused.error.details).toMatchObject({ quota: 'messages_included', limit: 5000, used: 5000 });
    expect((await ledger(o.orgId)).balance).toBe(100);
  });

  it('a starter plan holds one live agent: the second is 429 QUOTA_EXCEEDED; test mode is not counted', async () => {
    const o = await t.createOrg('starter', 'Agents quota');
    const body = { name: 'Helper', type: 'conversational', model: 'sandbox-1', system_prompt: 'Help.' };
    expect((await t.rest('POST', '/v1/agents', { key: o.liveKey, body })).status).toBe(201);
    const refused = expectError(await t.rest('POST', '/v1/agents', { key: o.liveKey, body }), 429, 'QUOTA_EXCEEDED');
    expect(refused.error.details).toMatchObject({ quota: 'agents', limit: 1 });
    expect((await t.rest('GET', '/v1/agents', { key: o.liveKey })).body.data).toHaveLength(1);
    for (let i = 0; i < 2; i++) expect((await t.rest('POST', '/v1/agents', { key: o.testKey, body })).status).toBe(201);
  });
});
