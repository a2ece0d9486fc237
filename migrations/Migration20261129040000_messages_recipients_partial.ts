import { Migration } from '@mikro-orm/migrations';

/**
 * `messages_recipients_idx` (GIN over `recipients`) only for messages with several recipients
 * (emails to more than one address). A message's `recipients` is `[to]` otherwise, and every read
 * that uses the index looks for an address that is a further recipient (contacts' activity, with
 * `"to" <> address`) or already matches `to` first (the `to` filter of the message list), so such
 * messages never needed an entry: each single-recipient message paid one at its insert and one at
 * each status change (a non-HOT update inserts into every index), through the GIN pending list,
 * whose metapage every inserter locks. The reads now say `jsonb_array_length(recipients) > 1` too.
 */
export class Migration20261129040000_messages_recipients_partial extends Migration {
  override up(): void {
    this.addSql(`
      drop index messages_recipients_idx;
      create index messages_recipients_idx on messages using gin (recipients jsonb_path_ops) where jsonb_array_length(recipients) > 1;
    `);
  }

  override down(): void {
    this.addSql(`
      drop index messages_recipients_idx;
      create index messages_recipients_idx on messages using gin (recipients jsonb_path_ops);
    `);
  }
}
