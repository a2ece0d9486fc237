import { Migration } from '@mikro-orm/migrations';

/**
 * HTTP carrier API connectors (Twilio, Telnyx, Vonage; README "Carriers"): the connector kinds, and
 * `carrier_callbacks`, the signed callbacks already applied (by the key the connector derives from
 * the signature: Twilio's signature with the body, Telnyx's signature, Vonage's JWT id), so the same
 * signed request a second time is a replay (403, nothing applied). Rows older than seven days are
 * pruned as new ones arrive (Telnyx and Vonage refuse signatures older than five minutes anyway).
 */
export class Migration20261205090000_carrier_apis extends Migration {
  override up(): void {
    this.addSql(`
      alter table messaging_connectors drop constraint messaging_connectors_kind_check;
      alter table messaging_connectors add constraint messaging_connectors_kind_check check (kind in ('smpp','twilio','telnyx','vonage'));
      create table carrier_callbacks (
        connector_id text not null,
        key text not null,
        seen_at timestamptz not null default now(),
        primary key (connector_id, key)
      );
      create index carrier_callbacks_seen_idx on carrier_callbacks (seen_at);
    `);
  }

  override down(): void {
    this.addSql(`
      drop table carrier_callbacks;
      alter table messaging_connectors drop constraint messaging_connectors_kind_check;
      alter table messaging_connectors add constraint messaging_connectors_kind_check check (kind in ('smpp'));
    `);
  }
}
