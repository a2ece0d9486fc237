/**
 * Verify end to end over HTTP, against the real database with pg-boss workers, the sandbox
 * providers and a manual clock: settings per organization and listing with filters and cursors. The
 * other verify-*.test.ts files cover the rest; shared setup is in helpers/verify.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { phone, email, expectError, wrong, startVerifyApp, verifyHelpers, type VerificationView } from './helpers/verify.ts';

let t: TestApp;
let org: TestOrg;
const app = useFileApp(startVerifyApp);
beforeAll(() => { ({ t, org } = app()); });

const { clock, call, send, check, sentPayload, codeOf } = verifyHelpers(() => t, () => org);

describe('settings', () => {
  it('GET shows the defaults; PUT changes the expiry, length, attempts and app name of later sends; null resets', async () => {
    const o = await t.createOrg('enterprise', 'Settings org');
    const key = o.testKey;
    const initial = await call('GET', '/v1/verify/settings', { key });
    expect(initial.status, initial.text).toBe(200);
    expect(initial.body.data).toEqual({ mode: 'test', code_ttl_seconds: 600, code_length: 6, max_attempts: 5, app_name: null, updated_at: null });

    const put = await call('PUT', '/v1/verify/settings', { key, body: { code_ttl_seconds: 120, code_length: 7, max_attempts: 3, app_name: 'Acme' } });
    expect(put.status, put.text).toBe(200);
    expect(put.body.data).toMatchObject({ mode: 'test', code_ttl_seconds: 120, code_length: 7, max_attempts: 3, app_name: 'Acme' });
    expect(put.body.data.updated_at).not.toBeNull();
    // Per mode: live keeps its defaults.
    expect((await call('GET', '/v1/verify/settings', { key: o.liveKey })).body.data).toMatchObject({ mode: 'live', code_ttl_seconds: 600 });

    const v = await send({ to: phone(), channel: 'sms' }, key);
    expect(v).toMatchObject({ code_length: 7, max_attempts: 3 });
    expect(Date.parse(v.expires_at) - Date.parse(v.created_at)).toBe(120_000);
    expect((await sentPayload(v.id)).body).toMatch(/^Your Acme verification code is: \d{7}\n/);
    // A send's own values win over the settings.
    const w = await send({ to: phone(), channel: 'sms', code_length: 4, max_attempts: 9 }, key);
    expect(w).toMatchObject({ code_length: 4, max_attempts: 9 });

    const code = await codeOf(v.id, key);
    clock().advance(120_000);
    expect((await check(v.id, code, key)).body.data.status).toBe('expired');

    // Fields left out keep their value; null resets to the default.
    const partial = await call('PUT', '/v1/verify/settings', { key, body: { code_ttl_seconds: null, app_name: null } });
    expect(partial.body.data).toMatchObject({ code_ttl_seconds: 600, code_length: 7, max_attempts: 3, app_name: null });

    for (const body of [{ code_ttl_seconds: 59 }, { code_ttl_seconds: 86_401 }, { code_length: 3 }, { max_attempts: 11 }, { app_name: 'x'.repeat(31) }, { app_name: '<script>' }]) {
      expectError(await call('PUT', '/v1/verify/settings', { key, body }), 422, 'VALIDATION_ERROR');
    }
    const audit = await t.db.query(`select details from audit_log_entries where organization_id = $1 and action = 'verify.settings_updated' order by id`, [o.orgId]);
    expect(audit.rows.map((r) => r.details.changes)).toEqual([
      { code_ttl_seconds: 120, code_length: 7, max_attempts: 3, app_name: 'Acme' },
      { code_ttl_seconds: null, app_name: null },
    ]);
    // Only owners and admins change them.
    const dev = await t.createKey(o.orgId, 'developer');
    expectError(await call('PUT', '/v1/verify/settings', { key: dev, body: { code_length: 5 } }), 403, 'INSUFFICIENT_PERMISSIONS');
  });
});

describe('listing', () => {
  it('filters by status, channel and recipient and pages with cursors', async () => {
    const o = await t.createOrg('enterprise', 'List org');
    const key = o.testKey;
    const a = await send({ to: phone(), channel: 'sms' }, key);
    const b = await send({ to: email(), channel: 'email' }, key);
    const c = await send({ to: phone(), channel: 'sms', max_attempts: 1 }, key);
    const d = await send({ to: phone(), channel: 'sms', code_length: 4 }, key);
    expect((await check(a.id, await codeOf(a.id, key), key)).body.data.status).toBe('approved');
    expect((await check(c.id, wrong(await codeOf(c.id, key)), key)).body.data.status).toBe('maxed');
    expect((await check(d.id, wrong(await codeOf(d.id, key)), key)).body.data.status).toBe('rejected');

    const ids = async (query: string) => {
      const r = await call('GET', `/v1/verify${query}`, { key });
      expect(r.status, r.text).toBe(200);
      return r.body.data.map((v: VerificationView) => v.id);
    };
    expect(await ids('')).toEqual([d.id, c.id, b.id, a.id]);
    expect(await ids('?status=approved')).toEqual([a.id]);
    expect(await ids('?status=maxed')).toEqual([c.id]);
    expect(await ids('?status=rejected')).toEqual([d.id]);
    expect(await ids('?status=pending')).toEqual([b.id]);
    expect(await ids('?channel=email')).toEqual([b.id]);
    expect(await ids('?channel=sms&status=approved')).toEqual([a.id]);
    expect(await ids(`?to=${encodeURIComponent(b.to.toUpperCase())}`)).toEqual([b.id]);

    const page1 = await call('GET', '/v1/verify?limit=2', { key });
    expect(page1.body.meta.pagination.has_more).toBe(true);
    const page2 = await call('GET', `/v1/verify?limit=2&cursor=${encodeURIComponent(page1.body.meta.pagination.cursor)}`, { key });
    expect([...page1.body.data, ...page2.body.data].map((v: VerificationView) => v.id)).toEqual([d.id, c.id, b.id, a.id]);
    expect(page2.body.meta.pagination.has_more).toBe(false);
    // A cursor is bound to its filters.
    expectError(await call('GET', `/v1/verify?limit=2&status=pending&cursor=${encodeURIComponent(page1.body.meta.pagination.cursor)}`, { key }), 400, 'INVALID_CURSOR');
    expectError(await call('GET', '/v1/verify?status=canceled', { key }), 422, 'VALIDATION_ERROR');

    // As of now: the pending and rejected ones list as expired once their time is up.
    clock().advance(600_000);
    expect(await ids('?status=expired')).toEqual([d.id, b.id]);
    expect(await ids('?status=pending')).toEqual([]);
    expect(await ids('?status=rejected')).toEqual([]);
  });
});
