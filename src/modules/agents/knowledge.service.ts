/**
 * Knowledge: files uploaded to an agent become documents (a document id is a knowledge base id any
 * agent of the tenant may list in `knowledge_base_ids`), their text chunked and indexed for
 * PostgreSQL full-text search (`tsvector` + GIN); retrieval ranks chunks with `ts_rank_cd` over
 * `websearch_to_tsquery`, falling back to any-word matching when every word is required and none hit.
 * In live mode with an embedding model (LLM_EMBEDDING_MODEL), chunks are embedded at upload (in
 * batches, before the transaction; a provider failure indexes them without embeddings and logs) and
 * retrieval re-ranks the best full-text candidates (RERANK_POOL × limit) by cosine similarity to the
 * query's embedding (a failure keeps the full-text order). Test mode ranks by full text only.
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
import type { Logger } from '../../platform/logger.ts';

/** `rank`: ts_rank_cd, or the cosine similarity when re-ranked by embeddings (`ranking` says which). */
export type KnowledgeHit = { documentId: string; filename: string; ordinal: number; content: string; rank: number; ranking: 'full_text' | 'semantic' };

/** Embeds texts with the live provider's embedding model (undefined: no model for this mode). */
export type KnowledgeEmbedder = {
  embedMany(mode: 'live' | 'test', values: readonly string[]): Promise<number[][] | undefined>;
  embed(mode: 'live' | 'test', value: string): Promise<number[] | undefined>;
};

/** Full-text candidates re-ranked by embeddings: this many times the hits asked for (at least 20). */
const RERANK_POOL = 5;

export function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}
export type UploadedKnowledge = { document: KnowledgeDocument; agent: Agent };

const INSERT_BATCH = 2000;

export class KnowledgeService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #maxBytes: number;
  readonly #embedder: KnowledgeEmbedder | undefined;
  readonly #log: Logger | undefined;
  readonly #agentChanged: (id: string) => void;

  /** `agentChanged`: told once an upload committed the agent's new knowledge base (AgentsService.forget). */
  constructor(deps: { orm: MikroORM; clock: Clock; maxBytes: number; embedder?: KnowledgeEmbedder; log?: Logger; agentChanged?: (id: string) => void }) {
    this.#agentChanged = deps.agentChanged ?? (() => {});
    this.#embedder = deps.embedder;
    this.#log = deps.log;
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
    const embeddings = await this.#embedMany(scope, chunks);
    const uploaded = await tenantEm(this.#orm, scope).transactional(async (tx) => {
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
        if (embeddings) {
          await sqlQuery(db, `insert into agent_knowledge_chunks (organization_id, mode, document_id, ordinal, content, embedding)
            select $1, $2, $3, x.o, x.c, x.e from jsonb_to_recordset($4::jsonb) as x(o int, c text, e real[])`,
          [scope.organizationId, scope.mode, doc.id, JSON.stringify(part.map((c, j) => ({ o: i + j, c, e: embeddings[i + j] })))]);
        } else {
          await sqlQuery(db, `insert into agent_knowledge_chunks (organization_id, mode, document_id, ordinal, content)
            select $1, $2, $3, o, c from unnest($4::int[], $5::text[]) as t(o, c)`,
          [scope.organizationId, scope.mode, doc.id, part.map((_c, j) => i + j), part]);
        }
      }
      agent.knowledgeBaseIds = [...agent.knowledgeBaseIds, doc.id];
      agent.updatedAt = now;
      agent.version += 1;
      emitEvent(tx, scope, { type: 'agent.updated', resourceType: 'agent', resourceId: agent.id, sequence: agent.version, data: { agent_id: agent.id, knowledge_base_id: doc.id } }, now);
      return { document: doc, agent };
    });
    this.#agentChanged(uploaded.agent.id);
    return uploaded;
  }

  /** The best chunks for a query among the given knowledge bases (documents) of the tenant. */
  async search(tenant: TenantRef, documentIds: readonly string[], query: string, limit: number): Promise<KnowledgeHit[]> {
    if (documentIds.length === 0 || !query.trim()) return [];
    const semantic = tenant.mode === 'live' && this.#embedder !== undefined;
    const take = semantic ? Math.max(limit * RERANK_POOL, 20) : limit;
    type Row = { document_id: string; filename: string; ordinal: number; content: string; rank: number; embedding: number[] | null };
    const run = (tsquery: string) => sqlQuery<Row>(sqlClient(this.#orm), `
      select c.document_id, d.filename, c.ordinal, c.content, ts_rank_cd(c.tsv, q) as rank, ${semantic ? 'c.embedding' : 'null::real[] as embedding'}
        from agent_knowledge_chunks c
        join agent_knowledge_documents d on d.id = c.document_id
        cross join ${tsquery} as t(q)
       where c.organization_id = $1 and c.mode = $2 and c.document_id = any($3::text[]) and c.tsv @@ q
       order by rank desc, c.id
       limit $5`, [tenant.organizationId, tenant.mode, [...documentIds], query, take]);
    let rows = await run(`websearch_to_tsquery('english', $4)`);
    if (rows.length === 0) {
      // Any of the words: replace the AND of the parsed query with OR.
      rows = await run(`(select coalesce(nullif(replace(websearch_to_tsquery('english', $4)::text, ' & ', ' | '), '')::tsquery, ''::tsquery))`);
    }
    const hits = rows.map((r) => ({ documentId: r.document_id, filename: r.filename, ordinal: r.ordinal, content: r.content, rank: Number(r.rank), ranking: 'full_text' as const }));
    const q = semantic && rows.some((r) => r.embedding) ? await this.#embed(tenant, query) : undefined;
    if (!q) return hits.slice(0, limit);
    // Chunks without an embedding (indexed while the provider failed) rank after the embedded ones, by full text.
    const scored = hits.map((h, i) => ({ h, score: rows[i]!.embedding ? cosine(q, rows[i]!.embedding!) : -2, i }));
    scored.sort((a, b) => b.score - a.score || a.i - b.i);
    return scored.slice(0, limit).map(({ h, score }) => (score > -2 ? { ...h, rank: score, ranking: 'semantic' as const } : h));
  }

  async #embedMany(scope: TenantRef, chunks: readonly string[]): Promise<number[][] | undefined> {
    try {
      return await this.#embedder?.embedMany(scope.mode, chunks);
    } catch (e) {
      this.#log?.warn({ err: e, organization_id: scope.organizationId }, 'knowledge embeddings failed: indexed for full-text search only');
      return undefined;
    }
  }

  async #embed(tenant: TenantRef, query: string): Promise<number[] | undefined> {
    try {
      return await this.#embedder?.embed(tenant.mode, query);
    } catch (e) {
      this.#log?.warn({ err: e, organization_id: tenant.organizationId }, 'query embedding failed: full-text order kept');
      return undefined;
    }
  }

  async #agent(scope: TenantRef, id: string): Promise<Agent> {
    const a = await tenantEm(this.#orm, scope).findOne(Agent, { id });
    if (!a) throw notFound('Agent', id);
    return a;
  }
}
