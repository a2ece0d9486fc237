/**
 * The audit log end to end over HTTP: what is recorded for keys, members and settings, its
 * filters, and its exports.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { type TestApp, type TestOrg } from './helpers/testApp.ts';
import { expectError, expectGqlError } from './helpers/assertions.ts';
import { authHelpers, type AuditEntry, useAuthApp } from './helpers/auth.ts';

const file = useAuthApp();
let t: TestApp;
let clock: ManualClock;
beforeAll(() => { t = file(); clock = t.clock as ManualClock; });
const { newOrg, auditLogs, findAudit, whoAmI, createKey } = authHelpers(() => t);

describe('audit log', () => {
  let org: TestOrg;
  let adminKey: string;
  let adminKeyId: string;
  beforeAll(async () => {
    org = await newOrg();
    adminKey = await t.createKey(org.orgId, 'admin', 'live');
    adminKeyId = (await whoAmI({ key: adminKey })).actor.id;
  });

  it('records key creation and revocation with actor, action, resource and ip', async () => {
    const created = await createKey(adminKey, { name: 'audited', role: 'developer' });
    expect(created.status).toBe(201);
    const keyId = created.body.data.id as string;
    const revoked = await t.rest('DELETE', `/v1/settings/api-keys/${keyId}`, { key: adminKey });
    expect(revoked.status).toBe(200);

    const entries = await auditLogs(org.liveKey);
    const creation = entries.find((e) => e.action === 'api_key.created' && e.resource_id === keyId);
    expect(creation).toMatchObject({
      actor_type: 'api_key', actor_id: adminKeyId, resource_type: 'api_key', resource_id: keyId, ip: '127.0.0.1',
      request_id: created.body.meta.request_id, details: { role: 'developer', mode: 'live' },
    });
    const revocation = entries.find((e) => e.action === 'api_key.revoked' && e.resource_id === keyId);
    expect(revocation).toMatchObject({
      actor_type: 'api_key', actor_id: adminKeyId, resource_type: 'api_key', resource_id: keyId, ip: '127.0.0.1',
      request_id: revoked.body.meta.request_id,
    });
    // The key never appears in the audit log.
    expect(JSON.stringify(entries)).not.toContain(created.body.data.key.slice(12));

    // Using the revoked key is audited as a denial.
    await expectError(await t.rest('GET', '/v1/settings/organization', { key: created.body.data.key }), 401, 'INVALID_API_KEY');
    const used = await findAudit(org.liveKey, 'auth.api_key_revoked_used', (e) => e.action === 'auth.api_key_revoked_used' && e.actor_id === keyId);
    expect(used).toMatchObject({ actor_type: 'api_key', ip: '127.0.0.1', details: { denied: true } });

    // A single entry is readable by id.
    const one = await t.rest('GET', `/v1/settings/audit-logs/${creation!.id}`, { key: org.liveKey });
    expect(one.status).toBe(200);
    expect(one.body.data).toEqual(creation);
  });

  it('records IP allowlist changes with before and after', async () => {
    const set = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: adminKey, body: { entries: ['127.0.0.0/8', '2001:db8::/32'] } });
    expect(set.status).toBe(200);
    const reset = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: adminKey, body: { entries: [] } });
    expect(reset.status).toBe(200);

    const entries = (await auditLogs(org.liveKey)).filter((e) => e.action === 'settings.ip_allowlist_updated');
    const first = entries.find((e) => e.request_id === set.body.meta.request_id);
    expect(first).toMatchObject({
      actor_type: 'api_key', actor_id: adminKeyId, resource_type: 'organization', resource_id: org.orgId, ip: '127.0.0.1',
      details: { before: [], after: ['127.0.0.0/8', '2001:db8::/32'] },
    });
    const second = entries.find((e) => e.request_id === reset.body.meta.request_id);
    expect(second?.details).toEqual({ before: ['127.0.0.0/8', '2001:db8::/32'], after: [] });
  });

  it('records a permission-denied request', async () => {
    const viewerKey = await t.createKey(org.orgId, 'viewer', 'live');
    const viewerId = (await whoAmI({ key: viewerKey })).actor.id;
    const res = await createKey(viewerKey, { role: 'owner' });
    await expectError(res, 403, 'INSUFFICIENT_PERMISSIONS');
    const entry = await findAudit(org.liveKey, 'auth.permission_denied', (e) => e.action === 'auth.permission_denied' && e.actor_id === viewerId);
    expect(entry).toMatchObject({
      actor_type: 'api_key', actor_id: viewerId, ip: '127.0.0.1', request_id: res.body.meta.request_id,
      details: { operation: 'settings.createApiKey', role: 'viewer', denied: true },
    });
    // The denied request created nothing.
    const { rows } = await t.db.query(`select count(*)::int as n from api_keys where organization_id = $1 and created_by = $2`, [org.orgId, viewerId]);
    expect(rows[0].n).toBe(0);
  });

  it('records a permission-denied GraphQL operation the same way', async () => {
    const viewerKey = await t.createKey(org.orgId, 'viewer', 'live');
    const viewerId = (await whoAmI({ key: viewerKey })).actor.id;
    const res = await t.gql('mutation { setIpAllowlist(entries: ["10.0.0.0/8"]) }', {}, { key: viewerKey });
    expectGqlError(res, 'INSUFFICIENT_PERMISSIONS');
    const entry = await findAudit(org.liveKey, 'auth.permission_denied (GraphQL)', (e) => e.action === 'auth.permission_denied' && e.actor_id === viewerId);
    expect(entry).toMatchObject({ actor_type: 'api_key', ip: '127.0.0.1', details: { field: 'Mutation.setIpAllowlist', role: 'viewer', denied: true } });
    const { rows } = await t.db.query('select ip_allowlist from organizations where id = $1', [org.orgId]);
    expect(rows[0].ip_allowlist).toEqual([]);
  });

  it('records the first use of a bearer token session once', async () => {
    const email = 'session-user@example.com';
    const token = await t.mintToken(org.orgId, email, 'developer', { sid: 'sess-audit-1' });
    const [a, b] = await Promise.all([
      t.rest('GET', '/v1/settings/organization', { token }),
      t.rest('GET', '/v1/settings/organization', { token }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect((await whoAmI({ token })).role).toBe('developer');
    const userId = a.body.data.actor.id as string;
    expect(userId).toMatch(/^usr_/);

    const started = (await auditLogs(org.liveKey)).filter((e) => e.action === 'auth.token_session_started');
    expect(started).toHaveLength(1);
    expect(started[0]).toMatchObject({ actor_type: 'user', actor_id: userId, ip: '127.0.0.1', details: { session_id: 'sess-audit-1' } });
    expect([a.body.meta.request_id, b.body.meta.request_id]).toContain(started[0]!.request_id);

    // A new token for the same session is still the same session; a new sid is a new one.
    const sameSession = await t.mintToken(org.orgId, email, 'developer', { sid: 'sess-audit-1' });
    expect((await whoAmI({ token: sameSession })).actor.id).toBe(userId);
    const otherSession = await t.mintToken(org.orgId, email, 'developer', { sid: 'sess-audit-2' });
    expect((await whoAmI({ token: otherSession })).actor.id).toBe(userId);
    const after = (await auditLogs(org.liveKey)).filter((e) => e.action === 'auth.token_session_started');
    expect(after.map((e) => e.details.session_id).sort()).toEqual(['sess-audit-1', 'sess-audit-2']);
    const { rows } = await t.db.query('select session_id, user_id from token_sessions where organization_id = $1 order by session_id', [org.orgId]);
    expect(rows).toEqual([{ session_id: 'sess-audit-1', user_id: userId }, { session_id: 'sess-audit-2', user_id: userId }]);
  });

  it('only admins read the audit log', async () => {
    const devKey = await t.createKey(org.orgId, 'developer', 'live');
    await expectError(await t.rest('GET', '/v1/settings/audit-logs', { key: devKey }), 403, 'INSUFFICIENT_PERMISSIONS');
    await expectError(await t.rest('GET', '/v1/settings/audit-logs/export?format=csv', { key: devKey }), 403, 'INSUFFICIENT_PERMISSIONS');
  });

  describe('export', () => {
    it('CSV: text/csv with a header row and the entries', async () => {
      const created = await createKey(adminKey, { name: 'for export', role: 'viewer' });
      expect(created.status).toBe(201);
      const res = await t.rest('GET', '/v1/settings/audit-logs/export?format=csv&date_range=90d', { key: org.liveKey });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
      expect(res.headers.get('content-disposition')).toMatch(/^attachment/);
      const lines = res.text.split('\r\n').filter(Boolean);
      expect(lines[0]).toBe('id,created_at,actor_type,actor_id,action,resource_type,resource_id,ip,request_id,details');
      const row = lines.find((l) => l.includes(`"${created.body.data.id}"`) && l.includes('"api_key.created"'));
      expect(row).toBeDefined();
      expect(row).toContain('"127.0.0.1"');
      expect(row).toContain(`"${adminKeyId}"`);
      expect(lines.length).toBeGreaterThan(3);
    });

    it('JSON: the envelope with an array of entries', async () => {
      const res = await t.rest('GET', '/v1/settings/audit-logs/export?format=json&date_range=90d', { key: org.liveKey });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Array.isArray(res.body.data)).toBe(true);
      const entries = res.body.data as AuditEntry[];
      expect(entries.length).toBeGreaterThan(3);
      expect(entries.some((e) => e.action === 'api_key.created' && e.actor_id === adminKeyId)).toBe(true);
      expect(entries.every((e) => typeof e.id === 'string' && typeof e.action === 'string' && typeof e.created_at === 'string')).toBe(true);
      expect(res.body.meta.request_id).toMatch(/^req_/);
    });

    it('exports are audited', async () => {
      const res = await t.rest('GET', '/v1/settings/audit-logs/export?format=json&date_range=7d', { key: org.liveKey });
      expect(res.status).toBe(200);
      const entry = await findAudit(org.liveKey, 'audit_log.exported', (e) => e.action === 'audit_log.exported' && e.request_id === res.body.meta.request_id);
      expect(entry).toMatchObject({ actor_type: 'api_key', ip: '127.0.0.1', details: { format: 'json', date_range: '7d' } });
    });

    it('a date range beyond the 90-day retention → 422 VALIDATION_ERROR', async () => {
      await expectError(await t.rest('GET', '/v1/settings/audit-logs/export?format=csv&date_range=91d', { key: org.liveKey }), 422, 'VALIDATION_ERROR');
      await expectError(await t.rest('GET', '/v1/settings/audit-logs/export?format=csv&date_range=0d', { key: org.liveKey }), 422, 'VALIDATION_ERROR');
      await expectError(await t.rest('GET', '/v1/settings/audit-logs/export?format=xml', { key: org.liveKey }), 422, 'VALIDATION_ERROR');
      const gql = await t.gql('{ auditLogExport(format: csv, dateRange: "91d") { count } }', {}, { key: org.liveKey });
      expectGqlError(gql, 'VALIDATION_ERROR');
    });

    it('GraphQL auditLogExport(format: csv) returns the CSV content', async () => {
      const res = await t.gql<{ auditLogExport: { format: string; count: number; contentType: string; content: string } }>(
        '{ auditLogExport(format: csv) { format count contentType content } }', {}, { key: org.liveKey },
      );
      expect(res.body.errors).toBeUndefined();
      const out = res.body.data!.auditLogExport;
      expect(out.format).toBe('csv');
      expect(out.contentType).toBe('text/csv');
      const lines = out.content.split('\r\n').filter(Boolean);
      expect(lines[0]).toBe('id,created_at,actor_type,actor_id,action,resource_type,resource_id,ip,request_id,details');
      expect(lines.length - 1).toBe(out.count);
      expect(out.count).toBeGreaterThan(3);
      expect(lines.some((l) => l.includes('"api_key.created"'))).toBe(true);
    });

    it('the export only covers the requested window', async () => {
      const other = await newOrg();
      await t.rest('PUT', '/v1/settings/ip-allowlist', { key: other.liveKey, body: { entries: [] } });
      clock.advance(3 * 86_400_000);
      const recent = await t.rest('GET', '/v1/settings/audit-logs/export?format=json&date_range=2d', { key: other.liveKey });
      expect(recent.status).toBe(200);
      expect((recent.body.data as AuditEntry[]).some((e) => e.action === 'settings.ip_allowlist_updated')).toBe(false);
      const wider = await t.rest('GET', '/v1/settings/audit-logs/export?format=json&date_range=4d', { key: other.liveKey });
      expect((wider.body.data as AuditEntry[]).some((e) => e.action === 'settings.ip_allowlist_updated')).toBe(true);
    });
  });
});
