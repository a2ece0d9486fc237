/**
 * 10DLC compliance over HTTP with the sandbox registry: brand validation and vetting (score from
 * the documented rules, failed EINs), 10DLC campaigns on owned numbers reviewed to approved (with
 * the throughput of the lower tier), rejected (no opt-out language) or later suspended, their
 * events, GraphQL twins, and a campaign from a registered number paced at that throughput.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventuallyHolds } from './helpers/assertions.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: {
      SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_BRAND_VETTING_MS: '300', SANDBOX_CAMPAIGN_REVIEW_MS: '600', CAMPAIGN_SANDBOX_THROUGHPUT: '0',
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    },
  });
  org = await t.createOrg('enterprise', 'Brand org');
  other = await t.createOrg('enterprise', 'Other org');
});
afterAll(async () => { await t?.close(); });

const call = (method: string, path: string, body?: unknown, key = org.testKey) => t.rest(method, path, { key, body });
const until = <T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 20_000): Promise<T> => eventuallyHolds('the campaign', read, ok, timeoutMs);

const BRAND = {
  company_name: 'Acme Corp', ein: '12-3456789', country: 'us', entity_type: 'private_profit', vertical: 'retail',
  website: 'https://acme.test', contact_email: 'ops@acme.test', contact_phone: '+14155550100',
};
const TEN_DLC = {
  use_case: 'marketing',
  description: 'Weekly offers for customers who joined the Acme loyalty club on our website.',
  sample_messages: ['Acme: 20% off this weekend only! Reply STOP to unsubscribe.'],
  message_flow: 'Customers opt in by ticking a consent box when they join the loyalty club on acme.test.',
  opt_in_type: 'web_form',
};

async function buyNumber(key = org.testKey): Promise<{ id: string; number: string }> {
  const found = await t.rest('GET', '/v1/numbers/available?country=US&capabilities=sms', { key });
  const listing = found.body.data[Math.floor(Math.random() * found.body.data.length)];
  const bought = await t.rest('POST', '/v1/numbers', { key, body: { number: listing.number } });
  expect(bought.status, bought.text).toBe(201);
  return { id: bought.body.data.id, number: bought.body.data.number };
}

const brandNow = async (id: string) => (await call('GET', `/v1/compliance/brands/${id}`)).body.data;
const tenDlcNow = async (id: string) => (await call('GET', `/v1/compliance/campaigns/${id}`)).body.data;

describe('brands', () => {
  it('validates the spec fields', async () => {
    for (const [patch, field] of [
      [{ ein: '123' }, 'ein'], [{ country: 'XX' }, 'country'], [{ entity_type: 'llc' }, 'entity_type'], [{ vertical: 'pets' }, 'vertical'],
      [{ entity_type: 'public_profit' }, 'stock_symbol'], [{ contact_email: 'nope' }, 'contact_email'], [{ contact_phone: '12' }, 'contact_phone'],
    ] as const) {
      const r = await call('POST', '/v1/compliance/brands', { ...BRAND, ...patch });
      expect(r.status, JSON.stringify(patch)).toBe(422);
      expect(r.body.error.details.field).toBe(field);
    }
    const missing = await call('POST', '/v1/compliance/brands', { ...BRAND, company_name: undefined });
    expect(missing.body.error.code).toBe('MISSING_REQUIRED_FIELD');
  });

  it('is created pending and vetted after the review time with the documented score; unassigned EINs fail', async () => {
    const created = await call('POST', '/v1/compliance/brands', BRAND);
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ company_name: 'Acme Corp', status: 'pending', vetting_score: null, tcr_brand_id: null, country: 'US', ein: '12-3456789' });
    expect(created.body.data.id).toMatch(/^brand_/);
    const vetted = await until(() => brandNow(created.body.data.id), (b) => b.status !== 'pending');
    // 40 + 15 (https website) + 10 (email on the website's domain)
    expect(vetted).toMatchObject({ status: 'vetted', vetting_score: 65 });
    expect(vetted.tcr_brand_id).toMatch(/^B[0-9A-F]{7}$/);
    const pub = await call('POST', '/v1/compliance/brands', { ...BRAND, entity_type: 'public_profit', stock_symbol: 'ACME' });
    expect((await until(() => brandNow(pub.body.data.id), (b) => b.status !== 'pending')).vetting_score).toBe(100);
    const bad = await call('POST', '/v1/compliance/brands', { ...BRAND, ein: '00-1234567' });
    const failed = await until(() => brandNow(bad.body.data.id), (b) => b.status !== 'pending');
    expect(failed).toMatchObject({ status: 'failed', vetting_score: null, failure_reason: 'EIN not found in the IRS records' });
    const events = await t.db.query(`select type, data from events where resource_id = any($1) order by id`, [[created.body.data.id, bad.body.data.id]]);
    expect(events.rows.map((e) => e.type).sort()).toEqual(['compliance.brand.failed', 'compliance.brand.vetted']);
    expect((await call('GET', '/v1/compliance/brands?status=vetted')).body.data.map((b: { id: string }) => b.id)).toContain(created.body.data.id);
    expect((await call('GET', `/v1/compliance/brands/${created.body.data.id}`, undefined, other.testKey)).status).toBe(404);
  });
});

describe('10DLC campaigns', () => {
  it('checks the brand and the numbers, reviews to approved with the lower throughput, or rejected, or later suspended', async () => {
    const brand = (await call('POST', '/v1/compliance/brands', BRAND)).body.data;
    const n1 = await buyNumber();
    const n2 = await buyNumber();
    const foreign = await buyNumber(other.testKey);
    expect((await call('POST', '/v1/compliance/campaigns', { ...TEN_DLC, brand_id: 'brand_nope', number_ids: [n1.id] })).status).toBe(404);
    const notOwned = await call('POST', '/v1/compliance/campaigns', { ...TEN_DLC, brand_id: brand.id, number_ids: [foreign.id] });
    expect(notOwned.status).toBe(404);
    expect(notOwned.body.error.details.field).toBe('number_ids');
    expect((await call('POST', '/v1/compliance/campaigns', { ...TEN_DLC, brand_id: brand.id, use_case: 'spam', number_ids: [n1.id] })).body.error.details.field).toBe('use_case');

    const created = await call('POST', '/v1/compliance/campaigns', { ...TEN_DLC, brand_id: brand.id, number_ids: [n1.id], opt_out_keywords: ['stop', 'quit'] });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toMatchObject({ status: 'pending', numbers: [n1.number], opt_out_keywords: ['STOP', 'QUIT'], help_keywords: ['HELP'], rejection_reason: null });
    const approved = await until(() => tenDlcNow(created.body.data.id), (c) => c.status !== 'pending');
    // marketing 75 msg/s, vetting score 65 → 15 msg/s: the lower applies.
    expect(approved).toMatchObject({ status: 'approved', throughput_mps: 15 });

    const rejected = await call('POST', '/v1/compliance/campaigns', { ...TEN_DLC, brand_id: brand.id, number_ids: [n2.id], sample_messages: ['Acme: 20% off this weekend only, see you soon!'] });
    const r = await until(() => tenDlcNow(rejected.body.data.id), (c) => c.status !== 'pending');
    expect(r.status).toBe('rejected');
    expect(r.rejection_reason).toMatch(/opt-out language/);
    const tfa = await call('POST', '/v1/compliance/campaigns', { ...TEN_DLC, use_case: 'two_factor_auth', brand_id: brand.id, number_ids: [n2.id] });
    expect((await until(() => tenDlcNow(tfa.body.data.id), (c) => c.status !== 'pending')).rejection_reason).toMatch(/two_factor_auth/);

    const suspended = await call('POST', '/v1/compliance/campaigns', { ...TEN_DLC, description: `${TEN_DLC.description} [sandbox:suspend]`, brand_id: brand.id, number_ids: [n2.id] });
    await until(() => tenDlcNow(suspended.body.data.id), (c) => c.status === 'approved');
    const s = await until(() => tenDlcNow(suspended.body.data.id), (c) => c.status === 'suspended');
    expect(s.suspension_reason).toMatch(/violation/);
    const types = (await t.db.query(`select type from events where resource_type = 'compliance_campaign' and organization_id = $1`, [org.orgId])).rows.map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['compliance.campaign.approved', 'compliance.campaign.rejected', 'compliance.campaign.suspended']));
    const listed = await call('GET', `/v1/compliance/campaigns?status=suspended&brand_id=${brand.id}`);
    expect(listed.body.data.map((c: { id: string }) => c.id)).toEqual([suspended.body.data.id]);

    const gql = await t.gql(`query($id: ID!) { tenDlcCampaign(id: $id) { status useCase throughputMps numbers } }`, { id: created.body.data.id }, { key: org.testKey });
    expect(gql.body.data!.tenDlcCampaign).toEqual({ status: 'approved', useCase: 'marketing', throughputMps: 15, numbers: [n1.number] });
  });

  it('a campaign from a registered number is paced at its 10DLC throughput', async () => {
    // No website: score 40 → 4 msg/s, below marketing's 75.
    const gqlBrand = await t.gql(`mutation($input: CreateComplianceBrandInput!) { createComplianceBrand(input: $input) { id status } }`, {
      input: { companyName: 'Tiny LLC', ein: '45-1234567', country: 'US', entityType: 'sole_proprietor', vertical: 'retail', contactEmail: 'me@tiny.test', contactPhone: '+14155550101' },
    }, { key: org.testKey });
    expect(gqlBrand.body.data!.createComplianceBrand.status).toBe('pending');
    const num = await buyNumber();
    const reg = await call('POST', '/v1/compliance/campaigns', { ...TEN_DLC, brand_id: gqlBrand.body.data!.createComplianceBrand.id, number_ids: [num.id] });
    expect((await until(() => tenDlcNow(reg.body.data.id), (c) => c.status !== 'pending')).throughput_mps).toBe(4);

    const list = (await call('POST', '/v1/contacts/lists', { name: 'paced' })).body.data.id;
    const ids = (await Promise.all(Array.from({ length: 13 }, (_, i) => call('POST', '/v1/contacts', { phone: `+1415777${1000 + i}` })))).map((x) => x.body.data.id);
    await call('POST', `/v1/contacts/lists/${list}/members`, { contact_ids: ids });
    const c = (await call('POST', '/v1/campaigns', { name: 'Registered', channel: 'sms', list_id: list, from: num.number, body: 'Hi. Reply STOP' })).body.data;
    const sent = await call('POST', `/v1/campaigns/${c.id}/send`);
    expect(sent.status, sent.text).toBe(200);
    await until(() => call('GET', `/v1/campaigns/${c.id}`).then((x) => x.body.data), (x) => x.status === 'completed');
    const { rows } = await t.db.query(`select created_at, "from" from messages where metadata->>'campaign_id' = $1 order by created_at`, [c.id]);
    expect(rows).toHaveLength(13);
    expect(rows.every((m) => m.from === num.number)).toBe(true);
    const span = (new Date(rows[12].created_at).getTime() - new Date(rows[0].created_at).getTime()) / 1000;
    // 13 messages at 4/s: the last leaves 3 s after the first; a batch may start up to one
    // worker poll (0.5 s) after its slot, never before it.
    expect(span).toBeGreaterThan(2.4);
    expect(span).toBeLessThan(3.8);
  });
});
