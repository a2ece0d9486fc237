import { Migration } from '@mikro-orm/migrations';

/** Knowledge chunks of live-mode agents carry the live provider's embedding (LLM_EMBEDDING_MODEL) for re-ranking. */
export class Migration20261127020000_knowledge_embeddings extends Migration {
  override up(): void {
    this.addSql('alter table agent_knowledge_chunks add column embedding real[];');
  }

  override down(): void {
    this.addSql('alter table agent_knowledge_chunks drop column embedding;');
  }
}
