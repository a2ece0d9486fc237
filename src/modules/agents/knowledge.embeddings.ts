/** Knowledge embeddings through the AI SDK's `embed` / `embedMany` and the live provider's embedding model. */
import { embed, embedMany } from 'ai';
import type { LlmProviders } from '../../providers/llm/types.ts';
import type { KnowledgeEmbedder } from './knowledge.service.ts';

export function knowledgeEmbedder(llm: LlmProviders): KnowledgeEmbedder {
  return {
    async embedMany(mode, values) {
      const model = await llm.embedder(mode);
      if (!model || values.length === 0) return undefined;
      // The SDK splits the values into calls of the model's batch size.
      return (await embedMany({ model, values: [...values], maxRetries: 1 })).embeddings;
    },
    async embed(mode, value) {
      const model = await llm.embedder(mode);
      if (!model) return undefined;
      return (await embed({ model, value, maxRetries: 1 })).embedding;
    },
  };
}
