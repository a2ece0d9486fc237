/**
 * Admin CLI (`npm run -s admin -- …`), on the same configuration and database as the server.
 * `npm run -s admin -- --help` lists the commands; `<noun> <verb> --help` describes one.
 * With --json, stdout carries exactly one JSON document; logs go to stderr.
 */
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { loadConfig } from './modules/config.ts';
import { PLANS, planOf, ROLES, type Plan, type Role } from './platform/tenancy/tenancy.entities.ts';

/** Every command with its usage and what it does: the source of `--help`. */
const COMMANDS = {
  'org create': {
    usage: `org create --name NAME [--plan ${PLANS.join('|')}] [--owner EMAIL] [--json]`,
    summary: 'Creates an organization with an owner and prints its test and live owner keys.',
  },
  'org plan': {
    usage: `org plan --org ID --plan ${PLANS.join('|')} [--mode live|test|both] [--json]`,
    summary: 'Puts the organization on a plan (default: in both modes), as its contract says: no payment provider is asked. The plan its keys act on (rate limits, quotas) and its billing subscription change at once, with a billing.subscription_updated event; running instances pick it up at once.',
  },
  'org list': {
    usage: 'org list [--json]',
    summary: 'Lists the organizations (id, plan — and the test-mode plan where it differs —, name), oldest first; the first is the one `npm start` created.',
  },
  'key create': {
    usage: `key create [--org ID] [--mode test|live] [--role ${ROLES.join('|')}] [--name NAME] [--json]`,
    summary: 'Creates an API key (default: test mode, owner role). Without --org: the oldest organization, i.e. the default one; this is how to get a new key when the first-start key is lost.',
  },
  'twilio credentials': {
    usage: `twilio credentials [--org ID] [--mode test|live] [--role ${ROLES.join('|')}] [--json]`,
    summary: 'Creates an API key (default: test mode, developer role) for the Twilio-compatible surface and prints the account SID, the auth token (the key, shown once) and the key\'s SID (docs/twilio.md).',
  },
  'token mint': {
    usage: `token mint --org ID --user EMAIL --role ${ROLES.join('|')} [--ttl SECONDS] [--mode test|live] [--json]`,
    summary: 'Makes the user a member with the role and prints a signed HS256 bearer token (needs AUTH_JWT_SECRET or the derived development secret).',
  },
  'hipaa rewrap-keys': {
    usage: 'hipaa rewrap-keys [--json]',
    summary: 'Re-wraps every HIPAA data key under the current master key (the first of HIPAA_MASTER_KEYS), after a master key rotation; safe while the service runs (the daily hipaa.rewrap-keys job does the same).',
  },
  'hipaa rotate-data-key': {
    usage: 'hipaa rotate-data-key --org ID [--json]',
    summary: 'Adds a new data key version for the organization: new PHI is sealed under it, older values still open. Instances pick it up as they load the key ring.',
  },
  'db migrate': {
    usage: 'db migrate [--json]',
    summary: 'Applies pending migrations and pg-boss\'s schema (every command does this first), as the owner role of DATABASE_MIGRATION_URL when set, then grants the role of DATABASE_URL what the service needs: a release step before starting the service with DATABASE_URL alone (docs/operations.md, "Database roles").',
  },
} as const;
type Command = keyof typeof COMMANDS;

function usage(command?: Command): string {
  if (command) return `usage: npm run -s admin -- ${COMMANDS[command].usage}\n\n${COMMANDS[command].summary}\n`;
  const lines = Object.values(COMMANDS).map((c) => `  ${c.usage}\n      ${c.summary}`);
  return `usage: npm run -s admin -- <command> [options]\n\nCommands:\n${lines.join('\n')}\n\n<command> --help describes one command. --json prints one JSON document on stdout.\n`;
}

function fail(message: string): never {
  process.stderr.write(`error: ${message}\n`);
  process.exit(2);
}

function oneOf<T extends string>(name: string, value: string | undefined, allowed: readonly T[]): T {
  if (!value || !allowed.includes(value as T)) fail(`--${name} must be one of ${allowed.join(', ')}`);
  return value as T;
}

const [noun, verb, ...rest] = process.argv.slice(2);
const command = `${noun} ${verb}` as Command;
const wantsHelp = process.argv.slice(2).some((a) => a === '--help' || a === '-h');
if (!(command in COMMANDS)) {
  if (wantsHelp || noun === undefined || noun === 'help') {
    process.stdout.write(usage());
    process.exit(0);
  }
  process.stderr.write(`error: unknown command "${[noun, verb].filter(Boolean).join(' ')}"\n\n${usage()}`);
  process.exit(2);
}
if (wantsHelp) {
  process.stdout.write(usage(command));
  process.exit(0);
}
let values: Record<string, string | boolean | undefined>;
try {
  ({ values } = parseArgs({
    args: rest,
    options: {
      name: { type: 'string' }, plan: { type: 'string' }, owner: { type: 'string' }, org: { type: 'string' },
      mode: { type: 'string' }, role: { type: 'string' }, user: { type: 'string' }, ttl: { type: 'string' }, json: { type: 'boolean' },
    },
  }));
} catch (e) {
  fail(`${e instanceof Error ? e.message : String(e)}\n\n${usage(command)}`);
}
const str = (k: string) => values[k] as string | undefined;

// Loaded after argument checks, so --help and usage errors answer at once.
const [{ SignJWT }, { resolveDatabase }, { createOrm, runMigrations }, { migrateAsOwner, roleOf }, { Organization }, { SettingsService }, { CursorCodec }, { systemClock }, { ENTITIES }] = await Promise.all([
  import('jose'), import('./database.ts'), import('./platform/db/orm.ts'), import('./platform/db/roles.ts'), import('./platform/tenancy/tenancy.entities.ts'),
  import('./modules/settings/settings.service.ts'), import('./platform/pagination.ts'), import('./platform/clock.ts'), import('./modules/index.ts'),
]);
const config = loadConfig();
const database = await resolveDatabase(config);
const orm = await createOrm(database.url, { entities: ENTITIES, poolMax: 2 });
const out = (json: unknown, human: string) => process.stdout.write(values.json ? `${JSON.stringify(json)}\n` : `${human}\n`);
try {
  if (database.migrationUrl) await migrateAsOwner(database.migrationUrl, roleOf(database.url), ENTITIES);
  else await runMigrations(orm);
  const settings = new SettingsService({ orm, clock: systemClock, config, cursors: new CursorCodec(config.appSecret, config.cursorTtlSeconds, systemClock) });
  const organizations = () => orm.em.fork().find(Organization, {}, { orderBy: { id: 'asc' } });
  if (command === 'org create') {
    if (!str('name')) fail('--name is required');
    const plan = oneOf<Plan>('plan', str('plan') ?? 'starter', PLANS);
    const r = await settings.createOrganization({ name: str('name')!, plan, ownerEmail: str('owner') });
    out({ organization_id: r.organization.id, owner_user_id: r.owner.id, test_api_key: r.testKey, live_api_key: r.liveKey },
      `organization ${r.organization.id}\nowner ${r.owner.id}\ntest key ${r.testKey}\nlive key ${r.liveKey}`);
  } else if (command === 'org plan') {
    if (!str('org')) fail('--org is required');
    const plan = oneOf<Plan>('plan', str('plan'), PLANS);
    const mode = oneOf('mode', str('mode') ?? 'both', ['live', 'test', 'both'] as const);
    const org = await orm.em.fork().findOne(Organization, { id: str('org')! });
    if (!org) fail(`there is no organization ${str('org')}`);
    const { operatorSetPlan } = await import('./modules/billing/plan.change.ts');
    const changed = await operatorSetPlan(orm, org.id, mode === 'both' ? ['live', 'test'] : [mode], plan, systemClock.now());
    out({ organization_id: org.id, plan, modes: mode === 'both' ? ['live', 'test'] : [mode], changed },
      changed.length ? `${org.id} is on ${plan} (${changed.join(' and ')} changed)` : `${org.id} was already on ${plan}`);
  } else if (command === 'org list') {
    const orgs = (await organizations()).map((o) => ({ id: o.id, name: o.name, plan: o.plan, test_plan: planOf(o, 'test'), created_at: o.createdAt.toISOString() }));
    out({ organizations: orgs }, orgs.length
      ? orgs.map((o) => `${o.id}  ${o.plan.padEnd(10)}  ${o.test_plan === o.plan ? '' : `(test: ${o.test_plan})  `}${o.name}`).join('\n')
      : 'no organizations yet (npm start creates one)');
  } else if (command === 'key create') {
    const org = str('org') ?? (await organizations())[0]?.id;
    if (!org) fail('there is no organization yet: run npm start once, or org create');
    const mode = oneOf('mode', str('mode') ?? 'test', ['test', 'live'] as const);
    const role = oneOf<Role>('role', str('role') ?? 'owner', ROLES);
    const r = await settings.adminCreateApiKey(org, mode, role, str('name') ?? null);
    out({ id: r.apiKey.id, key: r.key, role, mode, organization_id: org }, `${r.apiKey.id} ${r.key}`);
  } else if (command === 'twilio credentials') {
    const org = str('org') ?? (await organizations())[0]?.id;
    if (!org) fail('there is no organization yet: run npm start once, or org create');
    const mode = oneOf('mode', str('mode') ?? 'test', ['test', 'live'] as const);
    const role = oneOf<Role>('role', str('role') ?? 'developer', ROLES);
    const { issueTwilioCredentials } = await import('./twilio/tokens.ts');
    const creds = await issueTwilioCredentials(settings, config.appSecret, org, mode, role);
    out(creds, `TWILIO_ACCOUNT_SID=${creds.account_sid}\nTWILIO_AUTH_TOKEN=${creds.auth_token}\nTWILIO_API_KEY=${creds.api_key_sid}`);
  } else if (command === 'token mint') {
    if (!str('org') || !str('user')) fail('--org and --user are required');
    const role = oneOf<Role>('role', str('role'), ROLES);
    const mode = oneOf('mode', str('mode') ?? 'test', ['test', 'live'] as const);
    const ttl = Number(str('ttl') ?? '3600');
    if (!Number.isInteger(ttl) || ttl <= 0) fail('--ttl must be a positive number of seconds');
    if (!config.jwt.secret) fail('token mint needs AUTH_JWT_SECRET (tokens from a JWKS issuer are minted by that issuer)');
    const { user } = await settings.adminUpsertMember(str('org')!, str('user')!, role);
    let jwt = new SignJWT({ org_id: str('org'), email: user.email, mode })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(user.id).setJti(randomUUID()).setIssuedAt().setExpirationTime(`${ttl}s`);
    if (config.jwt.issuer) jwt = jwt.setIssuer(config.jwt.issuer);
    if (config.jwt.audience) jwt = jwt.setAudience(config.jwt.audience);
    const token = await jwt.sign(new TextEncoder().encode(config.jwt.secret));
    out({ token }, token);
  } else if (command === 'db migrate') {
    const applied = (await orm.migrator.getExecuted()).length;
    out({ migrations: applied, owner: database.migrationUrl !== undefined }, `${applied} migrations applied${database.migrationUrl ? ' (as the owner role; the service\'s role granted)' : ''}`);
  } else if (command === 'hipaa rewrap-keys' || command === 'hipaa rotate-data-key') {
    const [{ KeyRing }, { LocalKeyManagement }, pg] = await Promise.all([import('./modules/hipaa/hipaa.keys.ts'), import('./providers/kms/local.ts'), import('pg')]);
    const pool = new pg.default.Pool({ connectionString: database.url, max: 1 });
    try {
      const keys = new KeyRing({ pool, kms: new LocalKeyManagement(config.hipaa.masterKeys), clock: systemClock });
      if (command === 'hipaa rewrap-keys') {
        const rewrapped = await keys.rewrapAll();
        out({ rewrapped, master_key_id: config.hipaa.masterKeys[0]!.id }, `${rewrapped} data keys re-wrapped under ${config.hipaa.masterKeys[0]!.id}`);
      } else {
        if (!str('org')) fail('--org is required');
        const version = await keys.rotateDataKey(str('org')!);
        out({ organization_id: str('org'), version }, `data key version ${version} of ${str('org')}`);
      }
    } finally {
      await pool.end();
    }
  }
} catch (e) {
  fail(e instanceof Error ? e.message : String(e));
} finally {
  await orm.close();
  await database.stop();
}
