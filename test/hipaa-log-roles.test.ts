/**
 * The PHI access log against the service's own database role (issue 43 #7): the service runs as a
 * role that owns nothing (test/helpers/globalSetup.ts, src/platform/db/roles.ts), so what bypassed
 * the append-only triggers when it owned the table — `ALTER TABLE … DISABLE TRIGGER`, `SET LOCAL
 * session_replication_role = replica`, a plain DELETE of an entry with 10,000 newer ones — fails
 * with a permission error and the log stays whole. Rotation still keeps an organization's newest
 * 10,000 entries, through the one SECURITY DEFINER function, which records what it removed.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { OFFICER, tickingCallers } from './helpers/phi.ts';

const clock = new ManualClock(Date.now());
let t: TestApp;
let org: TestOrg;
/** A connection as the service's role, the one the running app uses. */
let service: pg.Client;
const { rest } = tickingCallers(() => t, clock, () => org.testKey);

const logCount = async (orgId: string) =>
  (await t.db.query<{ c: number }>('select count(*)::int as c from phi_access_log where organization_id = $1', [orgId])).rows[0]!.c;
/** Entries `<prefix>00000001`… (ids are unique across organizations). */
const fill = (client: pg.ClientBase | pg.Pool, prefix: string, orgId: string, from: number, to: number) => client.query(
  `insert into phi_access_log (id, organization_id, mode, actor_type, actor_id, role, resource_type, resource_ids, fields, operation, created_at)
   select $4 || lpad(i::text, 8, '0'), $1, 'test', 'user', 'u', 'owner', 'message', '[]', '[]', 'x', now() from generate_series($2::int, $3::int) i`, [orgId, from, to, prefix]);

beforeAll(async () => {
  t = await startTestApp({ clock, env: { HIPAA_MODE_CACHE_MS: '0' } });
  org = await t.createOrg('business', 'Clinic');
  expect((await rest('PUT', '/v1/settings/hipaa/baa', { key: org.liveKey, body: { status: 'signed', signed_date: '2026-11-01' } })).status).toBe(200);
  expect((await rest('PUT', '/v1/settings/hipaa', { key: org.liveKey, body: { enabled: true, compliance_officer: OFFICER } })).status).toBe(200);
  const sms = await rest('POST', '/v1/messages/sms', { body: { to: '+14155550101', body: 'Your results are ready' } });
  expect(sms.status, sms.text).toBe(201);
  for (let i = 0; i < 3; i++) expect((await rest('GET', `/v1/messages/${sms.body.data.id}`)).status).toBe(200);
  service = new pg.Client({ connectionString: t.databaseUrl });
  await service.connect();
});
afterAll(async () => {
  await service?.end();
  await t?.close();
});

describe('the service role cannot empty the PHI access log', () => {
  it('runs as a role that is no superuser and owns no table', async () => {
    const { rows: [r] } = await service.query<{ superuser: boolean; owned: number; who: string }>(
      `select current_user as who, (select rolsuper from pg_roles where rolname = current_user) as superuser,
              (select count(*)::int from pg_tables where tableowner = current_user) as owned`);
    expect(r).toMatchObject({ superuser: false, owned: 0 });
    expect(r!.who).toBe(new URL(t.databaseUrl).username);
    expect(await logCount(org.orgId)).toBeGreaterThanOrEqual(3);
  });

  it('ALTER TABLE … DISABLE TRIGGER, session_replication_role, DELETE, UPDATE, TRUNCATE: permission errors, nothing removed', async () => {
    const before = await logCount(org.orgId);
    await expect(service.query('alter table phi_access_log disable trigger phi_access_log_guard')).rejects.toMatchObject({ code: '42501' });
    await expect(service.query('alter table phi_access_log disable trigger all')).rejects.toMatchObject({ code: '42501' });
    await service.query('begin');
    await expect(service.query('set local session_replication_role = replica')).rejects.toMatchObject({ code: '42501' });
    await service.query('rollback');
    await expect(service.query('delete from phi_access_log where organization_id = $1', [org.orgId])).rejects.toMatchObject({ code: '42501' });
    // The retention function's flag does not open the table either: the role has no DELETE at all.
    await service.query('begin');
    await service.query(`select set_config('omnichannel.phi_access_log_retention', 'on', true)`);
    await expect(service.query('delete from phi_access_log where organization_id = $1', [org.orgId])).rejects.toMatchObject({ code: '42501' });
    await service.query('rollback');
    await expect(service.query('update phi_access_log set reason = null where organization_id = $1', [org.orgId])).rejects.toMatchObject({ code: '42501' });
    await expect(service.query('truncate phi_access_log')).rejects.toMatchObject({ code: '42501' });
    await expect(service.query('drop trigger phi_access_log_guard on phi_access_log')).rejects.toMatchObject({ code: '42501' });
    await expect(service.query('alter function phi_access_log_retain(text) owner to current_user')).rejects.toMatchObject({ code: '42501' });
    // Nor any other DDL: no new table, no change to pg-boss's.
    await expect(service.query('create table sneaky (id int)')).rejects.toMatchObject({ code: '42501' });
    await expect(service.query('alter table pgboss.job disable trigger all')).rejects.toMatchObject({ code: '42501' });
    await expect(service.query('delete from phi_access_log_removals')).rejects.toMatchObject({ code: '42501' });
    expect(await logCount(org.orgId)).toBe(before);
  });

  it('a DELETE of an entry with 10,000 newer ones is refused even to the owner, outside the retention function', async () => {
    const other = await t.createOrg('enterprise', 'Guard');
    // 10,001 entries without rotation (as the superuser that owns the test database: triggers off for the fixture).
    const owner = await t.db.connect();
    try {
      await owner.query('begin');
      await owner.query('set local session_replication_role = replica');
      await fill(owner, 'phg_', other.orgId, 1, 10_001);
      await owner.query('commit');
    } finally {
      owner.release();
    }
    await expect(t.db.query(`delete from phi_access_log where id = 'phg_00000001'`)).rejects.toThrow(/append-only/);
    expect(await logCount(other.orgId)).toBe(10_001);
  });
});

describe('rotation through phi_access_log_retain', () => {
  it('keeps the newest 10,000 entries of an organization when the service appends, and records what it removed', async () => {
    const other = await t.createOrg('enterprise', 'Rotation');
    await fill(service, 'phr_', other.orgId, 1, 10_005);
    const { rows: [kept] } = await t.db.query('select count(*)::int as c, min(id) as oldest from phi_access_log where organization_id = $1', [other.orgId]);
    expect(kept).toEqual({ c: 10_000, oldest: 'phr_00000006' });
    const { rows: removals } = await t.db.query(
      'select removed, first_id, last_id, removed_by, reason from phi_access_log_removals where organization_id = $1', [other.orgId]);
    expect(removals).toEqual([{ removed: 5, first_id: 'phr_00000001', last_id: 'phr_00000005', removed_by: new URL(t.databaseUrl).username, reason: expect.stringMatching(/newest 10000/) }]);
    // Called directly, it removes nothing it would not rotate out.
    expect((await service.query('select phi_access_log_retain($1) as n', [other.orgId])).rows[0].n).toBe(0);
    expect((await service.query('select phi_access_log_retain($1) as n', [org.orgId])).rows[0].n).toBe(0);
    expect(await logCount(org.orgId)).toBeGreaterThanOrEqual(3);
    // The service reads the log (the API), and the removals record is readable but not writable by it.
    expect((await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=5')).body.data.length).toBeGreaterThanOrEqual(3);
    await expect(service.query(`insert into phi_access_log_removals (organization_id, removed, reason) values ($1, 0, 'forged')`, [org.orgId])).rejects.toMatchObject({ code: '42501' });
  });
});
