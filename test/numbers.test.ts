/**
 * Phone numbers end to end over HTTP, against the real database, pg-boss workers and the sandbox
 * carrier: search (filters, limits, determinism, validity per libphonenumber), buying (errors,
 * usage, one holder across the platform under concurrent purchases), listing, configuring and
 * releasing, owned numbers as messaging senders and inbound routing to sms_webhook_url. Port
 * requests and monthly renewals are in numbers-porting.test.ts.
 */
import { createHmac } from 'node:crypto';
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually, expectError, numbersHelpers, startNumbersApp, type NumbersApp, type Listing, type NumberView } from './helpers/numbers.ts';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { BASE } from './helpers/agents.ts';

const file = useFileApp(startNumbersApp);
let t: TestApp;
let a: TestOrg;
let b: TestOrg;
let receiverUrl = '';
let hitsAt: NumbersApp['hitsAt'];
beforeAll(() => { ({ t, a, b, receiverUrl, hitsAt } = file()); });
const { searchRaw, search, buyRaw, buy, available } = numbersHelpers(() => t, () => a);

/** A new draft agent of the key's organization and mode. */
async function agentOf(key: string): Promise<string> {
  const r = await t.rest('POST', '/v1/agents', { key, body: BASE });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id as string;
}

const LIB_TYPES: Record<string, string[]> = { local: ['FIXED_LINE', 'FIXED_LINE_OR_MOBILE'], mobile: ['MOBILE'], toll_free: ['TOLL_FREE'] };

function expectValidListing(n: Listing): void {
  const parsed = parsePhoneNumberFromString(n.number);
  expect(parsed?.isValid(), n.number).toBe(true);
  expect(parsed?.country).toBe(n.country);
  expect(LIB_TYPES[n.type]).toContain(parsed?.getType());
}

describe('GET /v1/numbers/available', () => {
  it('needs a supported ISO country code', async () => {
    expectError(await t.rest('GET', '/v1/numbers/available', { key: a.testKey }), 422, 'MISSING_REQUIRED_FIELD', 'country');
    for (const country of ['USA', 'XX', '1', '']) expectError(await searchRaw({ country }), 422, 'VALIDATION_ERROR', 'country');
    const lower = await search({ country: 'gb', limit: 3 });
    expect(lower.map((n) => n.country)).toEqual(['GB', 'GB', 'GB']);
  });

  it('answers 20 by default, up to 100; other limits are 400', async () => {
    expect(await search({ country: 'US' })).toHaveLength(20);
    expect(await search({ country: 'US', limit: 5 })).toHaveLength(5);
    const hundred = await search({ country: 'US', limit: 100 });
    expect(hundred).toHaveLength(100);
    expect(new Set(hundred.map((n) => n.number)).size).toBe(100);
    for (const limit of ['0', '101', 'abc', '-1']) expectError(await searchRaw({ country: 'US', limit }), 400, 'VALIDATION_ERROR', 'limit');
    expectError(await searchRaw({ country: 'US', page: 2 }), 400, 'VALIDATION_ERROR');
    expectError(await searchRaw({ country: 'US', foo: 'bar' }), 400, 'VALIDATION_ERROR');
  });

  it('results carry the spec fields and are valid numbers of their country and type', async () => {
    const found = await search({ country: 'US', limit: 30 });
    for (const n of found) {
      expect(Object.keys(n).sort()).toEqual(['capabilities', 'country', 'currency', 'friendly_name', 'monthly_cost', 'number', 'region', 'type']);
      expect(n.monthly_cost).toMatch(/^\d+\.\d{2}$/);
      expect(n.currency).toBe('USD');
      expectValidListing(n);
    }
    expect(new Set(found.map((n) => n.type))).toEqual(new Set(['local', 'toll_free']));
  });

  it('is stable for a query', async () => {
    const q = { country: 'GB', type: 'mobile', contains: '12', limit: 15 };
    const first = await search(q);
    expect(await search(q)).toEqual(first);
    expect(await search({ ...q, limit: 5 })).toEqual(first.slice(0, 5));
  });

  it('filters by type', async () => {
    for (const type of ['local', 'mobile', 'toll_free']) {
      const found = await search({ country: 'GB', type, limit: 10 });
      expect(found).toHaveLength(10);
      for (const n of found) {
        expect(n.type).toBe(type);
        expectValidListing(n);
      }
    }
    expect(await search({ country: 'US', type: 'short_code' })).toEqual([]);
    expect(await search({ country: 'US', type: 'mobile' })).toEqual([]);
    expectError(await searchRaw({ country: 'US', type: 'premium' }), 422, 'VALIDATION_ERROR', 'type');
  });

  it('filters by capabilities (comma-separated, all required)', async () => {
    const found = await search({ country: 'US', capabilities: 'sms,mms', limit: 40 });
    expect(found).toHaveLength(40);
    for (const n of found) expect(n.capabilities).toEqual(expect.arrayContaining(['sms', 'mms']));
    const gb = await search({ country: 'GB', capabilities: 'sms', limit: 10 });
    expect(gb.every((n) => n.type === 'mobile' && n.capabilities.includes('sms'))).toBe(true);
    expect(await search({ country: 'GB', type: 'local', capabilities: 'sms' })).toEqual([]);
    expectError(await searchRaw({ country: 'US', capabilities: 'sms,fax' }), 422, 'VALIDATION_ERROR', 'capabilities.1');
  });

  it('filters by area code', async () => {
    const found = await search({ country: 'US', area_code: '415', limit: 25 });
    expect(found).toHaveLength(25);
    for (const n of found) {
      expect(n.number.startsWith('+1415')).toBe(true);
      expect(n.region).toBe('CA');
      expectValidListing(n);
    }
    expect(await search({ country: 'US', area_code: '999' })).toEqual([]);
    expectError(await searchRaw({ country: 'US', area_code: '4a5' }), 422, 'VALIDATION_ERROR', 'area_code');
  });

  it('filters by a digit pattern with * as one digit (and keypad letters)', async () => {
    const found = await search({ country: 'US', contains: '7*7*7', limit: 20 });
    expect(found).toHaveLength(20);
    for (const n of found) expect(n.number.slice(2)).toMatch(/7\d7\d7/);
    const vanity = await search({ country: 'US', area_code: '206', contains: 'CALL', limit: 5 });
    expect(vanity).toHaveLength(5);
    for (const n of vanity) expect(n.number).toMatch(/^\+1206\d*2255\d*$/);
    expectError(await searchRaw({ country: 'US', contains: '5-5' }), 422, 'VALIDATION_ERROR', 'contains');
  });

  it('does not offer numbers someone holds', async () => {
    const q = { country: 'US', area_code: '312', limit: 3 };
    const before = await search(q);
    await buy({ number: before[0]!.number }, b.testKey);
    const after = await search(q);
    expect(after.map((n) => n.number)).not.toContain(before[0]!.number);
    expect(after.slice(0, 2)).toEqual(before.slice(1));
  });

  it('has a GraphQL twin with the same results', async () => {
    const rest = await search({ country: 'GB', type: 'local', area_code: '20', limit: 4 });
    const gql = await t.gql('query($c: String!) { availableNumbers(country: $c, type: local, areaCode: "20", limit: 4) { number friendlyName country type region capabilities monthlyCost currency } }', { c: 'GB' }, { key: a.testKey });
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data.availableNumbers.map((n: any) => n.number)).toEqual(rest.map((n) => n.number));
    expect(gql.body.data.availableNumbers[0]).toMatchObject({ region: 'London', monthlyCost: rest[0]!.monthly_cost, capabilities: rest[0]!.capabilities });
    const bad = await t.gql('{ availableNumbers(country: "ZZ") { number } }', {}, { key: a.testKey });
    expect(bad.body.errors![0].extensions.code).toBe('VALIDATION_ERROR');
  });

  it('has no live carrier yet: live keys get CHANNEL_UNAVAILABLE', async () => {
    expectError(await searchRaw({ country: 'US' }, a.liveKey), 503, 'CHANNEL_UNAVAILABLE');
    expectError(await buyRaw({ number: '+14155550134' }, a.liveKey), 503, 'CHANNEL_UNAVAILABLE');
  });
});

describe('POST /v1/numbers', () => {
  it('buys a number from search, billed monthly from now', async () => {
    const listing = await available({ area_code: '646' });
    const n = await buy({ number: listing.number });
    expect(n).toMatchObject({
      number: listing.number, country: 'US', type: 'local', region: 'NY', friendly_name: listing.friendly_name, capabilities: listing.capabilities,
      status: 'active', sms_webhook_url: null, voice_webhook_url: null, agent_id: null, voice_route: null, monthly_cost: '1.15', currency: 'USD', source: 'purchased',
    });
    expect(n.id).toMatch(/^num_/);
    expect(n.friendly_name).toMatch(/^\(646\) \d{3}-\d{4}$/);
    const start = new Date(n.billing_period_start!);
    const end = new Date(n.billing_period_end!);
    expect(end.getUTCMonth()).toBe((start.getUTCMonth() + 1) % 12);
    const usage = await t.db.query('select organization_id, mode, context, kind, quantity, idempotency_key from usage_entries where resource_id = $1', [n.id]);
    expect(usage.rows).toEqual([{ organization_id: a.orgId, mode: 'test', context: 'numbers', kind: 'number.monthly', quantity: 1, idempotency_key: `${n.id}:monthly:1` }]);
    const events = await t.db.query('select type, data from events where resource_id = $1', [n.id]);
    expect(events.rows).toEqual([{ type: 'number.purchased', data: expect.objectContaining({ phone_number_id: n.id, number: n.number, status: 'active' }) }]);
    expect((await t.rest('GET', `/v1/numbers/${n.id}`, { key: a.testKey })).body.data).toEqual(n);
  });

  it('takes a friendly name, webhook URLs and an agent', async () => {
    const listing = await available({ area_code: '617' });
    const agentId = await agentOf(a.testKey);
    const n = await buy({
      number: listing.number, friendly_name: 'Support line', sms_webhook_url: `${receiverUrl}/sms`, voice_webhook_url: 'https://hooks.example.com/voice',
      agent_id: agentId,
    });
    expect(n).toMatchObject({ friendly_name: 'Support line', sms_webhook_url: `${receiverUrl}/sms`, voice_webhook_url: 'https://hooks.example.com/voice', agent_id: agentId });
  });

  it('validates the request', async () => {
    expectError(await buyRaw({}), 422, 'MISSING_REQUIRED_FIELD', 'number');
    expectError(await buyRaw({ number: '555-0134' }), 422, 'INVALID_PHONE_NUMBER', 'number');
    const listing = await available({ area_code: '305' });
    expectError(await buyRaw({ number: listing.number, sms_webhook_url: 'http://10.0.0.8/hook' }), 422, 'INVALID_WEBHOOK_URL', 'sms_webhook_url');
    expectError(await buyRaw({ number: listing.number, voice_webhook_url: 'ftp://example.com/x' }), 422, 'INVALID_WEBHOOK_URL', 'voice_webhook_url');
    expectError(await buyRaw({ number: listing.number, agent_id: 'bot-7' }), 422, 'VALIDATION_ERROR', 'agent_id');
    expectError(await buyRaw({ number: listing.number, friendly_name: 'x'.repeat(65) }), 422, 'VALIDATION_ERROR', 'friendly_name');
    // Nothing was bought by the refused requests.
    expect((await t.db.query('select count(*)::int as n from phone_numbers where number = $1', [listing.number])).rows[0].n).toBe(0);
  });

  it('refuses numbers outside the inventory', async () => {
    for (const number of ['+15005550006', '+19005551234']) {
      const res = await buyRaw({ number });
      expectError(res, 409, 'NUMBER_NOT_AVAILABLE', 'number');
      expect(res.body.error.details.reason).toBe('not_in_inventory');
    }
  });

  it('NUMBER_ALREADY_OWNED for this account, NUMBER_NOT_AVAILABLE for another', async () => {
    const listing = await available({ area_code: '702' });
    const n = await buy({ number: listing.number });
    const again = await buyRaw({ number: listing.number });
    expectError(again, 409, 'NUMBER_ALREADY_OWNED', 'number');
    expect(again.body.error.details).toMatchObject({ id: n.id, mode: 'test' });
    const other = await buyRaw({ number: listing.number }, b.testKey);
    expectError(other, 409, 'NUMBER_NOT_AVAILABLE', 'number');
    expect(other.body.error.details.id).toBeUndefined();
  });

  it('two organizations buying the same number at once: exactly one wins', async () => {
    for (let round = 0; round < 4; round++) {
      const listing = await available({ area_code: '213' });
      const [ra, rb] = await Promise.all([buyRaw({ number: listing.number }, a.testKey), buyRaw({ number: listing.number }, b.testKey)]);
      expect([ra.status, rb.status].sort(), `${ra.text} ${rb.text}`).toEqual([201, 409]);
      const loser = ra.status === 409 ? ra : rb;
      expect(loser.body.error.code).toBe('NUMBER_NOT_AVAILABLE');
      const rows = await t.db.query('select organization_id from phone_numbers where number = $1', [listing.number]);
      expect(rows.rows).toHaveLength(1);
      expect(rows.rows[0].organization_id).toBe(ra.status === 201 ? a.orgId : b.orgId);
    }
  });

  it('the same organization buying twice at once: one number, NUMBER_ALREADY_OWNED', async () => {
    const listing = await available({ area_code: '214' });
    const results = await Promise.all([buyRaw({ number: listing.number }), buyRaw({ number: listing.number }), buyRaw({ number: listing.number })]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409]);
    expect(results.filter((r) => r.status === 409).map((r) => r.body.error.code)).toEqual(['NUMBER_ALREADY_OWNED', 'NUMBER_ALREADY_OWNED']);
    expect((await t.db.query('select count(*)::int as n from phone_numbers where number = $1', [listing.number])).rows[0].n).toBe(1);
  });

  it('needs a builder role', async () => {
    const viewer = await t.createKey(a.orgId, 'viewer');
    const listing = await available({ area_code: '215' });
    expectError(await buyRaw({ number: listing.number }, viewer), 403, 'INSUFFICIENT_PERMISSIONS');
    expect((await search({ country: 'US', limit: 1 }, viewer))).toHaveLength(1);
    const developer = await t.createKey(a.orgId, 'developer');
    await buy({ number: listing.number }, developer);
  });

  it('has a GraphQL twin', async () => {
    const listing = await available({ area_code: '206' });
    const res = await t.gql('mutation($n: String!) { buyNumber(input: { number: $n, friendlyName: "GQL", smsWebhookUrl: "https://hooks.example.com/sms" }) { id number friendlyName smsWebhookUrl status monthlyCost capabilities type } }', { n: listing.number }, { key: a.testKey });
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.buyNumber).toMatchObject({ number: listing.number, friendlyName: 'GQL', smsWebhookUrl: 'https://hooks.example.com/sms', status: 'active', monthlyCost: '1.15', type: 'local' });
    const dup = await t.gql('mutation($n: String!) { buyNumber(input: { number: $n }) { id } }', { n: listing.number }, { key: b.testKey });
    expect(dup.body.errors![0].extensions).toMatchObject({ code: 'NUMBER_NOT_AVAILABLE', status: 409 });
  });
});

describe('owned numbers: list, get, update, release', () => {
  let org: TestOrg;
  const owned: NumberView[] = [];
  beforeAll(async () => {
    org = await t.createOrg('enterprise', 'Numbers inventory');
    owned.push(await buy({ number: (await available({ area_code: '503' })).number }, org.testKey));
    owned.push(await buy({ number: (await available({ type: 'toll_free' })).number }, org.testKey));
    owned.push(await buy({ number: (await search({ country: 'GB', type: 'mobile', limit: 1 }))[0]!.number }, org.testKey));
    owned.push(await buy({ number: (await search({ country: 'GB', type: 'local', limit: 1 }))[0]!.number }, org.testKey));
  });

  it('lists the account\'s numbers, newest first, with country and capabilities filters and cursors', async () => {
    const all = await t.rest('GET', '/v1/numbers', { key: org.testKey });
    expect(all.status).toBe(200);
    expect(all.body.data.map((n: NumberView) => n.id)).toEqual([...owned].reverse().map((n) => n.id));
    const gb = await t.rest('GET', '/v1/numbers?country=GB', { key: org.testKey });
    expect(gb.body.data.map((n: NumberView) => n.country)).toEqual(['GB', 'GB']);
    const sms = await t.rest('GET', '/v1/numbers?capabilities=sms', { key: org.testKey });
    expect(sms.body.data.map((n: NumberView) => n.id).sort()).toEqual([owned[0]!.id, owned[1]!.id, owned[2]!.id].sort());
    const gbSms = await t.rest('GET', '/v1/numbers?country=gb&capabilities=sms,voice', { key: org.testKey });
    expect(gbSms.body.data.map((n: NumberView) => n.id)).toEqual([owned[2]!.id]);
    const page1 = await t.rest('GET', '/v1/numbers?limit=3', { key: org.testKey });
    expect(page1.body.data).toHaveLength(3);
    expect(page1.body.meta.pagination.has_more).toBe(true);
    const page2 = await t.rest('GET', `/v1/numbers?limit=3&cursor=${encodeURIComponent(page1.body.meta.pagination.cursor)}`, { key: org.testKey });
    expect(page2.body.data.map((n: NumberView) => n.id)).toEqual([owned[0]!.id]);
    expect(page2.body.meta.pagination.has_more).toBe(false);
    expectError(await t.rest('GET', `/v1/numbers?country=GB&cursor=${encodeURIComponent(page1.body.meta.pagination.cursor)}`, { key: org.testKey }), 400, 'INVALID_CURSOR');
    expectError(await t.rest('GET', '/v1/numbers?capabilities=fax', { key: org.testKey }), 422, 'VALIDATION_ERROR');
    expectError(await t.rest('GET', '/v1/numbers?limit=500', { key: org.testKey }), 400, 'VALIDATION_ERROR');
    expect((await t.rest('GET', '/v1/numbers', { key: org.liveKey })).body.data).toEqual([]);
    const gql = await t.gql('{ phoneNumbers(first: 10, country: "GB", capabilities: [sms]) { edges { node { id number capabilities } } pageInfo { hasNextPage } } }', {}, { key: org.testKey });
    expect(gql.body.data.phoneNumbers.edges.map((e: any) => e.node.id)).toEqual([owned[2]!.id]);
  });

  it('gets one number; another tenant\'s is not found', async () => {
    const res = await t.rest('GET', `/v1/numbers/${owned[1]!.id}`, { key: org.testKey });
    expect(res.body.data).toMatchObject({ id: owned[1]!.id, type: 'toll_free', monthly_cost: '2.15', agent_id: null });
    expectError(await t.rest('GET', `/v1/numbers/${owned[1]!.id}`, { key: a.testKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('GET', `/v1/numbers/${owned[1]!.id}`, { key: org.liveKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('GET', '/v1/numbers/num_01jd0000000000000000000000', { key: org.testKey }), 404, 'NOT_FOUND');
    const gql = await t.gql('query($id: ID!) { phoneNumber(id: $id) { id number region } node(id: $id) { id ... on PhoneNumber { friendlyName } } }', { id: owned[3]!.id }, { key: org.testKey });
    expect(gql.body.data.phoneNumber).toMatchObject({ id: owned[3]!.id, number: owned[3]!.number });
    expect(gql.body.data.node).toEqual({ id: owned[3]!.id, friendlyName: owned[3]!.friendly_name });
  });

  it('PATCH sets fields, null removes them, absent keeps them', async () => {
    const id = owned[0]!.id;
    const agentId = await agentOf(org.testKey);
    const set = await t.rest('PATCH', `/v1/numbers/${id}`, {
      key: org.testKey,
      body: { friendly_name: 'Sales', sms_webhook_url: 'https://hooks.example.com/sms', voice_webhook_url: 'https://hooks.example.com/voice', agent_id: agentId },
    });
    expect(set.status, set.text).toBe(200);
    expect(set.body.data).toMatchObject({ id, friendly_name: 'Sales', sms_webhook_url: 'https://hooks.example.com/sms', voice_webhook_url: 'https://hooks.example.com/voice', agent_id: agentId, status: 'active' });
    expect(new Date(set.body.data.updated_at).getTime()).toBeGreaterThanOrEqual(new Date(owned[0]!.updated_at).getTime());
    const partial = await t.rest('PATCH', `/v1/numbers/${id}`, { key: org.testKey, body: { agent_id: null, voice_webhook_url: null } });
    expect(partial.body.data).toMatchObject({ friendly_name: 'Sales', sms_webhook_url: 'https://hooks.example.com/sms', voice_webhook_url: null, agent_id: null });
    const cleared = await t.rest('PATCH', `/v1/numbers/${id}`, { key: org.testKey, body: { friendly_name: null, sms_webhook_url: null } });
    expect(cleared.body.data).toMatchObject({ friendly_name: owned[0]!.friendly_name, sms_webhook_url: null });
    expectError(await t.rest('PATCH', `/v1/numbers/${id}`, { key: org.testKey, body: { sms_webhook_url: 'http://127.0.0.1.nip.io.invalid:99999/x' } }), 422, 'INVALID_WEBHOOK_URL', 'sms_webhook_url');
    expectError(await t.rest('PATCH', `/v1/numbers/${id}`, { key: org.testKey, body: { agent_id: 'con_01jd0000000000000000000000' } }), 422, 'VALIDATION_ERROR', 'agent_id');
    expectError(await t.rest('PATCH', `/v1/numbers/${id}`, { key: a.testKey, body: { friendly_name: 'x' } }), 404, 'NOT_FOUND');
    const events = await t.db.query(`select count(*)::int as n from events where resource_id = $1 and type = 'number.updated'`, [id]);
    expect(events.rows[0].n).toBe(3);
  });

  it('updateNumber (GraphQL) removes with an explicit null', async () => {
    const id = owned[1]!.id;
    const agentId = await agentOf(org.testKey);
    const set = await t.gql('mutation($id: ID!, $agent: String) { updateNumber(id: $id, input: { smsWebhookUrl: "https://hooks.example.com/a", agentId: $agent }) { smsWebhookUrl agentId } }', { id, agent: agentId }, { key: org.testKey });
    expect(set.body.data.updateNumber).toEqual({ smsWebhookUrl: 'https://hooks.example.com/a', agentId });
    const cleared = await t.gql('mutation($id: ID!) { updateNumber(id: $id, input: { smsWebhookUrl: null }) { smsWebhookUrl agentId } }', { id }, { key: org.testKey });
    expect(cleared.body.data.updateNumber).toEqual({ smsWebhookUrl: null, agentId });
  });

  it('an agent_id must name an agent of the caller\'s organization and mode: else 404 NOT_FOUND and nothing changes', async () => {
    const id = owned[2]!.id;
    const mine = await agentOf(org.testKey);
    expect((await t.rest('PATCH', `/v1/numbers/${id}`, { key: org.testKey, body: { agent_id: mine } })).status).toBe(200);
    const others = await agentOf(b.testKey);
    const liveOne = await agentOf(org.liveKey);
    const events = async () => (await t.db.query(`select count(*)::int as n from events where resource_id = $1 and type = 'number.updated'`, [id])).rows[0].n as number;
    const before = await events();
    for (const agentId of ['agt_01jd0000000000000000000009', others, liveOne]) {
      const r = await t.rest('PATCH', `/v1/numbers/${id}`, { key: org.testKey, body: { friendly_name: 'Hijack', agent_id: agentId } });
      expectError(r, 404, 'NOT_FOUND', 'agent_id');
      expect(r.body.meta.request_id).toMatch(/^req_/);
      const g = await t.gql('mutation($id: ID!, $agent: String) { updateNumber(id: $id, input: { agentId: $agent }) { agentId } }', { id, agent: agentId }, { key: org.testKey });
      expect(g.body.errors?.[0]?.extensions, g.text).toMatchObject({ code: 'NOT_FOUND', status: 404, details: { field: 'agent_id' } });
    }
    expect((await t.rest('GET', `/v1/numbers/${id}`, { key: org.testKey })).body.data).toMatchObject({ agent_id: mine, friendly_name: owned[2]!.friendly_name });
    expect(await events()).toBe(before);
    // Buying with another tenant's agent buys nothing.
    const listing = await available({ area_code: '971' });
    expectError(await buyRaw({ number: listing.number, agent_id: others }, org.testKey), 404, 'NOT_FOUND', 'agent_id');
    expect((await t.db.query('select count(*)::int as n from phone_numbers where number = $1', [listing.number])).rows[0].n).toBe(0);
  });

  it('voice_route: an IVR flow or voicemail box of the caller\'s organization and mode (else 404), or a forward to an E.164 number; null removes it; GraphQL the same', async () => {
    const id = owned[3]!.id;
    const ivr = await t.rest('POST', '/v1/voice/ivr', { key: org.testKey, body: { name: 'Front desk', greeting: 'Hello.', menu: { prompt: 'Press one.', options: [{ key: '1', action: 'hangup' }] } } });
    expect(ivr.status, ivr.text).toBe(201);
    const box = await t.rest('POST', '/v1/voice/voicemail', { key: org.testKey, body: { name: 'After hours' } });
    expect(box.status, box.text).toBe(201);
    const route = async (voice_route: unknown, key = org.testKey) => t.rest('PATCH', `/v1/numbers/${id}`, { key, body: { voice_route } });
    const r1 = await route({ type: 'ivr', ivr_id: ivr.body.data.id });
    expect(r1.status, r1.text).toBe(200);
    expect(r1.body.data.voice_route).toEqual({ type: 'ivr', ivr_id: ivr.body.data.id });
    expect((await t.rest('GET', `/v1/numbers/${id}`, { key: org.testKey })).body.data.voice_route).toEqual({ type: 'ivr', ivr_id: ivr.body.data.id });
    expect((await route({ type: 'voicemail', voicemail_id: box.body.data.id })).body.data.voice_route).toEqual({ type: 'voicemail', voicemail_id: box.body.data.id });
    expect((await route({ type: 'forward', to: '+14155550188' })).body.data.voice_route).toEqual({ type: 'forward', to: '+14155550188' });
    // Another tenant's (or another mode's) IVR or box, or none at all: 404 and nothing changes.
    const othersIvr = await t.rest('POST', '/v1/voice/ivr', { key: b.testKey, body: { name: 'Theirs', greeting: 'Hi.', menu: { prompt: 'Press one.', options: [{ key: '1', action: 'hangup' }] } } });
    expectError(await route({ type: 'ivr', ivr_id: othersIvr.body.data.id }), 404, 'NOT_FOUND', 'voice_route');
    expectError(await route({ type: 'voicemail', voicemail_id: 'vmail_01jd0000000000000000000009' }), 404, 'NOT_FOUND', 'voice_route');
    expectError(await route({ type: 'ivr', ivr_id: 'vmail_01jd0000000000000000000009' }), 422, 'VALIDATION_ERROR');
    expectError(await route({ type: 'forward', to: 'nobody' }), 422, 'INVALID_PHONE_NUMBER', 'voice_route.to');
    expectError(await route({ type: 'conference' }), 422, 'VALIDATION_ERROR');
    expect((await t.rest('GET', `/v1/numbers/${id}`, { key: org.testKey })).body.data.voice_route).toEqual({ type: 'forward', to: '+14155550188' });
    // Absent keeps it; null removes it.
    expect((await t.rest('PATCH', `/v1/numbers/${id}`, { key: org.testKey, body: { friendly_name: 'Front' } })).body.data.voice_route).toEqual({ type: 'forward', to: '+14155550188' });
    expect((await route(null)).body.data.voice_route).toBeNull();
    // GraphQL: the same shape (REST keys) as JSON.
    const set = await t.gql('mutation($id: ID!, $r: JSON) { updateNumber(id: $id, input: { voiceRoute: $r }) { voiceRoute } }', { id, r: { type: 'ivr', ivr_id: ivr.body.data.id } }, { key: org.testKey });
    expect(set.body.data?.updateNumber, set.text).toEqual({ voiceRoute: { type: 'ivr', ivr_id: ivr.body.data.id } });
    const bad = await t.gql('mutation($id: ID!, $r: JSON) { updateNumber(id: $id, input: { voiceRoute: $r }) { voiceRoute } }', { id, r: { type: 'ivr', ivr_id: othersIvr.body.data.id } }, { key: org.testKey });
    expect(bad.body.errors?.[0]?.extensions, bad.text).toMatchObject({ code: 'NOT_FOUND', status: 404, details: { field: 'voice_route' } });
    const cleared = await t.gql('mutation($id: ID!) { updateNumber(id: $id, input: { voiceRoute: null }) { voiceRoute } }', { id }, { key: org.testKey });
    expect(cleared.body.data.updateNumber).toEqual({ voiceRoute: null });
  });

  it('DELETE releases at once (204); billing ends with the cycle; anyone may buy the number again', async () => {
    const n = owned[0]!;
    const res = await t.rest('DELETE', `/v1/numbers/${n.id}`, { key: org.testKey });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expectError(await t.rest('GET', `/v1/numbers/${n.id}`, { key: org.testKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('DELETE', `/v1/numbers/${n.id}`, { key: org.testKey }), 404, 'NOT_FOUND');
    expectError(await t.rest('PATCH', `/v1/numbers/${n.id}`, { key: org.testKey, body: { friendly_name: 'x' } }), 404, 'NOT_FOUND');
    expect((await t.rest('GET', '/v1/numbers', { key: org.testKey })).body.data.map((x: NumberView) => x.id)).not.toContain(n.id);
    const row = (await t.db.query('select status, released_at, billing_ends_at, billing_period_end from phone_numbers where id = $1', [n.id])).rows[0];
    expect(row.status).toBe('released');
    expect(row.released_at).not.toBeNull();
    expect(row.billing_ends_at.getTime()).toBe(row.billing_period_end.getTime());
    expect(row.billing_ends_at.getTime()).toBe(new Date(n.billing_period_end!).getTime());
    const released = await t.db.query(`select data from events where resource_id = $1 and type = 'number.released'`, [n.id]);
    expect(released.rows[0].data).toMatchObject({ status: 'released', billing_ends_at: row.billing_ends_at.toISOString() });
    // The number is back in the inventory and another organization buys it.
    const again = await search({ country: 'US', type: 'local', area_code: '503', limit: 1 });
    expect(again[0]!.number).toBe(n.number);
    const rebought = await buy({ number: n.number }, b.testKey);
    expect(rebought.id).not.toBe(n.id);
    const usage = await t.db.query('select resource_id from usage_entries where resource_id = any($1) order by id', [[n.id, rebought.id]]);
    expect(usage.rows.map((r) => r.resource_id)).toEqual([n.id, rebought.id]);
  });

  it('releaseNumber (GraphQL) returns the id', async () => {
    const n = owned[3]!;
    const res = await t.gql('mutation($id: ID!) { releaseNumber(id: $id) }', { id: n.id }, { key: org.testKey });
    expect(res.body.data.releaseNumber).toBe(n.id);
    const again = await t.gql('mutation($id: ID!) { releaseNumber(id: $id) }', { id: n.id }, { key: org.testKey });
    expect(again.body.errors![0].extensions.code).toBe('NOT_FOUND');
  });
});

describe('owned numbers as messaging senders', () => {
  let org: TestOrg;
  beforeAll(async () => { org = await t.createOrg('enterprise', 'Numbers messaging'); });

  it('a purchased SMS number is a sender (and the default); released, it is not', async () => {
    const n = await buy({ number: (await available({ area_code: '415' })).number }, org.testKey);
    expect(n.capabilities).toEqual(expect.arrayContaining(['sms', 'whatsapp']));
    const senders = await t.rest('GET', '/v1/messages/senders', { key: org.testKey });
    expect(senders.body.data.filter((s: any) => s.address === n.number).map((s: any) => [s.channel, s.is_default]).sort()).toEqual([['sms', true], ['whatsapp', true]]);
    const explicit = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'from my number', from: n.number } });
    expect(explicit.status, explicit.text).toBe(201);
    expect(explicit.body.data.from).toBe(n.number);
    const byDefault = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'default sender' } });
    expect(byDefault.body.data.from).toBe(n.number);
    await eventually('delivery', async () => ((await t.rest('GET', `/v1/messages/${explicit.body.data.id}`, { key: org.testKey })).body.data.status === 'delivered' ? true : undefined));
    // Another organization cannot send from it.
    expectError(await t.rest('POST', '/v1/messages/sms', { key: a.testKey, body: { to: '+14155550100', body: 'x', from: n.number } }), 422, 'SENDER_NOT_CONFIGURED');
    expect((await t.rest('DELETE', `/v1/numbers/${n.id}`, { key: org.testKey })).status).toBe(204);
    expectError(await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'x', from: n.number } }), 422, 'SENDER_NOT_CONFIGURED');
    const after = await t.rest('GET', '/v1/messages/senders', { key: org.testKey });
    expect(after.body.data.filter((s: any) => s.address === n.number)).toEqual([]);
  });

  it('a voice-only number does not become an SMS sender', async () => {
    const [listing] = await search({ country: 'GB', type: 'local', limit: 1 });
    const n = await buy({ number: listing!.number }, org.testKey);
    expect(n.capabilities).toEqual(['voice']);
    expectError(await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'x', from: n.number } }), 422, 'SENDER_NOT_CONFIGURED');
  });

  it('inbound messages to a number are called back at its sms_webhook_url, signed', async () => {
    const n = await buy({ number: (await available({ area_code: '628' })).number, sms_webhook_url: `${receiverUrl}/inbound/${org.orgId}` }, org.testKey);
    const simulated = await t.rest('POST', '/v1/sandbox/inbound', { key: org.testKey, body: { channel: 'sms', from: '+14155550123', to: n.number, body: 'hello number' } });
    expect(simulated.status, simulated.text).toBe(201);
    expect(simulated.body.data).toMatchObject({ direction: 'inbound', to: n.number, webhook_url: `${receiverUrl}/inbound/${org.orgId}` });
    // A carrier's inbound callback for the number reaches the same URL.
    const raw = JSON.stringify({ type: 'inbound', channel: 'sms', from: '+14155550124', to: n.number, body: 'via carrier', provider_message_id: `pm_${Date.now()}` });
    const signature = `sha256=${createHmac('sha256', t.config.providerSecret('sandbox')).update(raw).digest('hex')}`;
    const callback = await t.rest('POST', '/v1/providers/sandbox/callbacks', { rawBody: raw, headers: { 'Content-Type': 'application/json', 'X-Provider-Signature': signature } });
    expect(callback.status, callback.text).toBe(200);
    const got = await eventually('two inbound callbacks', () => (hitsAt(`/inbound/${org.orgId}`).length >= 2 ? hitsAt(`/inbound/${org.orgId}`) : undefined));
    expect(got.map((h) => [h.json.type, h.json.data.to, h.json.data.from]).sort()).toEqual([
      ['message.received', n.number, '+14155550123'], ['message.received', n.number, '+14155550124'],
    ]);
    const secret = (await t.rest('GET', '/v1/webhooks/callback-secret', { key: org.testKey })).body.data.signing_secret;
    for (const h of got) expect(h.headers['x-service-signature']).toBe(createHmac('sha256', secret).update(h.body).digest('hex'));
    // Without a URL, inbound messages are stored but not called back.
    await t.rest('PATCH', `/v1/numbers/${n.id}`, { key: org.testKey, body: { sms_webhook_url: null } });
    const quiet = await t.rest('POST', '/v1/sandbox/inbound', { key: org.testKey, body: { channel: 'sms', from: '+14155550125', to: n.number, body: 'no callback' } });
    expect(quiet.body.data.webhook_url).toBeNull();
  });
});
