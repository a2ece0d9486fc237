import { Migration } from '@mikro-orm/migrations';

/**
 * `twiml_runs`: where each call running TwiML (the Twilio-compatible surface, src/twilio/twiml) is
 * in its document: the verbs, the next one, the `<Gather>` collecting keys, and the generation
 * that a timer or a fetch must still match. Written under the call's row lock; goes with the call.
 */
export class Migration20261203090000_twiml_runs extends Migration {
  override up(): void {
    this.addSql(`
      create table twiml_runs (
        call_id text primary key references calls(id) on delete cascade deferrable initially deferred,
        organization_id text not null,
        mode text not null,
        state jsonb not null,
        updated_at timestamptz not null
      );
    `);
  }

  override down(): void {
    this.addSql('drop table twiml_runs;');
  }
}
