import { Migration } from '@mikro-orm/migrations';

/**
 * The three append-only tables written for every accepted message and every status change
 * (messages, events, usage_entries) keep `organization_id` without a foreign key.
 *
 * Why: a foreign key is checked by one query per inserted row (deferred here, at commit). An
 * accepted message inserts three such rows, so the checks cost about 35-40 µs of database CPU per
 * message (15-20 % of its group commit, scratch measurement on the bench machine); they also took a
 * KEY SHARE row lock on the organization for every row.
 *
 * What holds instead: every writer takes `organization_id` from an authenticated scope (API key,
 * bearer token, provider number lookup), which was read from `organizations` in the same request,
 * and organizations are never deleted through the API. When an organization purge arrives (account
 * closure, HIPAA retention), it deletes these rows itself; ON DELETE CASCADE no longer does it.
 * Every other table keeps its foreign key.
 */
export class Migration20261124010000_hot_rows_without_org_fk extends Migration {
  override up(): void {
    this.addSql(`
      alter table messages drop constraint messages_organization_id_fkey;
      alter table events drop constraint events_organization_id_fkey;
      alter table usage_entries drop constraint usage_entries_organization_id_fkey;
    `);
  }

  override down(): void {
    this.addSql(`
      alter table messages add constraint messages_organization_id_fkey foreign key (organization_id) references organizations(id) on delete cascade deferrable initially deferred;
      alter table events add constraint events_organization_id_fkey foreign key (organization_id) references organizations(id) on delete cascade deferrable initially deferred;
      alter table usage_entries add constraint usage_entries_organization_id_fkey foreign key (organization_id) references organizations(id) on delete cascade deferrable initially deferred;
    `);
  }
}
