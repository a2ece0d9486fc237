/**
 * Fault scenario 3 (quick form): the service's database stops accepting connections and comes
 * back. During the outage requests answer promptly with 503 SERVICE_UNAVAILABLE and Retry-After
 * (no 500s, no hanging connections) and /readyz says not ready; afterwards the same process
 * recovers by itself, and nothing committed before the outage is lost.
 *
 * The outage is made with `ALLOW_CONNECTIONS false` on this file's own database plus terminating
 * its backends (it applies to superusers too), so the machine's shared server keeps running.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { startTestApp, type TestApp, type TestOrg } from '../helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
let admin: pg.Client;
let dbName: string;

beforeAll(async () => {
  t = await startTestApp({ env: { DB_CONNECT_TIMEOUT_MS: '1000' } });
  org = await t.createOrg('growth');
  admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await admin.connect();
  dbName = new URL(t.databaseUrl).pathname.slice(1);
});
afterAll(async () => {
  await admin?.query(`alter database "${dbName}" allow_connections true`).catch(() => {});
  await admin?.end();
  await t?.close();
});

async function outage(on: boolean): Promise<void> {
  await admin.query(`alter database "${dbName}" allow_connections ${on ? 'false' : 'true'}`);
  if (on) await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [dbName]);
}

describe('database outage', () => {
  it('answers 503 SERVICE_UNAVAILABLE with Retry-After while the database is away, then recovers without a restart', async () => {
    const sent = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+15005550006', body: 'before the outage' } });
    expect(sent.status).toBe(201);

    await outage(true);
    try {
      const codes: Record<string, number> = {};
      for (let i = 0; i < 6; i++) {
        const started = Date.now();
        const r = await t.rest('GET', '/v1/settings/organization', { key: org.testKey });
        // Bounded by DB_CONNECT_TIMEOUT_MS (1 s) plus the request's own work.
        expect(Date.now() - started).toBeLessThan(4000);
        codes[`${r.status} ${r.body?.error?.code}`] = (codes[`${r.status} ${r.body?.error?.code}`] ?? 0) + 1;
        if (r.status === 503) {
          expect(r.body.error.code).toBe('SERVICE_UNAVAILABLE');
          expect(r.headers.get('retry-after')).toBe('5');
          expect(r.body.error.details).toMatchObject({ retry_after: 5, reason: 'database_unavailable' });
        }
      }
      expect(Object.keys(codes)).toEqual(['503 SERVICE_UNAVAILABLE']);
      const gql = await t.gql('{ viewer { role } }', {}, { key: org.testKey });
      expect(gql.status).toBe(503);
      expect(gql.body.errors?.[0].extensions.code).toBe('SERVICE_UNAVAILABLE');
      const ready = await t.rest('GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.database).toBe(false);
    } finally {
      await outage(false);
    }

    // Recovers by itself within 10 s.
    const deadline = Date.now() + 10_000;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await t.rest('GET', '/v1/settings/organization', { key: org.testKey })).status;
      if (status === 200) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(200);
    expect((await t.rest('GET', '/readyz')).status).toBe(200);
    const again = await t.rest('GET', `/v1/messages/${sent.body.data.id}`, { key: org.testKey });
    expect(again.status).toBe(200);
    expect(again.body.data.body).toBe('before the outage');
  });
});
