import { Migration } from '@mikro-orm/migrations';

/**
 * HIPAA mode for agent conversations and voice: a `phi` column holding the sealed content in HIPAA
 * mode (agent messages: content and tool calls; conversations: context; calls: PHI metadata keys;
 * voicemail messages: transcription) and `content_purged_at`, set by the retention jobs.
 */
export class Migration20261126030000_hipaa_agents_voice extends Migration {
  override up(): void {
    this.addSql(`
      alter table agent_messages add column phi text, add column content_purged_at timestamptz;
      alter table agent_conversations add column phi text, add column content_purged_at timestamptz;
      alter table calls add column phi text, add column content_purged_at timestamptz;
      alter table voicemail_messages add column phi text, add column content_purged_at timestamptz;
      create index agent_messages_retention_idx on agent_messages (organization_id, created_at) where content_purged_at is null;
      create index agent_conversations_retention_idx on agent_conversations (organization_id, last_message_at) where content_purged_at is null;
      create index calls_retention_idx on calls (organization_id, created_at) where content_purged_at is null;
      create index voicemail_messages_retention_idx on voicemail_messages (organization_id, created_at) where content_purged_at is null;
    `);
  }

  override down(): void {
    this.addSql(`
      alter table agent_messages drop column phi, drop column content_purged_at;
      alter table agent_conversations drop column phi, drop column content_purged_at;
      alter table calls drop column phi, drop column content_purged_at;
      alter table voicemail_messages drop column phi, drop column content_purged_at;
    `);
  }
}
