/**
 * Credentials are cached per instance only while that instance listens for changes: a revocation,
 * an allowlist change or a role change on one instance takes effect on every other instance.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../src/app.ts';
import { createLogger } from '../src/platform/logger.ts';
import type { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually as pollUntil } from './helpers/assertions.ts';

let t: TestApp;
let second: App;
let secondUrl: string;
let org: TestOrg;

beforeAll(async () => {
  t = await startTestApp();
  second = await createApp({ config: t.config, databaseUrl: t.databaseUrl, clock: t.clock, log: createLogger('silent') });
  await second.start({ workers: false });
  secondUrl = `http://127.0.0.1:${(await second.http.listen(0, '127.0.0.1')).port}`;
  org = await t.createOrg('enterprise');
});
afterAll(async () => {
  await second?.stop();
  await t?.close();
});

const onSecond = async (path: string, key: string) => (await fetch(`${secondUrl}${path}`, { headers: { 'X-API-Key': key } })).status;

/** Whether `probe` comes true within about 2 s (assertions.ts's `eventually`). */
const eventually = (probe: () => Promise<boolean>): Promise<boolean> => pollUntil('the other instance', async () => (await probe()) || undefined, 2000, 20).then(() => true, () => false);

describe('credential cache across instances', () => {
  it('a key revoked on one instance stops working on the other', async () => {
    const key = await t.createKey(org.orgId, 'developer');
    const id = (await t.rest('GET', '/v1/settings/organization', { key })).body.data.actor.id;
    // Warm the second instance's cache twice (the second hit is served from the cache).
    expect(await onSecond('/v1/settings/organization', key)).toBe(200);
    expect(await onSecond('/v1/settings/organization', key)).toBe(200);
    (t.clock as ManualClock).advance(1000);
    const revoked = await t.rest('DELETE', `/v1/settings/api-keys/${id}`, { key: org.testKey });
    expect(revoked.status).toBe(200);
    // The revoking instance drops its cache at once; the other hears the NOTIFY at commit.
    expect((await t.rest('GET', '/v1/settings/organization', { key })).status).toBe(401);
    expect(await eventually(async () => (await onSecond('/v1/settings/organization', key)) === 401)).toBe(true);
  });

  it('an allowlist change on one instance applies on the other', async () => {
    const other = await t.createOrg('enterprise');
    expect(await onSecond('/v1/settings/organization', other.testKey)).toBe(200);
    const r = await t.rest('PUT', '/v1/settings/ip-allowlist', { key: other.testKey, body: { entries: ['10.0.0.0/8'] } });
    expect(r.status).toBe(200);
    expect(await eventually(async () => (await onSecond('/v1/settings/organization', other.testKey)) === 403)).toBe(true);
  });

  it('a change made by another process (the admin CLI path) also reaches the cache', async () => {
    const key = await t.createKey(org.orgId, 'viewer');
    expect(await onSecond('/v1/settings/organization', key)).toBe(200);
    // Revoke straight in the database plus the notification, as another process would.
    const id = (await t.db.query(`select id from api_keys where organization_id = $1 and role = 'viewer' and revoked_at is null`, [org.orgId])).rows[0].id;
    await t.db.query(`update api_keys set revoked_at = now() where id = $1`, [id]);
    await t.db.query(`select pg_notify('auth_changed', '')`);
    expect(await eventually(async () => (await onSecond('/v1/settings/organization', key)) === 401)).toBe(true);
  });
});
