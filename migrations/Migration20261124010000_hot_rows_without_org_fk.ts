import { Migration } from '@mikro-orm/migrations';

/**
 * The append-only tables written for every accepted message, every status change and every webhook
 * delivery (messages, events, usage_entries, webhook_deliveries, webhook_attempts) keep
 * `organization_id` without a foreign key.
 *
 * Why: a foreign key is checked by one query per inserted row (deferred here, at commit). An
 * accepted message inserts three such rows, so the checks cost about 35-40 µs of database CPU per
 * message (15-20 % of its group commit, scratch measurement on the bench machine); a webhook
 * delivery inserts two (about 5 % of its database CPU). They also took a KEY SHARE row lock on the
 * organization for every row.
 *
 * What holds instead: every writer takes `organization_id` from an authenticated scope (API key,
 * bearer token, provider number lookup) or from the event being delivered, and organizations are
 * never deleted through the API. When an organization purge arrives (account closure, HIPAA
 * retention), it deletes these rows itself; ON DELETE CASCADE no longer does it. Every other
 * foreign key stays, the webhook tables' own included (an attempt goes with its delivery, a deleted
 * endpoint leaves its deliveries without an endpoint).
 */
const TABLES = ['messages', 'events', 'usage_entries', 'webhook_deliveries', 'webhook_attempts'] as const;

export class Migration20261124010000_hot_rows_without_org_fk extends Migration {
  override up(): void {
    for (const table of TABLES) this.addSql(`alter table ${table} drop constraint ${table}_organization_id_fkey;`);
  }

  override down(): void {
    for (const table of TABLES) {
      this.addSql(`alter table ${table} add constraint ${table}_organization_id_fkey foreign key (organization_id) references organizations(id) on delete cascade deferrable initially deferred;`);
    }
  }
}
