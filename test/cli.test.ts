/** The admin CLI prints parseable JSON and its keys and tokens work against the running service. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, TEST_APP_SECRET, TEST_JWT_SECRET, type TestApp, CHILD_NODE_ENV } from './helpers/testApp.ts';
import { systemClock } from '../src/platform/clock.ts';
import twilio from 'twilio';
import { RedirectingClient } from './helpers/twilio.ts';
import { derivedAuthToken } from '../src/twilio/tokens.ts';
import { fromSid } from '../src/twilio/sids.ts';

const run = promisify(execFile);
let t: TestApp;
beforeAll(async () => { t = await startTestApp({ clock: systemClock }); });
afterAll(async () => { await t?.close(); });

async function admin(...args: string[]): Promise<any> {
  return adminWith({}, ...args);
}

async function adminWith(env: Record<string, string>, ...args: string[]): Promise<any> {
  const { stdout } = await run(process.execPath, [path.resolve(import.meta.dirname, '../src/admin.ts'), ...args], {
    env: { ...CHILD_NODE_ENV, PATH: process.env.PATH, DATABASE_URL: t.databaseUrl, APP_SECRET: TEST_APP_SECRET, AUTH_JWT_SECRET: TEST_JWT_SECRET, LOG_LEVEL: 'silent', ...env },
    timeout: 30_000,
  });
  return JSON.parse(stdout);
}

async function adminText(...args: string[]): Promise<string> {
  // Several start at once (--help): each may take long to start on a busy machine.
  const { stdout } = await run(process.execPath, [path.resolve(import.meta.dirname, '../src/admin.ts'), ...args], { env: { ...CHILD_NODE_ENV, PATH: process.env.PATH }, timeout: 110_000 });
  return stdout;
}

describe('admin CLI', () => {
  it('org create prints ids and two owner keys that work', async () => {
    const out = await admin('org', 'create', '--name', 'CLI Co', '--plan', 'growth', '--json');
    expect(Object.keys(out).sort()).toEqual(['live_api_key', 'organization_id', 'owner_user_id', 'test_api_key']);
    expect(out.organization_id).toMatch(/^org_/);
    expect(out.test_api_key).toMatch(/^svc_test_sk_/);
    expect(out.live_api_key).toMatch(/^svc_live_sk_/);
    const test = await t.rest('GET', '/v1/settings/organization', { key: out.test_api_key });
    expect(test.body.data).toMatchObject({ role: 'owner', mode: 'test', organization: { id: out.organization_id, name: 'CLI Co', plan: 'growth' } });
    const live = await t.rest('GET', '/v1/settings/organization', { key: out.live_api_key });
    expect(live.body.data.mode).toBe('live');
  });

  it('key create makes a key of the given mode and role', async () => {
    const org = await admin('org', 'create', '--name', 'Keys', '--plan', 'starter', '--json');
    const out = await admin('key', 'create', '--org', org.organization_id, '--mode', 'live', '--role', 'viewer', '--json');
    expect(out).toMatchObject({ role: 'viewer', mode: 'live' });
    expect(out.id).toMatch(/^key_/);
    const r = await t.rest('GET', '/v1/settings/organization', { key: out.key });
    expect(r.body.data).toMatchObject({ role: 'viewer', mode: 'live' });
    const denied = await t.rest('POST', '/v1/settings/api-keys', { key: out.key, body: { role: 'viewer' } });
    expect(denied.status).toBe(403);
  });

  it('twilio credentials prints an account SID and auth token the twilio SDK authenticates with', async () => {
    const org = await admin('org', 'create', '--name', 'Twilio Co', '--plan', 'business', '--json');
    const out = await admin('twilio', 'credentials', '--org', org.organization_id, '--json');
    expect(out).toMatchObject({ mode: 'test', role: 'developer', organization_id: org.organization_id });
    expect(out.account_sid).toMatch(/^AC[0-9a-f]{32}$/);
    expect(out.api_key_sid).toMatch(/^SK[0-9a-f]{32}$/);
    // The token is derived from the key's id (it signs the account's Twilio-format callbacks).
    expect(out.auth_token).toBe(derivedAuthToken(TEST_APP_SECRET, fromSid(out.api_key_sid, 'key')!, 'test'));
    const client = twilio(out.account_sid, out.auth_token, { httpClient: new RedirectingClient(t.baseUrl) });
    expect(await client.messages.list({ limit: 1 })).toEqual([]);
    const withKey = twilio(out.api_key_sid, out.auth_token, { accountSid: out.account_sid, httpClient: new RedirectingClient(t.baseUrl) });
    expect(await withKey.messages.list({ limit: 1 })).toEqual([]);
  });

  it('token mint makes the user a member and signs a bearer token', async () => {
    const org = await admin('org', 'create', '--name', 'Tokens', '--plan', 'business', '--json');
    const { token } = await admin('token', 'mint', '--org', org.organization_id, '--user', 'dev@example.com', '--role', 'developer', '--ttl', '600', '--json');
    const r = await t.rest('GET', '/v1/settings/organization', { token });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ role: 'developer', actor: { type: 'user' } });
    const team = await t.rest('GET', '/v1/settings/team', { token });
    expect(team.body.data.map((m: any) => [m.email, m.role])).toContainEqual(['dev@example.com', 'developer']);
  });

  it('org plan puts an organization on a plan in both modes, or in one: its keys act on it at once', async () => {
    const org = await admin('org', 'create', '--name', 'Upgraded', '--plan', 'starter', '--json');
    const plan = async (key: string) => {
      const r = await t.rest('GET', '/v1/settings/organization', { key });
      return [r.body.data.organization.plan, r.headers.get('x-ratelimit-limit')];
    };
    // Cached credentials first: the change must reach the running service.
    expect(await plan(org.test_api_key)).toEqual(['starter', '120']);
    expect((await t.rest('GET', '/v1/billing/plan', { key: org.live_api_key })).body.data).toMatchObject({ plan_id: 'starter', status: 'trialing' });
    const out = await admin('org', 'plan', '--org', org.organization_id, '--plan', 'growth', '--json');
    expect(out).toEqual({ organization_id: org.organization_id, plan: 'growth', modes: ['live', 'test'], changed: ['live', 'test'] });
    await expect.poll(() => plan(org.test_api_key)).toEqual(['growth', '600']);
    expect(await plan(org.live_api_key)).toEqual(['growth', '600']);
    // The live subscription, which existed, moved with an event; the test one is created on the new plan.
    expect((await t.rest('GET', '/v1/billing/plan', { key: org.live_api_key })).body.data).toMatchObject({ plan_id: 'growth', status: 'trialing' });
    expect((await t.rest('GET', '/v1/billing/plan', { key: org.test_api_key })).body.data).toMatchObject({ plan_id: 'growth' });
    const { rows } = await t.db.query(`select mode, data from events where organization_id = $1 and type = 'billing.subscription_updated'`, [org.organization_id]);
    expect(rows).toEqual([{ mode: 'live', data: expect.objectContaining({ plan_id: 'growth', previous_plan_id: 'starter', status: 'trialing' }) }]);

    const test = await admin('org', 'plan', '--org', org.organization_id, '--plan', 'business', '--mode', 'test', '--json');
    expect(test.changed).toEqual(['test']);
    await expect.poll(() => plan(org.test_api_key)).toEqual(['business', '1500']);
    expect(await plan(org.live_api_key)).toEqual(['growth', '600']);
    const { organizations } = await admin('org', 'list', '--json');
    expect(organizations.find((o: any) => o.id === org.organization_id)).toMatchObject({ plan: 'growth', test_plan: 'business' });
    expect((await admin('org', 'plan', '--org', org.organization_id, '--plan', 'growth', '--mode', 'live', '--json')).changed).toEqual([]);
    await expect(admin('org', 'plan', '--org', org.organization_id, '--plan', 'platinum', '--json')).rejects.toMatchObject({ code: 2, stdout: '' });
    await expect(admin('org', 'plan', '--org', 'org_nope', '--plan', 'growth', '--json')).rejects.toMatchObject({ code: 2, stdout: '' });
  }, 180_000); // seven CLI processes, each starting up on a busy machine

  it('--help describes every command, and each command alone', async () => {
    const commands = ['org create', 'org list', 'org plan', 'key create', 'token mint', 'twilio credentials', 'db migrate'];
    const [all, bare, ...each] = await Promise.all([adminText('--help'), adminText(), ...commands.map((c) => adminText(...c.split(' '), '--help'))]);
    commands.forEach((command, i) => {
      expect(all).toContain(command);
      expect(each[i]).toMatch(new RegExp(`^usage: npm run -s admin -- ${command} `));
    });
    expect(bare).toBe(all);
  }, 120_000); // seven CLI processes at once, each starting up on a busy machine

  it('db migrate runs as the owner role of DATABASE_MIGRATION_URL and grants the role of DATABASE_URL', async () => {
    // A table the service's role cannot read yet: the grant at the end of the migration covers it.
    await t.db.query('create table cli_probe (id int); insert into cli_probe values (1)');
    const service = `select count(*)::int as c from cli_probe`;
    const asService = async () => { const c = new (await import('pg')).default.Client({ connectionString: t.databaseUrl }); await c.connect(); try { return (await c.query(service)).rows[0].c; } finally { await c.end(); } };
    await expect(asService()).rejects.toMatchObject({ code: '42501' });
    const out = await adminWith({ DATABASE_MIGRATION_URL: t.ownerUrl }, 'db', 'migrate', '--json');
    expect(out).toMatchObject({ owner: true });
    expect(out.migrations).toBeGreaterThan(40);
    expect(await asService()).toBe(1);
    // With DATABASE_URL alone (the service's role, nothing pending) it reads the migrations and changes nothing.
    expect(await admin('db', 'migrate', '--json')).toEqual({ migrations: out.migrations, owner: false });
  }, 60_000);

  it('org list lists organizations, oldest first', async () => {
    const made = await admin('org', 'create', '--name', 'Listed', '--json');
    const { organizations } = await admin('org', 'list', '--json');
    const ids = organizations.map((o: any) => o.id);
    expect(ids).toContain(made.organization_id);
    expect([...ids].sort()).toEqual(ids);
    expect(organizations.find((o: any) => o.id === made.organization_id)).toMatchObject({ name: 'Listed', plan: 'starter' });
  });

  it('key create without --org makes an owner test key for the oldest (default) organization', async () => {
    const { organizations } = await admin('org', 'list', '--json');
    const out = await admin('key', 'create', '--json');
    expect(out).toMatchObject({ role: 'owner', mode: 'test', organization_id: organizations[0].id });
    const r = await t.rest('GET', '/v1/settings/organization', { key: out.key });
    expect(r.body.data).toMatchObject({ role: 'owner', mode: 'test', organization: { id: organizations[0].id } });
  });

  it('an unknown command prints the usage on stderr and exits 2', async () => {
    await expect(admin('org', 'destroy')).rejects.toMatchObject({ code: 2, stdout: '', stderr: expect.stringContaining('usage: npm run -s admin') });
  });

  it('rejects bad arguments without printing to stdout', async () => {
    await expect(admin('org', 'create', '--name', 'X', '--plan', 'platinum', '--json')).rejects.toMatchObject({ code: 2, stdout: '' });
  });
});
