import { Migration } from '@mikro-orm/migrations';

/**
 * A message accepted under an Idempotency-Key records it: `idempotency_key` (`<n>:<key>`, the
 * request's n-th send, so a GraphQL document with several sends under one key keeps them apart)
 * and `idempotency_hash` (the start of the request's hash). The unique index makes a second
 * acceptance of the same logical send conflict instead of doubling: a gateway killed between the
 * message's commit and the storing of its response leaves the idempotency claim running, and the
 * retry that takes the claim over finds the message instead of sending again (see
 * platform/idempotency.ts and MessagingService). Messages without a key (most) are not in the index.
 */
export class Migration20261126010000_message_idempotency extends Migration {
  override up(): void {
    this.addSql(`
      alter table messages add column idempotency_key text, add column idempotency_hash text;
      create unique index messages_idempotency_idx on messages (organization_id, mode, idempotency_key) where idempotency_key is not null;
    `);
  }

  override down(): void {
    this.addSql('drop index messages_idempotency_idx; alter table messages drop column idempotency_key, drop column idempotency_hash;');
  }
}
