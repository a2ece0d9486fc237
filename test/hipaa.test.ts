/**
 * HIPAA mode end to end over HTTP against the real database and the real workers: the settings
 * (prerequisites, roles, audit), sealed message content (nothing in clear anywhere in the
 * database or the logs), access by role and reason code on REST and GraphQL with its PHI access
 * log (append-only at the database, rotated at 10,000 entries), retention on an injected clock,
 * and the backfill of content stored before the mode was on.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { OFFICER, tablesHolding, tickingCallers } from './helpers/phi.ts';
import { eventually, expectError, expectGqlError } from './helpers/assertions.ts';
import { startReceiver } from './helpers/voice.ts';
import { KeyRing } from '../src/modules/hipaa/hipaa.keys.ts';
import { LocalKeyManagement } from '../src/providers/kms/local.ts';

const clock = new ManualClock(Date.now());
const logs: string[] = [];
let t: TestApp;
let org: TestOrg;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const keys: Record<'admin' | 'developer' | 'viewer' | 'billing', string> = { admin: '', developer: '', viewer: '', billing: '' };
/** The unique marker every piece of PHI in this file carries. */
const MARK = `PHIMARK${randomBytes(6).toString('hex')}`;

const { rest, gql } = tickingCallers(() => t, clock, () => org.testKey);

beforeAll(async () => {
  t = await startTestApp({
    clock, workers: true,
    env: { LOG_LEVEL: 'debug', WEBHOOKS_ALLOW_LOOPBACK: '1', WEBHOOKS_POLL_INTERVAL_MS: '50', SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', SANDBOX_READ_AFTER_MS: '50', HIPAA_MODE_CACHE_MS: '0' },
    logStream: { write: (line) => { logs.push(line); } },
  });
  org = await t.createOrg('business', 'Clinic');
  for (const role of Object.keys(keys) as (keyof typeof keys)[]) keys[role] = await t.createKey(org.orgId, role);
  receiver = await startReceiver();
});
afterAll(async () => {
  receiver?.close();
  await t?.close();
});

async function enable(o: TestOrg = org) {
  expect((await rest('PUT', '/v1/settings/hipaa/baa', { key: o.liveKey, body: { status: 'signed', signed_date: '2026-11-01', document_url: 'https://docs.clinic.test/baa.pdf' } })).status).toBe(200);
  const on = await rest('PUT', '/v1/settings/hipaa', { key: o.liveKey, body: { enabled: true, compliance_officer: OFFICER, phi_metadata_fields: ['diagnosis'] } });
  expect(on.status, on.text).toBe(200);
  return on.body.data;
}

describe('settings', () => {
  it('GET shows the defaults to admins; developers are refused', async () => {
    const res = await rest('GET', '/v1/settings/hipaa', { key: keys.admin });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ enabled: false, baa_status: 'not_signed', baa_signed_date: null, retention_days: 365, compliance_officer: null });
    expectError(await rest('GET', '/v1/settings/hipaa', { key: keys.developer }), 403, 'INSUFFICIENT_PERMISSIONS');
  });

  it('enabling needs the owner, a signed BAA (403), a compliance officer (422) and a Business or Enterprise plan (403)', async () => {
    expectError(await rest('PUT', '/v1/settings/hipaa', { key: keys.admin, body: { enabled: true } }), 403, 'INSUFFICIENT_PERMISSIONS');
    expectError(await rest('PUT', '/v1/settings/hipaa/baa', { key: keys.admin, body: { status: 'signed' } }), 403, 'INSUFFICIENT_PERMISSIONS');
    const live = { key: org.liveKey };
    const noBaa = expectError(await rest('PUT', '/v1/settings/hipaa', { ...live, body: { enabled: true, compliance_officer: OFFICER } }), 403, 'FORBIDDEN');
    expect(noBaa.error.details).toMatchObject({ reason: 'baa_not_signed' });
    expectError(await rest('PUT', '/v1/settings/hipaa/baa', { ...live, body: { status: 'signed' } }), 422, 'MISSING_REQUIRED_FIELD');
    expect((await rest('PUT', '/v1/settings/hipaa/baa', { ...live, body: { status: 'signed', signed_date: '2026-11-01' } })).body.data).toMatchObject({ baa_status: 'signed', baa_signed_date: '2026-11-01' });
    const noOfficer = expectError(await rest('PUT', '/v1/settings/hipaa', { ...live, body: { enabled: true } }), 422, 'VALIDATION_ERROR');
    expect(noOfficer.error.details).toMatchObject({ field: 'compliance_officer' });
    expectError(await rest('PUT', '/v1/settings/hipaa', { ...live, body: { retention_days: 29 } }), 422, 'VALIDATION_ERROR');
    expectError(await rest('PUT', '/v1/settings/hipaa', { ...live, body: { retention_days: 3651 } }), 422, 'VALIDATION_ERROR');
    // Nothing changed by the refusals.
    expect((await rest('GET', '/v1/settings/hipaa')).body.data).toMatchObject({ enabled: false, retention_days: 365, compliance_officer: null });

    const growth = await t.createOrg('growth', 'Small clinic');
    await rest('PUT', '/v1/settings/hipaa/baa', { key: growth.liveKey, body: { status: 'signed', signed_date: '2026-11-01' } });
    const plan = expectError(await rest('PUT', '/v1/settings/hipaa', { key: growth.liveKey, body: { enabled: true, compliance_officer: OFFICER } }), 403, 'FORBIDDEN');
    expect(plan.error.details).toMatchObject({ reason: 'plan', plan: 'growth' });
  });

  it('the owner enables it (REST and GraphQL read the same), every change audited', async () => {
    const on = await enable();
    expect(on).toMatchObject({ enabled: true, baa_status: 'signed', baa_document_url: 'https://docs.clinic.test/baa.pdf', compliance_officer: OFFICER, phi_metadata_fields: ['diagnosis'] });
    expect(on.enabled_at).toBeTruthy();
    const g = await gql('{ hipaaSettings { enabled baaStatus baaSignedDate retentionDays complianceOfficer { name email } } }', {}, { key: keys.admin });
    expect(g.body.data).toEqual({ hipaaSettings: { enabled: true, baaStatus: 'signed', baaSignedDate: '2026-11-01', retentionDays: 365, complianceOfficer: OFFICER } });
    const retention = await gql('mutation { updateHipaaSettings(retentionDays: 90) { retentionDays } }', {}, { key: org.liveKey });
    expect(retention.body.data).toEqual({ updateHipaaSettings: { retentionDays: 90 } });
    expectGqlError(await gql('mutation { updateHipaaSettings(retentionDays: 90) { retentionDays } }', {}, { key: keys.admin }), 'INSUFFICIENT_PERMISSIONS');
    const audit = (await rest('GET', '/v1/settings/audit-logs?limit=100', { key: org.liveKey })).body.data.map((e: any) => e.action);
    expect(audit).toEqual(expect.arrayContaining(['hipaa.baa_updated', 'hipaa.enabled', 'hipaa.updated']));
    // The BAA cannot be withdrawn while the mode is on.
    expectError(await rest('PUT', '/v1/settings/hipaa/baa', { key: org.liveKey, body: { status: 'not_signed' } }), 409, 'CONFLICT');
  });
});

describe('credentials that govern live data', () => {
  it('a test-mode key cannot turn HIPAA mode off or change the BAA (403 FORBIDDEN, REST and GraphQL, nothing changed or audited)', async () => {
    const o = await t.createOrg('business', 'Modes clinic');
    await enable(o);
    const before = (await rest('GET', '/v1/settings/hipaa', { key: o.liveKey })).body.data;
    const audits = async () => (await t.db.query('select count(*)::int as n from audit_log_entries where organization_id = $1', [o.orgId])).rows[0].n as number;
    const audited = await audits();
    const off = expectError(await rest('PUT', '/v1/settings/hipaa', { key: o.testKey, body: { enabled: false } }), 403, 'FORBIDDEN');
    expect(off.error.details).toMatchObject({ reason: 'test_mode_key', mode: 'test' });
    expectError(await rest('PUT', '/v1/settings/hipaa', { key: o.testKey, body: { retention_days: 30 } }), 403, 'FORBIDDEN');
    expectError(await rest('PUT', '/v1/settings/hipaa/baa', { key: o.testKey, body: { status: 'signed', signed_date: '2026-12-01' } }), 403, 'FORBIDDEN');
    expectGqlError(await gql('mutation { updateHipaaSettings(enabled: false) { enabled } }', {}, { key: o.testKey }), 'FORBIDDEN');
    expectGqlError(await gql('mutation { updateHipaaBaa(status: signed, signedDate: "2026-12-01") { baaStatus } }', {}, { key: o.testKey }), 'FORBIDDEN');
    // The live key and the test key still read the same, unchanged settings.
    expect((await rest('GET', '/v1/settings/hipaa', { key: o.liveKey })).body.data).toEqual(before);
    expect((await rest('GET', '/v1/settings/hipaa', { key: o.testKey })).body.data).toMatchObject({ enabled: true, retention_days: before.retention_days });
    expect(await audits()).toBe(audited);
  });

  it('a live key and an owner\'s bearer token change them; each change is audited with its credential', async () => {
    const o = await t.createOrg('business', 'Audited clinic');
    await enable(o);
    const liveKeyId = (await t.db.query(`select id from api_keys where organization_id = $1 and mode = 'live' and role = 'owner' order by id limit 1`, [o.orgId])).rows[0].id;
    const token = await t.mintToken(o.orgId, 'owner@clinic.test', 'owner', { mode: 'test' });
    const adminToken = await t.mintToken(o.orgId, 'admin@clinic.test', 'admin', { mode: 'live' });
    expectError(await rest('PUT', '/v1/settings/hipaa', { token: adminToken, key: undefined, body: { retention_days: 90 } }), 403, 'INSUFFICIENT_PERMISSIONS');
    expect((await rest('PUT', '/v1/settings/hipaa', { token, key: undefined, body: { retention_days: 90 } })).status).toBe(200);
    const viaGql = await gql('mutation { updateHipaaSettings(retentionDays: 120) { retentionDays } }', {}, { key: o.liveKey });
    expect(viaGql.body.data).toEqual({ updateHipaaSettings: { retentionDays: 120 } });
    const { rows } = await t.db.query(`select actor_type, actor_id, mode, action, details from audit_log_entries
      where organization_id = $1 and action like 'hipaa.%' order by id`, [o.orgId]);
    // enable(): the BAA and the mode with the live key; then the owner's token; then the live key again.
    expect(rows.map((r) => [r.action, r.actor_type, r.actor_id === liveKeyId ? 'live key' : r.actor_id, r.mode])).toEqual([
      ['hipaa.baa_updated', 'api_key', 'live key', 'live'],
      ['hipaa.enabled', 'api_key', 'live key', 'live'],
      ['hipaa.updated', 'user', rows[2].actor_id, 'test'],
      ['hipaa.updated', 'api_key', 'live key', 'live'],
    ]);
    expect(rows[2].actor_id).toMatch(/^usr_/);
    expect(rows[2].details.credential).toMatchObject({ type: 'user', id: rows[2].actor_id, email: 'owner@clinic.test', mode: 'test' });
    expect(rows[3].details).toMatchObject({ credential: { type: 'api_key', id: liveKeyId, mode: 'live' }, before: { retention_days: 90 }, after: { retention_days: 120 } });
  });
});

describe('sealed content and access', () => {
  let sms: any;
  let email: any;
  let inboundId: string;

  beforeAll(async () => {
    const hook = await rest('POST', '/v1/webhooks', { body: { url: receiver.url + '/hooks', events: ['message.queued', 'message.sent', 'message.delivered', 'message.received'] } });
    expect(hook.status, hook.text).toBe(201);
    const flow = await rest('POST', '/v1/flows', {
      body: {
        name: 'Intake', trigger: { type: 'inbound_message', channel: 'sms', keyword: 'intake' },
        definition: {
          nodes: [{ id: 't', type: 'trigger' }, { id: 'ack', type: 'send_message', config: { channel: 'sms', to: '{{input.from}}', body: 'Received: {{input.body}}' } }, { id: 'e', type: 'end' }],
          edges: [{ from: 't', to: 'ack' }, { from: 'ack', to: 'e' }],
        },
      },
    });
    expect(flow.status, flow.text).toBe(201);
    const s = await rest('POST', '/v1/messages/sms', {
      headers: { 'Idempotency-Key': `idem-${randomBytes(6).toString('hex')}` },
      body: { to: '+14155550101', body: `Your ${MARK} results are ready`, metadata: { diagnosis: `flu ${MARK}`, clinic: 'north' } },
    });
    expect(s.status, s.text).toBe(201);
    sms = s.body.data;
    // The sender sees what it sent.
    expect(sms.body).toBe(`Your ${MARK} results are ready`);
    const e = await rest('POST', '/v1/messages/email', {
      body: { to: ['patient@mail.test'], subject: `Lab ${MARK}`, html: `<p>${MARK}</p>`, text: `text ${MARK}`, metadata: { diagnosis: MARK } },
    });
    expect(e.status, e.text).toBe(201);
    email = e.body.data;
    const w = await rest('POST', '/v1/messages/rcs', { body: { to: '+14155550102', type: 'text', body: `rcs ${MARK}` } });
    expect(w.status, w.text).toBe(201);
    const inbound = await rest('POST', '/v1/sandbox/inbound', { body: { channel: 'sms', from: '+14155550103', body: `INTAKE my ${MARK} symptoms` } });
    expect(inbound.status, inbound.text).toBe(201);
    inboundId = inbound.body.data.id;
    await eventually('the SMS delivered', async () => ((await rest('GET', `/v1/messages/${sms.id}`)).body.data.status === 'delivered' ? true : undefined), 20_000);
    await eventually('the intake flow ran', async () => ((await rest('GET', '/v1/flows/executions')).body.data.some((x: any) => x.status === 'completed') ? true : undefined), 20_000);
    await eventually('webhooks delivered', () => (receiver.hits.length >= 4 ? true : undefined), 20_000);
  });

  it('flows: the inbound body starts the keyword trigger and is stored sealed with the execution, as is the step log', async () => {
    const ex = (await rest('GET', '/v1/flows/executions')).body.data.find((x: any) => x.trigger_type === 'inbound_message');
    expect(ex.input).toMatchObject({ from: '+14155550103', body: `INTAKE my ${MARK} symptoms` });
    const full = (await rest('GET', `/v1/flows/${ex.flow_id}/executions/${ex.id}`)).body.data;
    expect(full.steps.map((s: any) => s.node_id)).toEqual(['t', 'ack', 'e']);
    expect(full.steps[1].input).toEqual({ channel: 'sms', to: '+14155550103', body: `Received: INTAKE my ${MARK} symptoms` });
    const { rows } = await t.db.query('select input, output, phi from flow_execution_steps where execution_id = $1', [ex.id]);
    expect(rows.every((r) => r.input === null && r.output === null && /^phi1:/.test(r.phi))).toBe(true);
  });

  it('owner and admin read PHI; each read is in the PHI access log', async () => {
    const owner = await rest('GET', `/v1/messages/${sms.id}`);
    expect(owner.body.data).toMatchObject({ body: `Your ${MARK} results are ready`, metadata: { diagnosis: `flu ${MARK}`, clinic: 'north' } });
    const admin = await rest('GET', `/v1/messages/${email.id}`, { key: keys.admin });
    expect(admin.body.data).toMatchObject({ subject: `Lab ${MARK}`, html: `<p>${MARK}</p>`, text: `text ${MARK}` });
    const log = (await rest('GET', '/v1/settings/hipaa/phi-access-log', { key: keys.admin })).body.data;
    const entry = log.find((x: any) => x.resource_ids.includes(email.id) && x.role === 'admin');
    expect(entry).toMatchObject({ resource_type: 'message', operation: 'messaging.getMessage', actor_type: 'api_key', reason: null, fields: ['body', 'content', 'variables', 'metadata'], mode: 'test' });
    expect(entry.ip).toBeTruthy();
    expect(entry.request_id).toBeTruthy();
  });

  it('a developer reads PHI only with a reason code; viewer and billing never', async () => {
    const redacted = (await rest('GET', `/v1/messages/${sms.id}`, { key: keys.developer })).body.data;
    expect(redacted).toMatchObject({ body: '[REDACTED]', metadata: { diagnosis: '[REDACTED]', clinic: 'north' }, to: '+14155550101', status: 'delivered' });
    const emailRedacted = (await rest('GET', `/v1/messages/${email.id}`, { key: keys.developer })).body.data;
    expect(emailRedacted).toMatchObject({ subject: '[REDACTED]', html: '[REDACTED]', text: '[REDACTED]' });
    const before = (await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=100')).body.data.filter((x: any) => x.role === 'developer').length;
    expect(before).toBe(0);
    const withReason = await rest('GET', `/v1/messages/${sms.id}`, { key: keys.developer, headers: { 'X-PHI-Reason': 'treatment' } });
    expect(withReason.body.data.body).toBe(`Your ${MARK} results are ready`);
    const log = (await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=100')).body.data.filter((x: any) => x.role === 'developer');
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ reason: 'treatment', resource_ids: [sms.id] });
    expectError(await rest('GET', `/v1/messages/${sms.id}`, { key: keys.developer, headers: { 'X-PHI-Reason': 'curiosity' } }), 400, 'VALIDATION_ERROR');
    for (const role of ['viewer', 'billing'] as const) {
      const res = await rest('GET', `/v1/messages/${sms.id}`, { key: keys[role], headers: { 'X-PHI-Reason': 'treatment' } });
      if (role === 'billing') { expectError(res, 403, 'INSUFFICIENT_PERMISSIONS'); continue; }
      expect(res.body.data.body).toBe('[REDACTED]');
    }
    // Lists: the same rules, one log entry naming the page's messages.
    const list = await rest('GET', '/v1/messages?limit=10', { key: keys.developer, headers: { 'X-PHI-Reason': 'operations' } });
    expect(list.status).toBe(200);
    const listEntry = (await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=5')).body.data.find((x: any) => x.operation === 'messaging.listMessages');
    expect(listEntry).toMatchObject({ reason: 'operations', role: 'developer' });
    expect(listEntry.resource_ids).toEqual(expect.arrayContaining([sms.id, email.id, inboundId]));
  });

  it('GraphQL: the same rules, with the header or extensions.phiReason', async () => {
    const q = 'query($id: ID!) { message(id: $id) { body metadata } }';
    const plain = await gql(q, { id: sms.id }, { key: keys.developer });
    expect(plain.body.data.message).toEqual({ body: '[REDACTED]', metadata: { diagnosis: '[REDACTED]', clinic: 'north' } });
    clock.advance(1000);
    const res = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': keys.developer },
      body: JSON.stringify({ query: q, variables: { id: sms.id }, extensions: { phiReason: 'support' } }),
    });
    expect((await res.json()).data.message.body).toBe(`Your ${MARK} results are ready`);
    const header = await gql(q, { id: sms.id }, { key: keys.developer, headers: { 'X-PHI-Reason': 'legal' } });
    expect(header.body.data.message.body).toBe(`Your ${MARK} results are ready`);
    const reasons = (await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=5')).body.data.map((x: any) => x.reason);
    expect(reasons.slice(0, 2)).toEqual(['legal', 'support']);
    const log = await gql('{ phiAccessLog(first: 1) { edges { node { role reason resourceType } } } }', {}, { key: keys.admin });
    expect(log.body.data.phiAccessLog.edges[0].node).toEqual({ role: 'developer', reason: 'legal', resourceType: 'message' });
  });

  it('no plaintext PHI in any row of any table (outbox, jobs, idempotency, webhook log, flows) or in the logs', async () => {
    expect(await tablesHolding(t, [MARK])).toEqual([]);
    // The scan finds what is there: the sealed rows and the jobs exist.
    expect((await t.db.query(`select count(*)::int as c from messages where phi is not null and organization_id = $1`, [org.orgId])).rows[0].c).toBeGreaterThanOrEqual(4);
    expect(logs.length).toBeGreaterThan(10);
    expect(logs.filter((l) => l.includes(MARK))).toEqual([]);
    // The webhook receiver got events without content.
    expect(receiver.hits.some((h) => h.body.includes(MARK))).toBe(false);
  });

  it('the PHI access log is append-only at the database and keeps the newest 10,000 entries per organization', async () => {
    await expect(t.db.query('update phi_access_log set reason = null where organization_id = $1', [org.orgId])).rejects.toThrow(/append-only/);
    await expect(t.db.query('delete from phi_access_log where organization_id = $1', [org.orgId])).rejects.toThrow(/append-only/);
    await expect(t.db.query('truncate phi_access_log')).rejects.toThrow(/append-only/);
    const other = await t.createOrg('enterprise', 'Rotation');
    await t.db.query(
      `insert into phi_access_log (id, organization_id, mode, actor_type, actor_id, role, resource_type, resource_ids, fields, operation, created_at)
       select 'phi_' || lpad(i::text, 8, '0'), $1, 'test', 'user', 'u', 'owner', 'message', '[]', '[]', 'x', now() from generate_series(1, 10005) i`, [other.orgId]);
    const { rows } = await t.db.query('select count(*)::int as c, min(id) as oldest from phi_access_log where organization_id = $1', [other.orgId]);
    expect(rows[0]).toEqual({ c: 10_000, oldest: 'phi_00000006' });
    await expect(t.db.query(`delete from phi_access_log where id = 'phi_00000006'`)).rejects.toThrow(/append-only/);
    // Other organizations' entries are untouched.
    expect((await t.db.query('select count(*)::int as c from phi_access_log where organization_id = $1', [org.orgId])).rows[0].c).toBeGreaterThan(3);
  });
});

describe('key rotation', () => {
  it('a new data key version seals new content; a new master key re-wraps every data key; old content still opens', async () => {
    const o = await t.createOrg('enterprise', 'Rotation keys');
    await enable(o);
    const before = (await rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: '+14155550401', body: 'v1 content' } })).body.data.id;
    expect(await t.app.services.hipaaKeys.rotateDataKey(o.orgId)).toBe(2);
    const after = (await rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: '+14155550402', body: 'v2 content' } })).body.data.id;
    const phi = async (id: string) => (await t.db.query('select phi from messages where id = $1', [id])).rows[0].phi as string;
    expect(await phi(before)).toMatch(/^phi1:1:/);
    expect(await phi(after)).toMatch(/^phi1:2:/);
    // The master key changes: the new one first, the old one kept until everything is re-wrapped.
    const current = t.config.hipaa.masterKeys[0]!;
    const next = { id: 'k-next', key: randomBytes(32) };
    const rotating = new KeyRing({ pool: t.db, kms: new LocalKeyManagement([next, current]), clock });
    expect(await rotating.rewrapAll()).toBeGreaterThanOrEqual(2);
    expect(await rotating.rewrapAll()).toBe(0);
    expect((await t.db.query('select distinct master_key_id from hipaa_data_keys where organization_id = $1', [o.orgId])).rows).toEqual([{ master_key_id: 'k-next' }]);
    // A ring with only the new master key opens both versions.
    const only = await new KeyRing({ pool: t.db, kms: new LocalKeyManagement([next]), clock }).keysFor(o.orgId, [await phi(before), await phi(after)]);
    const ref = (id: string) => ({ table: 'messages', rowId: id, column: 'phi' });
    expect(JSON.parse(only.open(ref(before), await phi(before))).body).toBe('v1 content');
    expect(JSON.parse(only.open(ref(after), await phi(after))).body).toBe('v2 content');
  });
});

describe('retention and backfill', () => {
  it('content older than the retention period is purged in batches, idempotently; newer content, audit and PHI logs stay', async () => {
    const o = await t.createOrg('enterprise', 'Retention');
    await enable(o);
    await rest('PUT', '/v1/settings/hipaa', { key: o.liveKey, body: { retention_days: 30 } });
    const old = await Promise.all([1, 2, 3].map((i) => rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: `+1415555020${i}`, body: `old ${i}`, metadata: { diagnosis: 'x', ward: 'b' } } })));
    for (const r of old) expect(r.status, r.text).toBe(201);
    clock.advance(31 * 86_400_000);
    const fresh = await rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: '+14155550210', body: 'fresh' } });
    const audits = (await t.db.query('select count(*)::int as c from audit_log_entries where organization_id = $1', [o.orgId])).rows[0].c;
    const purged = await Promise.all([t.app.services.messageRetention.purgeExpired(), t.app.services.messageRetention.purgeExpired()]);
    expect(purged.reduce((a, b) => a + b, 0)).toBe(3);
    expect(await t.app.services.messageRetention.purgeExpired()).toBe(0);
    for (const r of old) {
      const m = (await rest('GET', `/v1/messages/${r.body.data.id}`, { key: o.testKey })).body.data;
      expect(m).toMatchObject({ body: null, metadata: { ward: 'b' }, status: expect.any(String), to: r.body.data.to });
    }
    expect((await rest('GET', `/v1/messages/${fresh.body.data.id}`, { key: o.testKey })).body.data.body).toBe('fresh');
    expect((await t.db.query('select count(*)::int as c from audit_log_entries where organization_id = $1', [o.orgId])).rows[0].c).toBeGreaterThanOrEqual(audits);
    expect((await t.db.query('select count(*)::int as c from phi_access_log where organization_id = $1', [o.orgId])).rows[0].c).toBeGreaterThan(0);
  });

  it('content stored before the mode was on is sealed by the backfill, once', async () => {
    const o = await t.createOrg('enterprise', 'Backfill');
    const before = await rest('POST', '/v1/messages/sms', { key: o.testKey, body: { to: '+14155550301', body: `before ${MARK}` } });
    expect((await t.db.query('select body from messages where id = $1', [before.body.data.id])).rows[0].body).toBe(`before ${MARK}`);
    await enable(o);
    clock.advance(1000);
    expect(await t.app.services.messageRetention.sealBackfill()).toBeGreaterThanOrEqual(1);
    const row = (await t.db.query('select body, phi from messages where id = $1', [before.body.data.id])).rows[0];
    expect(row.body).toBeNull();
    expect(row.phi).toMatch(/^phi1:1:/);
    expect((await rest('GET', `/v1/messages/${before.body.data.id}`, { key: o.testKey })).body.data.body).toBe(`before ${MARK}`);
    expect(await t.app.services.messageRetention.sealBackfill()).toBe(0);
  });
});
