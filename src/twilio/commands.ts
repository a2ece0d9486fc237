/**
 * The Twilio-compatible surface's admin command: `npm run -s admin -- twilio credentials` issues an
 * API key whose material is the derived auth token (tokens.ts) and prints the account SID, the auth
 * token and the key's SID.
 */
import type { AdminCommand } from '../modules/manifest.ts';
import { SettingsService } from '../modules/settings/settings.service.ts';
import { ROLES, type Role } from '../platform/tenancy/tenancy.entities.ts';
import { issueTwilioCredentials } from './tokens.ts';

export const TWILIO_COMMANDS: Readonly<Record<string, AdminCommand>> = {
  'twilio credentials': {
    usage: `twilio credentials [--org ID] [--mode test|live] [--role ${ROLES.join('|')}] [--json]`,
    summary: 'Creates an API key (default: test mode, developer role) for the Twilio-compatible surface and prints the account SID, the auth token (the key, shown once) and the key\'s SID (docs/twilio.md).',
    options: ['org', 'mode', 'role'],
    async run(ctx) {
      const org = await ctx.organizationOrDefault();
      const mode = ctx.oneOf('mode', ['test', 'live'] as const, 'test');
      const role = ctx.oneOf<Role>('role', ROLES, 'developer');
      const settings = new SettingsService({ orm: ctx.orm, clock: ctx.clock, config: ctx.config, cursors: ctx.cursors });
      const creds = await issueTwilioCredentials(settings, ctx.config.appSecret, org, mode, role);
      ctx.out(creds, `TWILIO_ACCOUNT_SID=${creds.account_sid}\nTWILIO_AUTH_TOKEN=${creds.auth_token}\nTWILIO_API_KEY=${creds.api_key_sid}`);
    },
  },
};
