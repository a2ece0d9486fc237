import { Migration } from '@mikro-orm/migrations';

/**
 * WhatsApp Cloud API connectors (docs/messaging.md, "Carriers"): the `whatsapp_cloud` kind, and
 * `whatsapp` as a channel of connectors and routes. Its signed webhooks share `carrier_callbacks`.
 */
export class Migration20261206090000_whatsapp_cloud extends Migration {
  override up(): void {
    this.addSql(`
      alter table messaging_connectors drop constraint messaging_connectors_kind_check;
      alter table messaging_connectors add constraint messaging_connectors_kind_check check (kind in ('smpp','twilio','telnyx','vonage','whatsapp_cloud'));
      alter table messaging_connectors drop constraint messaging_connectors_channel_check;
      alter table messaging_connectors add constraint messaging_connectors_channel_check check (channel in ('sms','whatsapp'));
      alter table messaging_routes drop constraint messaging_routes_channel_check;
      alter table messaging_routes add constraint messaging_routes_channel_check check (channel in ('sms','whatsapp'));
    `);
  }

  override down(): void {
    this.addSql(`
      delete from messaging_routes where channel = 'whatsapp';
      delete from messaging_connectors where kind = 'whatsapp_cloud';
      alter table messaging_routes drop constraint messaging_routes_channel_check;
      alter table messaging_routes add constraint messaging_routes_channel_check check (channel in ('sms'));
      alter table messaging_connectors drop constraint messaging_connectors_channel_check;
      alter table messaging_connectors add constraint messaging_connectors_channel_check check (channel in ('sms'));
      alter table messaging_connectors drop constraint messaging_connectors_kind_check;
      alter table messaging_connectors add constraint messaging_connectors_kind_check check (kind in ('smpp','twilio','telnyx','vonage'));
    `);
  }
}
