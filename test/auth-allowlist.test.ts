/**
 * The IP allowlist end to end over HTTP: IPv4/IPv6/mapped forms, X-Forwarded-For only behind a
 * trusted proxy, and its audit entries.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { expectError, expectGqlError, eventually } from './helpers/assertions.ts';
import { authHelpers, useAuthApp } from './helpers/auth.ts';

const file = useAuthApp();
let t: TestApp;
beforeAll(() => { t = file(); });
const { newOrg, findAudit, whoAmI } = authHelpers(() => t);

describe('IP allowlist', () => {
  /** A fresh organization (so lock-outs stay local) with the allowlist set through the API. */
  async function orgWithAllowlist(entries: string[]): Promise<{ org: TestOrg; res: HttpResponse }> {
    const org = await newOrg();
    const res = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries } });
    return { org, res };
  }

  it.each([
    ['127.0.0.1', ['127.0.0.1']],
    ['127.0.0.0/8', ['127.0.0.0/8']],
    ['::ffff:127.0.0.1 (IPv4-mapped)', ['::ffff:127.0.0.1']],
    ['a list that also holds other ranges', ['10.0.0.0/8', '2001:db8::/32', '127.0.0.1']],
  ])('allows 127.0.0.1 when the list holds %s', async (_label, entries) => {
    const { org, res } = await orgWithAllowlist(entries);
    expect(res.status).toBe(200);
    expect(res.body.data.entries).toHaveLength(entries.length);
    const get = await t.rest('GET', '/v1/settings/ip-allowlist', { key: org.liveKey });
    expect(get.status).toBe(200);
    expect(get.body.data.entries).toEqual(res.body.data.entries);
    expect((await whoAmI({ key: org.testKey })).organization.id).toBe(org.orgId);
    const token = await t.mintToken(org.orgId, `allowed-${org.orgId}@example.com`, 'viewer');
    expect((await whoAmI({ token })).role).toBe('viewer');
  });

  it('denies requests from 127.0.0.1 with 403 FORBIDDEN when the list only holds 10.0.0.0/8 (keys, tokens, GraphQL)', async () => {
    const { org, res } = await orgWithAllowlist(['10.0.0.0/8']);
    expect(res.status).toBe(200);
    expect(res.body.data.entries).toEqual(['10.0.0.0/8']);

    const body = await expectError(await t.rest('GET', '/v1/settings/organization', { key: org.liveKey }), 403, 'FORBIDDEN');
    expect(body.error.details.ip).toBe('127.0.0.1');
    const token = await t.mintToken(org.orgId, 'blocked@example.com', 'owner');
    await expectError(await t.rest('GET', '/v1/settings/organization', { token }), 403, 'FORBIDDEN');
    const gql = await t.gql('{ viewer { role } }', {}, { key: org.testKey });
    expect(gql.status).toBe(403);
    expectGqlError(gql, 'FORBIDDEN');
    // Even the owner cannot lift it from the wrong address.
    await expectError(await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: [] } }), 403, 'FORBIDDEN');
    const { rows } = await t.db.query('select ip_allowlist from organizations where id = $1', [org.orgId]);
    expect(rows[0].ip_allowlist).toEqual(['10.0.0.0/8']);

    // The denial is audited (fire-and-forget, so poll the table).
    const denied = await eventually('auth.ip_denied audit', async () => {
      const r = await t.db.query(`select * from audit_log_entries where organization_id = $1 and action = 'auth.ip_denied'`, [org.orgId]);
      return r.rows.length > 0 ? r.rows : undefined;
    });
    expect(denied[0].ip).toBe('127.0.0.1');
    expect(denied[0].details).toMatchObject({ ip: '127.0.0.1', denied: true });
  });

  it('an IPv6-only list accepts IPv6 CIDRs and denies an IPv4 client', async () => {
    const { org, res } = await orgWithAllowlist(['2001:DB8::/32', 'fd00::1']);
    expect(res.status).toBe(200);
    expect(res.body.data.entries).toEqual(['2001:db8::/32', 'fd00::1']);
    await expectError(await t.rest('GET', '/v1/settings/organization', { key: org.liveKey }), 403, 'FORBIDDEN');
  });

  it('an empty list lifts the restriction', async () => {
    const org = await newOrg();
    expect((await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: ['127.0.0.1'] } })).status).toBe(200);
    const cleared = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: [] } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.data.entries).toEqual([]);
    const { rows } = await t.db.query('select ip_allowlist from organizations where id = $1', [org.orgId]);
    expect(rows[0].ip_allowlist).toEqual([]);
  });

  it('rejects invalid entries with 422 VALIDATION_ERROR and leaves the list unchanged', async () => {
    const { org, res } = await orgWithAllowlist(['127.0.0.1']);
    expect(res.status).toBe(200);
    for (const bad of ['not-an-ip', '10.0.0.0/33', '300.1.2.3', '10.0.0.0/8/1', '2001:db8::/129', '10.0.0.0/-1', '']) {
      const r = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: ['10.0.0.0/8', bad] } });
      const body = await expectError(r, 422, 'VALIDATION_ERROR');
      expect(String(body.error.details.field)).toMatch(/^entries/);
    }
    const get = await t.rest('GET', '/v1/settings/ip-allowlist', { key: org.liveKey });
    expect(get.body.data.entries).toEqual(['127.0.0.1']);
    // GraphQL twin validates the same way.
    const gql = await t.gql('mutation { setIpAllowlist(entries: ["999.0.0.1"]) }', {}, { key: org.liveKey });
    expectGqlError(gql, 'VALIDATION_ERROR');
  });

  it('only admins may change the allowlist', async () => {
    const org = await newOrg();
    const devKey = await t.createKey(org.orgId, 'developer');
    await expectError(await t.rest('PUT', '/v1/settings/ip-allowlist', { key: devKey, body: { entries: ['10.0.0.0/8'] } }), 403, 'INSUFFICIENT_PERMISSIONS');
    expect((await whoAmI({ key: org.liveKey })).role).toBe('owner');
  });

  it('ignores X-Forwarded-For when the peer is not a trusted proxy', async () => {
    const { org, res } = await orgWithAllowlist(['203.0.113.0/24']);
    expect(res.status).toBe(200);
    const body = await expectError(
      await t.rest('GET', '/v1/settings/organization', { key: org.liveKey, headers: { 'X-Forwarded-For': '203.0.113.7' } }), 403, 'FORBIDDEN',
    );
    expect(body.error.details.ip).toBe('127.0.0.1');
  });

  describe('behind a trusted proxy', () => {
    let tp: TestApp;
    beforeAll(async () => { tp = await startTestApp({ env: { TRUSTED_PROXIES: '127.0.0.1' } }); });
    afterAll(async () => { await tp?.close(); });
    beforeEach(() => { (tp.clock as ManualClock).advance(1_000); });

    const get = (key: string, xff?: string) =>
      tp.rest('GET', '/v1/settings/organization', { key, ...(xff ? { headers: { 'X-Forwarded-For': xff } } : {}) });

    it('honours X-Forwarded-For (right-most untrusted hop) from a trusted peer', async () => {
      const org = await tp.createOrg('enterprise');
      const put = await tp.rest('PUT', '/v1/settings/ip-allowlist', { key: org.liveKey, body: { entries: ['203.0.113.0/24'] } });
      expect(put.status).toBe(200);

      const ok = await get(org.liveKey, '203.0.113.7');
      expect(ok.status).toBe(200);
      expect(ok.body.data.organization.id).toBe(org.orgId);
      // Trusted hops on the right are skipped; a spoofed left-most entry does not matter.
      expect((await get(org.liveKey, '198.51.100.9, 203.0.113.7')).status).toBe(200);
      expect((await get(org.liveKey, '203.0.113.7, 127.0.0.1')).status).toBe(200);

      // Without the header the peer itself (127.0.0.1) is the client: denied.
      const direct = await expectError(await get(org.liveKey), 403, 'FORBIDDEN');
      expect(direct.error.details.ip).toBe('127.0.0.1');
      // A client cannot smuggle an allowed address in front of its own.
      const smuggled = await expectError(await get(org.liveKey, '203.0.113.7, 198.51.100.9'), 403, 'FORBIDDEN');
      expect(smuggled.error.details.ip).toBe('198.51.100.9');

      // The audit log records the forwarded client address.
      const created = await tp.rest('POST', '/v1/settings/api-keys', { key: org.liveKey, body: { role: 'viewer' }, headers: { 'X-Forwarded-For': '203.0.113.7' } });
      expect(created.status).toBe(201);
      const entry = await findAudit(org.liveKey, 'api_key.created via proxy', (e) => e.action === 'api_key.created' && e.resource_id === created.body.data.id,
        tp, { 'X-Forwarded-For': '203.0.113.7' });
      expect(entry.ip).toBe('203.0.113.7');
    });
  });
});
