/**
 * Messages carry `price` and `price_unit` (GraphQL `price`, `priceUnit`): what the ledger charged
 * for them, an integer in the smallest currency unit (cents, as the billing API's amounts) and the
 * currency code; null until the charge is captured and for messages never charged (test mode). Over
 * REST and GraphQL, against live email sends paid from credits (a local SMTP server takes them).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRICE_TABLE } from '../src/modules/billing/billing.plans.ts';
import { eventually } from './helpers/assertions.ts';
import { liveOrgWithBalance, startPayingApp } from './helpers/billing.ts';
import type { TestApp } from './helpers/testApp.ts';

let t: TestApp;

beforeAll(async () => {
  t = await startPayingApp({ env: { DB_POOL_SIZE: '6' } });
});
afterAll(async () => { await t?.close(); });

const MESSAGE = 'query($id: ID!) { message(id: $id) { id price priceUnit } }';

describe('a message\'s price', () => {
  it('is what the ledger charged once the send is captured, in cents, over REST and GraphQL', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 50);
    const sent = await t.rest('POST', '/v1/messages/email', { key: o.liveKey, body: { from: o.sender, to: ['reader@example.com', 'second@example.com'], subject: 'Hi', text: 'Hello' } });
    expect(sent.status, sent.text).toBe(201);
    // Accepted, reserved, not yet charged.
    expect(sent.body.data).toMatchObject({ price: null, price_unit: null });
    const id = sent.body.data.id as string;
    const charged = 2 * PRICE_TABLE.growth['email.recipient'];
    const got = await eventually('the charge captured', async () => {
      const r = await t.rest('GET', `/v1/messages/${id}`, { key: o.liveKey });
      return r.body.data.price !== null ? r : undefined;
    }, 20_000);
    expect(got.body.data).toMatchObject({ id, price: charged, price_unit: 'usd' });
    // The ledger agrees: the balance went down by exactly that.
    expect((await t.rest('GET', '/v1/billing/credits', { key: o.liveKey })).body.data.balance).toBe(50 - charged);
    // The list carries it too, and GraphQL.
    const list = await t.rest('GET', '/v1/messages?channel=email', { key: o.liveKey });
    expect(list.body.data.find((m: any) => m.id === id)).toMatchObject({ price: charged, price_unit: 'usd' });
    const gql = await t.gql(MESSAGE, { id }, { key: o.liveKey });
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data.message).toEqual({ id, price: charged, priceUnit: 'usd' });
    const listed = await t.gql('{ messages(first: 10, channel: email) { edges { node { id price priceUnit } } } }', {}, { key: o.liveKey });
    expect(listed.body.data.messages.edges.map((e: any) => e.node)).toContainEqual({ id, price: charged, priceUnit: 'usd' });
  }, 60_000);

  it('stays null in test mode, where nothing is charged', async () => {
    const o = await t.createOrg('growth');
    const sent = await t.rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: '+14155550100', body: 'Hello' } });
    expect(sent.status, sent.text).toBe(201);
    const id = sent.body.data.id as string;
    await eventually('delivered', async () => ((await t.rest('GET', `/v1/messages/${id}`, { key: o.testKey })).body.data.status === 'delivered' ? true : undefined), 20_000);
    const got = await t.rest('GET', `/v1/messages/${id}`, { key: o.testKey });
    expect(got.body.data).toMatchObject({ status: 'delivered', price: null, price_unit: null });
    const gql = await t.gql(MESSAGE, { id }, { key: o.testKey });
    expect(gql.body.data.message).toEqual({ id, price: null, priceUnit: null });
  }, 60_000);
});
