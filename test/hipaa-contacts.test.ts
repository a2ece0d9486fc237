/**
 * HIPAA mode for contacts and campaigns, end to end over HTTP against the real database and the
 * real workers: PHI metadata keys sealed on every write path (REST, GraphQL, updates, CSV imports),
 * opened, redacted and logged on every read (get, list, search, list members, segment previews,
 * GraphQL) by role and reason code, segments refused on sealed keys, campaigns personalized from
 * PHI keys (body, email subject, template variables) storing nothing in clear, the backfill of
 * contacts, imports, campaign recipients and messages stored before the mode, and a scan of every
 * row of every table and every log line for the unique marker: no hit.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { OFFICER, tablesHolding, tickingCallers } from './helpers/phi.ts';
import { eventually, expectError } from './helpers/assertions.ts';

const clock = new ManualClock(Date.now());
const logs: string[] = [];
let t: TestApp;
let org: TestOrg;
const keys: Record<'admin' | 'developer' | 'viewer', string> = { admin: '', developer: '', viewer: '' };
/** The unique marker every piece of PHI in this file carries. */
const MARK = `PHICON${randomBytes(6).toString('hex')}`;

const { rest, gql } = tickingCallers(() => t, clock, () => org.testKey);
const phiLog = async (limit = 20) => (await rest('GET', `/v1/settings/hipaa/phi-access-log?limit=${limit}`)).body.data as any[];

async function contact(body: Record<string, unknown>) {
  const r = await rest('POST', '/v1/contacts', { body });
  expect(r.status, r.text).toBe(201);
  return r.body.data;
}
async function list(name: string, ids: string[]) {
  const l = await rest('POST', '/v1/contacts/lists', { body: { name } });
  expect(l.status, l.text).toBe(201);
  if (ids.length) expect((await rest('POST', `/v1/contacts/lists/${l.body.data.id}/members`, { body: { contact_ids: ids } })).status).toBe(200);
  return l.body.data.id as string;
}
async function campaign(body: Record<string, unknown>) {
  const c = await rest('POST', '/v1/campaigns', { body: { name: 'Results', channel: 'sms', ...body } });
  expect(c.status, c.text).toBe(201);
  const sent = await rest('POST', `/v1/campaigns/${c.body.data.id}/send`);
  expect(sent.status, sent.text).toBe(200);
  return c.body.data.id as string;
}
const completed = (id: string) => eventually(`campaign ${id} completed`, async () => {
  const c = (await rest('GET', `/v1/campaigns/${id}`)).body.data;
  return c.status === 'completed' && c.stats.pending === 0 ? c : undefined;
}, 30_000);

beforeAll(async () => {
  t = await startTestApp({
    clock, workers: true,
    env: {
      LOG_LEVEL: 'debug', SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', SANDBOX_READ_AFTER_MS: '50', HIPAA_MODE_CACHE_MS: '0',
      CAMPAIGN_SANDBOX_THROUGHPUT: '0', CAMPAIGN_BATCH_SIZE: '10',
    },
    logStream: { write: (line) => { logs.push(line); } },
  });
  org = await t.createOrg('business', 'Clinic contacts');
  for (const role of Object.keys(keys) as (keyof typeof keys)[]) keys[role] = await t.createKey(org.orgId, role);
});
afterAll(async () => {
  await t?.close();
});

/** Stored before the mode: a contact, a segment on a PHI key, a sent campaign and an import stuck before its job. */
const before: { contactId: string; segmentId: string; campaignId: string; importId: string } = { contactId: '', segmentId: '', campaignId: '', importId: '' };
/** Stored in HIPAA mode. */
const phi: { a: any; b: any; listId: string; sms: string; email: string; template: string } = { a: null, b: null, listId: '', sms: '', email: '', template: '' };

describe('before HIPAA mode', () => {
  it('contacts, a segment on metadata.diagnosis, a campaign and a stuck import hold the marker in clear', async () => {
    const c = await contact({ phone: '+14155551001', first_name: 'Early', metadata: { diagnosis: `pre ${MARK}`, plan: 'gold' } });
    before.contactId = c.id;
    const seg = await rest('POST', '/v1/contacts/segments', { body: { name: 'Diabetics', rules: { all: [{ field: 'metadata.diagnosis', op: 'contains', value: 'pre' }] } } });
    expect(seg.status, seg.text).toBe(201);
    before.segmentId = seg.body.data.id;
    before.campaignId = await campaign({ list_id: await list('early', [c.id]), body: 'About {{contact.metadata.diagnosis}}' });
    await completed(before.campaignId);
    before.importId = `imp_stuck${randomBytes(4).toString('hex')}`;
    await t.db.query(
      `insert into contact_imports (id, organization_id, mode, status, csv, total_rows, processed_rows, created_count, updated_count, rejected_count, rejections, created_at, updated_at)
       values ($1, $2, 'test', 'processing', $3, 1, 0, 0, 0, 0, '[]', now(), now())`, [before.importId, org.orgId, `phone,metadata.diagnosis\n+14155551099,${MARK}`]);
    // The scan below can find the marker: it is there in clear now.
    for (const table of ['contacts', 'campaign_recipients', 'messages', 'contact_imports']) {
      const { rows } = await t.db.query(`select count(*)::int as c from ${table} x where x::text like $1`, [`%${MARK}%`]);
      expect(rows[0].c, table).toBeGreaterThan(0);
    }
  });
});

describe('HIPAA mode', () => {
  beforeAll(async () => {
    expect((await rest('PUT', '/v1/settings/hipaa/baa', { key: org.liveKey, body: { status: 'signed', signed_date: '2026-11-01' } })).status).toBe(200);
    const on = await rest('PUT', '/v1/settings/hipaa', { key: org.liveKey, body: { enabled: true, compliance_officer: OFFICER, phi_metadata_fields: ['diagnosis', 'mrn'] } });
    expect(on.status, on.text).toBe(200);
  });

  it('the backfill seals contacts, waiting imports and campaign recipients stored before the mode, once', async () => {
    clock.advance(1000);
    const s = t.app.services;
    expect(await s.contactsBackfill.sealBackfill()).toBeGreaterThanOrEqual(2);
    expect(await s.campaignsBackfill.sealBackfill()).toBeGreaterThanOrEqual(1);
    expect(await s.messageRetention.sealBackfill()).toBeGreaterThanOrEqual(1);
    const row = (await t.db.query('select metadata, phi from contacts where id = $1', [before.contactId])).rows[0];
    expect(row.metadata).toEqual({ plan: 'gold' });
    expect(row.phi).toMatch(/^phi1:1:/);
    expect((await t.db.query('select csv from contact_imports where id = $1', [before.importId])).rows[0].csv).toMatch(/^phi1:1:/);
    expect((await t.db.query(`select vars from campaign_recipients where campaign_id = $1`, [before.campaignId])).rows[0].vars).toEqual({ $phi: expect.stringMatching(/^phi1:1:/) });
    // Opened on read.
    expect((await rest('GET', `/v1/contacts/${before.contactId}`)).body.data.metadata).toEqual({ diagnosis: `pre ${MARK}`, plan: 'gold' });
    expect(await s.contactsBackfill.sealBackfill()).toBe(0);
    expect(await s.campaignsBackfill.sealBackfill()).toBe(0);
  });

  it('writes seal the PHI keys (REST, GraphQL, update, CSV import); unmarked keys stay clear', async () => {
    phi.a = await contact({ phone: '+14155551002', first_name: 'Ann', metadata: { diagnosis: `flu ${MARK}`, plan: 'gold' } });
    // The creator sees what it sent.
    expect(phi.a.metadata).toEqual({ diagnosis: `flu ${MARK}`, plan: 'gold' });
    const g = await gql('mutation($input: CreateContactInput!) { createContact(input: $input) { id metadata } }', {
      input: { phone: '+14155551003', firstName: 'Bob', metadata: { diagnosis: `asthma ${MARK}`, plan: 'silver' } },
    });
    expect(g.body.errors, JSON.stringify(g.body.errors)).toBeUndefined();
    phi.b = g.body.data.createContact;
    const upd = await rest('PUT', `/v1/contacts/${phi.a.id}`, { body: { metadata: { mrn: `MRN-${MARK}` } } });
    expect(upd.status, upd.text).toBe(200);
    expect(upd.body.data.metadata).toEqual({ diagnosis: `flu ${MARK}`, plan: 'gold', mrn: `MRN-${MARK}` });
    const stored = (await t.db.query('select metadata, phi from contacts where id = $1', [phi.a.id])).rows[0];
    expect(stored.metadata).toEqual({ plan: 'gold' });
    expect(stored.phi).toMatch(/^phi1:/);

    phi.listId = await list('patients', [phi.a.id, phi.b.id]);
    const imp = await rest('POST', '/v1/contacts/imports', {
      body: { list_id: phi.listId, csv: `phone,first_name,metadata.diagnosis,metadata.plan\n+14155551004,Cy,gout ${MARK},bronze\n+14155551002,Ann,flu again ${MARK},gold\n` },
    });
    expect(imp.status, imp.text).toBe(202);
    expect((await t.db.query('select csv from contact_imports where id = $1', [imp.body.data.id])).rows[0].csv).toMatch(/^(phi1:|$)/);
    const done = await eventually('import completed', async () => {
      const r = (await rest('GET', `/v1/contacts/imports/${imp.body.data.id}`)).body.data;
      return r.status === 'completed' ? r : undefined;
    }, 20_000);
    expect(done).toMatchObject({ created: 1, updated: 1, rejected: 0 });
    const members = (await rest('GET', `/v1/contacts/lists/${phi.listId}/members`)).body.data;
    expect(members.map((m: any) => m.metadata.diagnosis).sort()).toEqual([`asthma ${MARK}`, `flu again ${MARK}`, `gout ${MARK}`]);
    expect(members.find((m: any) => m.phone === '+14155551002').metadata.mrn).toBe(`MRN-${MARK}`);
  });

  it('owner and admin read PHI, each read logged; a developer only with a reason code; viewer never', async () => {
    const owner = await rest('GET', `/v1/contacts/${phi.a.id}`);
    expect(owner.body.data.metadata).toMatchObject({ diagnosis: `flu again ${MARK}`, mrn: `MRN-${MARK}`, plan: 'gold' });
    const adminList = await rest('GET', '/v1/contacts?limit=50', { key: keys.admin });
    expect(adminList.body.data.find((c: any) => c.id === phi.b.id).metadata).toEqual({ diagnosis: `asthma ${MARK}`, plan: 'silver' });
    const log = await phiLog();
    expect(log.find((x) => x.operation === 'contacts.get' && x.role === 'owner')).toMatchObject({ resource_type: 'contact', resource_ids: [phi.a.id], fields: ['metadata'], reason: null });
    const listEntry = log.find((x) => x.operation === 'contacts.list' && x.role === 'admin');
    expect(listEntry.resource_ids).toEqual(expect.arrayContaining([phi.a.id, phi.b.id, before.contactId]));

    const developerBefore = (await phiLog(100)).filter((x) => x.role === 'developer').length;
    const redacted = (await rest('GET', `/v1/contacts/${phi.a.id}`, { key: keys.developer })).body.data;
    expect(redacted.metadata).toEqual({ diagnosis: '[REDACTED]', mrn: '[REDACTED]', plan: 'gold' });
    expect(redacted).toMatchObject({ phone: '+14155551002', first_name: 'Ann' });
    expect((await phiLog(100)).filter((x) => x.role === 'developer').length).toBe(developerBefore);
    const withReason = await rest('GET', `/v1/contacts/${phi.a.id}`, { key: keys.developer, headers: { 'X-PHI-Reason': 'treatment' } });
    expect(withReason.body.data.metadata.diagnosis).toBe(`flu again ${MARK}`);
    expect((await phiLog(1))[0]).toMatchObject({ role: 'developer', reason: 'treatment', resource_type: 'contact', resource_ids: [phi.a.id], operation: 'contacts.get' });
    expectError(await rest('GET', `/v1/contacts/${phi.a.id}`, { key: keys.developer, headers: { 'X-PHI-Reason': 'curiosity' } }), 400, 'VALIDATION_ERROR');
    const viewer = await rest('GET', `/v1/contacts/${phi.a.id}`, { key: keys.viewer, headers: { 'X-PHI-Reason': 'treatment' } });
    expect(viewer.body.data.metadata).toEqual({ diagnosis: '[REDACTED]', mrn: '[REDACTED]', plan: 'gold' });
    // Lists, list members, opt-outs and writes that present a contact: the same rules.
    for (const path of ['/v1/contacts?limit=50', `/v1/contacts/lists/${phi.listId}/members`]) {
      const page = (await rest('GET', path, { key: keys.viewer })).body.data;
      expect(page.length).toBeGreaterThan(0);
      expect(page.every((c: any) => c.metadata.diagnosis === undefined || c.metadata.diagnosis === '[REDACTED]')).toBe(true);
    }
    const tagged = await rest('POST', `/v1/contacts/${phi.a.id}/tags`, { key: keys.developer, body: { tags: ['vip'] } });
    expect(tagged.body.data.metadata.diagnosis).toBe('[REDACTED]');
    const members = await rest('GET', `/v1/contacts/lists/${phi.listId}/members`, { key: keys.developer, headers: { 'X-PHI-Reason': 'operations' } });
    expect(members.body.data.some((c: any) => c.metadata.diagnosis === `gout ${MARK}`)).toBe(true);
    expect((await phiLog(1))[0]).toMatchObject({ role: 'developer', reason: 'operations', operation: 'contacts.listMembers' });
  });

  it('GraphQL: the same rules, with the header or extensions.phiReason', async () => {
    const q = 'query($id: ID!) { contact(id: $id) { metadata } }';
    expect((await gql(q, { id: phi.b.id }, { key: keys.developer })).body.data.contact.metadata).toEqual({ diagnosis: '[REDACTED]', plan: 'silver' });
    clock.advance(1000);
    const res = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': keys.developer },
      body: JSON.stringify({ query: q, variables: { id: phi.b.id }, extensions: { phiReason: 'support' } }),
    });
    expect((await res.json()).data.contact.metadata.diagnosis).toBe(`asthma ${MARK}`);
    const conn = await gql('{ contacts(first: 50) { edges { node { id metadata } } } }', {}, { key: keys.viewer });
    const node = conn.body.data.contacts.edges.map((e: any) => e.node).find((n: any) => n.id === phi.b.id);
    expect(node.metadata).toEqual({ diagnosis: '[REDACTED]', plan: 'silver' });
    expect((await phiLog(1))[0]).toMatchObject({ role: 'developer', reason: 'support', operation: 'contacts.get' });
  });

  it('search and segments cannot match sealed keys: search finds no PHI value, a segment on one is 422 naming the field', async () => {
    expect((await rest('GET', `/v1/contacts?search=${MARK}`)).body.data).toEqual([]);
    expect((await rest('GET', '/v1/contacts?search=gold')).body.data.map((c: any) => c.id)).toContain(phi.a.id);
    const refused = expectError(await rest('POST', '/v1/contacts/segments', { body: { name: 'x', rules: { all: [{ field: 'metadata.diagnosis', op: 'exists' }] } } }), 422, 'VALIDATION_ERROR');
    expect(refused.error.details).toMatchObject({ field: 'rules.all.0.field', reason: 'phi_metadata', metadata_key: 'diagnosis' });
    expectError(await rest('POST', '/v1/contacts/segments/preview', { body: { rules: { any: [{ field: 'metadata.mrn.x', op: 'eq', value: 'y' }] } } }), 422, 'VALIDATION_ERROR');
    // A saved segment on a PHI key: its preview and a campaign to it are refused.
    expectError(await rest('GET', `/v1/contacts/segments/${before.segmentId}/preview`), 422, 'VALIDATION_ERROR');
    const c = expectError(await rest('POST', '/v1/campaigns', { body: { name: 'x', channel: 'sms', body: 'hi', segment_id: before.segmentId } }), 422, 'VALIDATION_ERROR');
    expect(c.error.details).toMatchObject({ field: 'segment_id', reason: 'phi_metadata' });
    // Unmarked keys still filter; the preview shows PHI by role.
    const gold = await rest('POST', '/v1/contacts/segments/preview', { key: keys.developer, body: { rules: { all: [{ field: 'metadata.plan', op: 'eq', value: 'gold' }] } } });
    expect(gold.status, gold.text).toBe(200);
    expect(gold.body.data.contacts.map((x: any) => x.id)).toEqual(expect.arrayContaining([phi.a.id, before.contactId]));
    expect(gold.body.data.contacts.every((x: any) => x.metadata.diagnosis === '[REDACTED]')).toBe(true);
  });

  it('campaigns personalized from PHI keys (SMS body, email subject, template variables) deliver the values', async () => {
    const email = await contact({ email: 'patient@mail.test', first_name: 'Dee', metadata: { diagnosis: `mail ${MARK}` } });
    const tpl = await rest('POST', '/v1/messages/templates', { body: { channel: 'sms', name: `result_${randomBytes(3).toString('hex')}`, content: 'Result: {{dx}}', variables: ['dx'] } });
    expect(tpl.status, tpl.text).toBe(201);
    phi.sms = await campaign({ list_id: phi.listId, body: 'Hi {{contact.first_name}}, about {{contact.metadata.diagnosis}}' });
    phi.template = await campaign({ list_id: phi.listId, template_id: tpl.body.data.id, template_variables: { dx: '{{contact.metadata.diagnosis}} {{contact.metadata.mrn}}' } });
    phi.email = await campaign({ channel: 'email', list_id: await list('mail', [email.id]), subject: 'Lab {{contact.metadata.diagnosis}}', body: 'Dear {{contact.first_name}}' });
    for (const id of [phi.sms, phi.template, phi.email]) expect((await completed(id)).stats).toMatchObject({ sent: expect.any(Number), failed: 0 });
    // What left is right: the messages open with the personalized PHI (owner).
    const ids = (await t.db.query(`select message_id from campaign_recipients where campaign_id = any($1::text[]) and message_id is not null`, [[phi.sms, phi.template, phi.email]])).rows.map((r) => r.message_id);
    expect(ids.length).toBe(7);
    const msgs = await Promise.all(ids.map(async (id) => (await rest('GET', `/v1/messages/${id}`)).body.data));
    const bodies = msgs.map((m: any) => m.body);
    expect(bodies).toEqual(expect.arrayContaining([`Hi Ann, about flu again ${MARK}`, `Result: gout ${MARK} `, `Result: flu again ${MARK} MRN-${MARK}`]));
    expect(msgs.some((m: any) => m.subject === `Lab mail ${MARK}`)).toBe(true);
    // Stored sealed: recipients' vars and the messages.
    const { rows } = await t.db.query(`select vars from campaign_recipients where campaign_id = any($1::text[])`, [[phi.sms, phi.template, phi.email]]);
    expect(rows.length).toBe(7);
    expect(rows.every((r) => typeof r.vars.$phi === 'string')).toBe(true);
  });

  it('no plaintext PHI in any row of any table (recipients, jobs, outbox, imports, messages) or in the logs', async () => {
    await eventually('deliveries settled', async () => {
      const { rows } = await t.db.query(`select count(*)::int as c from messages where organization_id = $1 and status in ('queued', 'sending', 'sent')`, [org.orgId]);
      return rows[0].c === 0 ? true : undefined;
    }, 20_000);
    expect(await tablesHolding(t, [MARK])).toEqual([]);
    // The scan finds what is there: sealed contacts, recipients and jobs exist.
    expect((await t.db.query(`select count(*)::int as c from contacts where phi is not null and organization_id = $1`, [org.orgId])).rows[0].c).toBeGreaterThanOrEqual(5);
    expect((await t.db.query(`select count(*)::int as c from pgboss.job where name like 'campaigns.%'`)).rows[0].c).toBeGreaterThan(0);
    expect(logs.length).toBeGreaterThan(10);
    expect(logs.filter((l) => l.includes(MARK))).toEqual([]);
  });
});
