/**
 * Admin CLI (`npm run -s admin -- …`), on the same configuration and database as the server.
 *   org create --name N --plan starter|growth|business|enterprise [--owner EMAIL] [--json]
 *   key create --org ID --mode test|live --role ROLE [--name N] [--json]
 *   token mint --org ID --user EMAIL --role ROLE [--ttl SECONDS] [--mode live|test] [--json]
 * With --json, stdout carries exactly one JSON document; logs go to stderr.
 */
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { loadConfig } from './config.ts';
import { resolveDatabase } from './database.ts';
import { createOrm, runMigrations } from './platform/db/orm.ts';
import { PLANS, ROLES, type Plan, type Role } from './platform/tenancy/tenancy.entities.ts';
import { SettingsService } from './modules/settings/settings.service.ts';
import { CursorCodec } from './platform/pagination.ts';
import { systemClock } from './platform/clock.ts';
import { ENTITIES } from './modules/index.ts';

function fail(message: string): never {
  process.stderr.write(`error: ${message}\n`);
  process.exit(2);
}

function oneOf<T extends string>(name: string, value: string | undefined, allowed: readonly T[]): T {
  if (!value || !allowed.includes(value as T)) fail(`--${name} must be one of ${allowed.join(', ')}`);
  return value as T;
}

const [noun, verb, ...rest] = process.argv.slice(2);
const { values } = parseArgs({
  args: rest,
  options: {
    name: { type: 'string' }, plan: { type: 'string' }, owner: { type: 'string' }, org: { type: 'string' },
    mode: { type: 'string' }, role: { type: 'string' }, user: { type: 'string' }, ttl: { type: 'string' }, json: { type: 'boolean' },
  },
});

const config = loadConfig();
const database = await resolveDatabase(config);
const orm = await createOrm(database.url, { entities: ENTITIES, poolMax: 2 });
const out = (json: Record<string, unknown>, human: string) => process.stdout.write(values.json ? `${JSON.stringify(json)}\n` : `${human}\n`);
try {
  await runMigrations(orm);
  const settings = new SettingsService({ orm, clock: systemClock, config, cursors: new CursorCodec(config.appSecret, config.cursorTtlSeconds, systemClock) });
  const command = `${noun} ${verb}`;
  if (command === 'org create') {
    if (!values.name) fail('--name is required');
    const plan = oneOf<Plan>('plan', values.plan ?? 'starter', PLANS);
    const r = await settings.createOrganization({ name: values.name, plan, ownerEmail: values.owner });
    out({ organization_id: r.organization.id, owner_user_id: r.owner.id, test_api_key: r.testKey, live_api_key: r.liveKey },
      `organization ${r.organization.id}\nowner ${r.owner.id}\ntest key ${r.testKey}\nlive key ${r.liveKey}`);
  } else if (command === 'key create') {
    if (!values.org) fail('--org is required');
    const mode = oneOf('mode', values.mode, ['test', 'live'] as const);
    const role = oneOf<Role>('role', values.role, ROLES);
    const r = await settings.adminCreateApiKey(values.org, mode, role, values.name ?? null);
    out({ id: r.apiKey.id, key: r.key, role, mode }, `${r.apiKey.id} ${r.key}`);
  } else if (command === 'token mint') {
    if (!values.org || !values.user) fail('--org and --user are required');
    const role = oneOf<Role>('role', values.role, ROLES);
    const mode = oneOf('mode', values.mode ?? 'test', ['test', 'live'] as const);
    const ttl = Number(values.ttl ?? '3600');
    if (!Number.isInteger(ttl) || ttl <= 0) fail('--ttl must be a positive number of seconds');
    if (!config.jwt.secret) fail('token mint needs AUTH_JWT_SECRET (tokens from a JWKS issuer are minted by that issuer)');
    const { user } = await settings.adminUpsertMember(values.org, values.user, role);
    let jwt = new SignJWT({ org_id: values.org, email: user.email, mode })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(user.id).setJti(randomUUID()).setIssuedAt().setExpirationTime(`${ttl}s`);
    if (config.jwt.issuer) jwt = jwt.setIssuer(config.jwt.issuer);
    if (config.jwt.audience) jwt = jwt.setAudience(config.jwt.audience);
    const token = await jwt.sign(new TextEncoder().encode(config.jwt.secret));
    out({ token }, token);
  } else {
    fail('usage: org create | key create | token mint (see src/admin.ts)');
  }
} catch (e) {
  fail(e instanceof Error ? e.message : String(e));
} finally {
  await orm.close();
  await database.stop();
}
