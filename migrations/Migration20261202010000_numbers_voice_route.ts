import { Migration } from '@mikro-orm/migrations';

/**
 * A number's inbound voice route (README "Numbers"): `{ type: ivr, ivr_id }`, `{ type: voicemail,
 * voicemail_id }` or `{ type: forward, to }`; null leaves inbound calls to `agent_id`, if any.
 */
export class Migration20261202010000_numbers_voice_route extends Migration {
  override up(): void {
    this.addSql(`alter table phone_numbers add column voice_route jsonb`);
  }

  override down(): void {
    this.addSql(`alter table phone_numbers drop column voice_route`);
  }
}
