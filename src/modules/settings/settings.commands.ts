/**
 * The settings context's admin commands: organizations, their keys and members' bearer tokens
 * (`npm run -s admin -- org create|org list|key create|token mint`).
 */
import { randomUUID } from 'node:crypto';
import type { AdminCommand, AdminContext } from '../manifest.ts';
import { PLANS, planOf, ROLES, type Plan, type Role } from '../../platform/tenancy/tenancy.entities.ts';
import { SettingsService } from './settings.service.ts';

const settingsOf = (ctx: AdminContext) => new SettingsService({ orm: ctx.orm, clock: ctx.clock, config: ctx.config, cursors: ctx.cursors });

export const SETTINGS_COMMANDS: Readonly<Record<string, AdminCommand>> = {
  'org create': {
    usage: `org create --name NAME [--plan ${PLANS.join('|')}] [--owner EMAIL] [--json]`,
    summary: 'Creates an organization with an owner and prints its test and live owner keys.',
    options: ['name', 'plan', 'owner'],
    async run(ctx) {
      const name = ctx.option('name');
      if (!name) return ctx.fail('--name is required');
      const plan = ctx.oneOf<Plan>('plan', PLANS, 'starter');
      const r = await settingsOf(ctx).createOrganization({ name, plan, ownerEmail: ctx.option('owner') });
      ctx.out({ organization_id: r.organization.id, owner_user_id: r.owner.id, test_api_key: r.testKey, live_api_key: r.liveKey },
        `organization ${r.organization.id}\nowner ${r.owner.id}\ntest key ${r.testKey}\nlive key ${r.liveKey}`);
    },
  },
  'org list': {
    usage: 'org list [--json]',
    summary: 'Lists the organizations (id, plan — and the test-mode plan where it differs —, name), oldest first; the first is the one `npm start` created.',
    async run(ctx) {
      const orgs = (await ctx.organizations()).map((o) => ({ id: o.id, name: o.name, plan: o.plan, test_plan: planOf(o, 'test'), created_at: o.createdAt.toISOString() }));
      ctx.out({ organizations: orgs }, orgs.length
        ? orgs.map((o) => `${o.id}  ${o.plan.padEnd(10)}  ${o.test_plan === o.plan ? '' : `(test: ${o.test_plan})  `}${o.name}`).join('\n')
        : 'no organizations yet (npm start creates one)');
    },
  },
  'key create': {
    usage: `key create [--org ID] [--mode test|live] [--role ${ROLES.join('|')}] [--name NAME] [--json]`,
    summary: 'Creates an API key (default: test mode, owner role). Without --org: the oldest organization, i.e. the default one; this is how to get a new key when the first-start key is lost.',
    options: ['org', 'mode', 'role', 'name'],
    async run(ctx) {
      const org = await ctx.organizationOrDefault();
      const mode = ctx.oneOf('mode', ['test', 'live'] as const, 'test');
      const role = ctx.oneOf<Role>('role', ROLES, 'owner');
      const r = await settingsOf(ctx).adminCreateApiKey(org, mode, role, ctx.option('name') ?? null);
      ctx.out({ id: r.apiKey.id, key: r.key, role, mode, organization_id: org }, `${r.apiKey.id} ${r.key}`);
    },
  },
  'token mint': {
    usage: `token mint --org ID --user EMAIL --role ${ROLES.join('|')} [--ttl SECONDS] [--mode test|live] [--json]`,
    summary: 'Makes the user a member with the role and prints a signed HS256 bearer token (needs AUTH_JWT_SECRET or the derived development secret).',
    options: ['org', 'user', 'role', 'ttl', 'mode'],
    async run(ctx) {
      const org = ctx.option('org');
      const email = ctx.option('user');
      if (!org || !email) return ctx.fail('--org and --user are required');
      const role = ctx.oneOf<Role>('role', ROLES);
      const mode = ctx.oneOf('mode', ['test', 'live'] as const, 'test');
      const ttl = Number(ctx.option('ttl') ?? '3600');
      if (!Number.isInteger(ttl) || ttl <= 0) return ctx.fail('--ttl must be a positive number of seconds');
      const { jwt: jwtConfig } = ctx.config;
      if (!jwtConfig.secret) return ctx.fail('token mint needs AUTH_JWT_SECRET (tokens from a JWKS issuer are minted by that issuer)');
      const { user } = await settingsOf(ctx).adminUpsertMember(org, email, role);
      const { SignJWT } = await import('jose');
      let jwt = new SignJWT({ org_id: org, email: user.email, mode })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(user.id).setJti(randomUUID()).setIssuedAt().setExpirationTime(`${ttl}s`);
      if (jwtConfig.issuer) jwt = jwt.setIssuer(jwtConfig.issuer);
      if (jwtConfig.audience) jwt = jwt.setAudience(jwtConfig.audience);
      const token = await jwt.sign(new TextEncoder().encode(jwtConfig.secret));
      ctx.out({ token }, token);
    },
  },
};
