/**
 * Knowledge: files uploaded to an agent become documents (a document id is a knowledge base id any
 * agent of the tenant may list in `knowledge_base_ids`), their text chunked and indexed for
 * PostgreSQL full-text search (`tsvector` + GIN); retrieval ranks chunks with `ts_rank_cd` over
 * `websearch_to_tsquery`, falling back to any-word matching when every word is required and none hit.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Transaction } from 'kysely';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { Agent, KnowledgeDocument } from './agents.entities.ts';
import type { UploadKnowledgeInput } from './agents.schemas.ts';
import { chunkText, extractKnowledgeText } from './knowledge.text.ts';

export type KnowledgeHit = { documentId: string; filename: string; ordinal: number; content: string; rank: number };
export type UploadedKnowledge = { document: KnowledgeDocument; agent: Agent };

const INSERT_BATCH = 2000;

export class KnowledgeService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #maxBytes: number;

  constructor(deps: { orm: MikroORM; clock: Clock; maxBytes: number }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#maxBytes = deps.maxBytes;
  }

  get maxBytes(): number {
    return this.#maxBytes;
  }

  async upload(scope: TenantRef, input: UploadKnowledgeInput): Promise<UploadedKnowledge> {
    if (input.content.byteLength > this.#maxBytes) {
      throw new ServiceError('VALIDATION_ERROR', `The file is larger than ${this.#maxBytes} bytes`, { field: 'file', max_bytes: this.#maxBytes, bytes: input.content.byteLength });
    }
    if (input.content.byteLength === 0) throw new ServiceError('VALIDATION_ERROR', 'The file is empty', { field: 'file' });
    await this.#agent(scope, input.id);
    let text: string;
    try {
      text = await extractKnowledgeText(input.type, input.content);
    } catch (e) {
      throw new ServiceError('VALIDATION_ERROR', `The file could not be read as ${input.type}: ${(e as Error).message}`, { field: 'file', type: input.type });
    }
    const chunks = chunkText(text);
    if (chunks.length === 0) throw new ServiceError('VALIDATION_ERROR', `No text found in the ${input.type} file`, { field: 'file', type: input.type });
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const agent = await tx.findOne(Agent, { id: input.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!agent) throw notFound('Agent', input.id);
      const now = this.#clock.now();
      const doc = tx.create(KnowledgeDocument, {
        id: newId('kb', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, agentId: agent.id,
        filename: input.filename, type: input.type, bytes: input.content.byteLength, chunks: chunks.length, characters: text.length, createdAt: now,
      });
      await tx.flush();
      const db = tx.getTransactionContext<Transaction<unknown>>()!;
      for (let i = 0; i < chunks.length; i += INSERT_BATCH) {
        const part = chunks.slice(i, i + INSERT_BATCH);
        await sqlQuery(db, `insert into agent_knowledge_chunks (organization_id, mode, document_id, ordinal, content)
          select $1, $2, $3, o, c from unnest($4::int[], $5::text[]) as t(o, c)`,
        [scope.organizationId, scope.mode, doc.id, part.map((_c, j) => i + j), part]);
      }
      agent.knowledgeBaseIds = [...agent.knowledgeBaseIds, doc.id];
      agent.updatedAt = now;
      agent.version += 1;
      emitEvent(tx, scope, { type: 'agent.updated', resourceType: 'agent', resourceId: agent.id, sequence: agent.version, data: { agent_id: agent.id, knowledge_base_id: doc.id } }, now);
      return { document: doc, agent };
    });
  }

  /** The best chunks for a query among the given knowledge bases (documents) of the tenant. */
  async search(tenant: TenantRef, documentIds: readonly string[], query: string, limit: number): Promise<KnowledgeHit[]> {
    if (documentIds.length === 0 || !query.trim()) return [];
    const run = (tsquery: string) => sqlQuery<{ document_id: string; filename: string; ordinal: number; content: string; rank: number }>(sqlClient(this.#orm), `
      select c.document_id, d.filename, c.ordinal, c.content, ts_rank_cd(c.tsv, q) as rank
        from agent_knowledge_chunks c
        join agent_knowledge_documents d on d.id = c.document_id
        cross join ${tsquery} as q
       where c.organization_id = $1 and c.mode = $2 and c.document_id = any($3::text[]) and c.tsv @@ q
       order by rank desc, c.id
       limit $5`, [tenant.organizationId, tenant.mode, [...documentIds], query, limit]);
    let rows = await run(`websearch_to_tsquery('english', $4)`);
    if (rows.length === 0) {
      // Any of the words: replace the AND of the parsed query with OR.
      rows = await run(`(select coalesce(nullif(replace(websearch_to_tsquery('english', $4)::text, ' & ', ' | '), '')::tsquery, ''::tsquery))`);
    }
    return rows.map((r) => ({ documentId: r.document_id, filename: r.filename, ordinal: r.ordinal, content: r.content, rank: Number(r.rank) }));
  }

  async #agent(scope: TenantRef, id: string): Promise<Agent> {
    const a = await tenantEm(this.#orm, scope).findOne(Agent, { id });
    if (!a) throw notFound('Agent', id);
    return a;
  }
}
