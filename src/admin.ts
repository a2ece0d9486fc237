/**
 * Admin CLI (`npm run -s admin -- …`), on the same configuration and database as the server.
 * `npm run -s admin -- --help` lists the commands; `<noun> <verb> --help` describes one.
 * With --json, stdout carries exactly one JSON document; logs go to stderr.
 *
 * The commands are the modules' (each manifest's `commands`) and the Twilio-compatible surface's;
 * this file owns only the database's own (`db migrate`) and runs the one asked for.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from './modules/config.ts';
import { MODULES } from './modules/index.ts';
import type { AdminCommand, AdminContext } from './modules/manifest.ts';
import { TWILIO_COMMANDS } from './twilio/commands.ts';

/** The database's command: every command migrates first, so it only reports (and grants, with an owner URL). */
const DATABASE_COMMANDS: Readonly<Record<string, AdminCommand>> = {
  'db migrate': {
    usage: 'db migrate [--json]',
    summary: 'Applies pending migrations and pg-boss\'s schema (every command does this first), as the owner role of DATABASE_MIGRATION_URL when set, then grants the role of DATABASE_URL what the service needs: a release step before starting the service with DATABASE_URL alone (docs/operations.md, "Database roles").',
    async run(ctx) {
      const applied = (await ctx.orm.migrator.getExecuted()).length;
      const owner = ctx.migrationUrl !== undefined;
      ctx.out({ migrations: applied, owner }, `${applied} migrations applied${owner ? ' (as the owner role; the service\'s role granted)' : ''}`);
    },
  },
};

/** Every command, by `<noun> <verb>`; a name declared twice is a wiring bug. */
function allCommands(): ReadonlyMap<string, AdminCommand> {
  const commands = new Map<string, AdminCommand>();
  const sources: [string, Readonly<Record<string, AdminCommand>> | undefined][] = [
    ...MODULES.map((m): [string, Readonly<Record<string, AdminCommand>> | undefined] => [m.name, (m as { commands?: Readonly<Record<string, AdminCommand>> }).commands]),
    ['twilio', TWILIO_COMMANDS], ['database', DATABASE_COMMANDS],
  ];
  for (const [owner, declared] of sources) {
    for (const [name, command] of Object.entries(declared ?? {})) {
      if (commands.has(name)) throw new Error(`admin command "${name}" is declared twice (second time by ${owner})`);
      commands.set(name, command);
    }
  }
  return commands;
}

const COMMANDS = allCommands();

function usage(command?: AdminCommand): string {
  if (command) return `usage: npm run -s admin -- ${command.usage}\n\n${command.summary}\n`;
  const lines = [...COMMANDS.values()].map((c) => `  ${c.usage}\n      ${c.summary}`);
  return `usage: npm run -s admin -- <command> [options]\n\nCommands:\n${lines.join('\n')}\n\n<command> --help describes one command. --json prints one JSON document on stdout.\n`;
}

function fail(message: string): never {
  process.stderr.write(`error: ${message}\n`);
  process.exit(2);
}

const [noun, verb, ...rest] = process.argv.slice(2);
const command = COMMANDS.get(`${noun} ${verb}`);
const wantsHelp = process.argv.slice(2).some((a) => a === '--help' || a === '-h');
if (!command) {
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
  const options = Object.fromEntries([...(command.options ?? []).map((o) => [o, { type: 'string' as const }]), ['json', { type: 'boolean' as const }]]);
  ({ values } = parseArgs({ args: rest, options }) as { values: Record<string, string | boolean | undefined> });
} catch (e) {
  fail(`${e instanceof Error ? e.message : String(e)}\n\n${usage(command)}`);
}
const option = (name: string) => values[name] as string | undefined;

// Loaded after argument checks, so --help and usage errors answer at once.
const [{ resolveDatabase }, { createOrm, runMigrations }, { migrateAsOwner, roleOf }, { Organization }, { CursorCodec }, { systemClock }, { ENTITIES }] = await Promise.all([
  import('./database.ts'), import('./platform/db/orm.ts'), import('./platform/db/roles.ts'), import('./platform/tenancy/tenancy.entities.ts'),
  import('./platform/pagination.ts'), import('./platform/clock.ts'), import('./modules/index.ts'),
]);
const config = loadConfig();
const database = await resolveDatabase(config);
const orm = await createOrm(database.url, { entities: ENTITIES, poolMax: 2 });
const organizations = () => orm.em.fork().find(Organization, {}, { orderBy: { id: 'asc' } });
const ctx: AdminContext = {
  config,
  orm,
  databaseUrl: database.url,
  migrationUrl: database.migrationUrl,
  clock: systemClock,
  cursors: new CursorCodec(config.appSecret, config.cursorTtlSeconds, systemClock),
  option,
  oneOf(name, allowed, fallback) {
    const value = option(name) ?? fallback;
    if (!value || !allowed.includes(value as never)) fail(`--${name} must be one of ${allowed.join(', ')}`);
    return value as (typeof allowed)[number];
  },
  fail,
  out: (json, human) => process.stdout.write(values.json ? `${JSON.stringify(json)}\n` : `${human}\n`),
  organizations,
  async organizationOrDefault() {
    const org = option('org') ?? (await organizations())[0]?.id;
    if (!org) fail('there is no organization yet: run npm start once, or org create');
    return org;
  },
};
try {
  if (database.migrationUrl) await migrateAsOwner(database.migrationUrl, roleOf(database.url), ENTITIES);
  else await runMigrations(orm);
  await command.run(ctx);
} catch (e) {
  fail(e instanceof Error ? e.message : String(e));
} finally {
  await orm.close();
  await database.stop();
}
