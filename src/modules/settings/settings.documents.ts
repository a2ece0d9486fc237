/**
 * The GraphQL documents an organization's clients may name by id (table `graphql_documents`):
 * trusted ones an owner uploaded, APQ ones clients registered. /graphql resolves ids through
 * graphql/persisted.ts; found documents are kept in memory per (organization, id) for
 * CACHE_TTL_MS (a deletion on another instance reaches this one's cache within that time).
 */
import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { ServiceError } from '../../platform/errors.ts';

export type DocumentSource = 'trusted' | 'apq';
export type PersistedDocument = { id: string; document: string; source: DocumentSource; createdAt: Date };

const CACHE_TTL_MS = 60_000;
const CACHE_MAX = 10_000;
/** At most this many documents per upload. */
export const MAX_MANIFEST_DOCUMENTS = 5_000;

/**
 * At most this many APQ-registered documents per organization (trusted uploads do not count): a
 * registration past it is QUOTA_EXCEEDED (429, `details: { limit: "apq_documents", max }`); ids
 * already registered keep working. Ad hoc clients that outgrow it should upload trusted documents.
 */
export const MAX_APQ_DOCUMENTS = 1_000;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export class GraphqlDocuments {
  readonly #pool: Pool;
  readonly #cache = new Map<string, { doc: { document: string; source: DocumentSource }; at: number }>();

  readonly #maxApq: number;

  constructor(pool: Pool, opts: { maxApq?: number } = {}) {
    this.#pool = pool;
    this.#maxApq = opts.maxApq ?? MAX_APQ_DOCUMENTS;
  }

  async find(organizationId: string, id: string): Promise<{ document: string; source: DocumentSource } | undefined> {
    const key = `${organizationId}\u0000${id}`;
    const hit = this.#cache.get(key);
    if (hit && Date.now() - hit.at < CACHE_TTL_MS) return hit.doc;
    const { rows } = await this.#pool.query<{ document: string; source: DocumentSource }>({
      name: 'graphql.documents.find',
      text: 'select document, source from graphql_documents where organization_id = $1 and id = $2',
      values: [organizationId, id],
    });
    const doc = rows[0];
    if (!doc) return undefined;
    if (this.#cache.size >= CACHE_MAX) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(key, { doc, at: Date.now() });
    return doc;
  }

  /** An APQ registration: the id must be the text's sha256; a trusted document under it stays trusted. */
  async register(organizationId: string, hash: string, document: string): Promise<void> {
    if (sha256Hex(document) !== hash.toLowerCase()) {
      throw new ServiceError('PERSISTED_QUERY_HASH_MISMATCH', 'extensions.persistedQuery.sha256Hash is not the sha256 of the query', { sha256Hash: hash });
    }
    // Inserted only while the organization holds fewer than the cap (one statement: the count and
    // the insert see the same snapshot; concurrent registrations may pass it by a few).
    const inserted = await this.#pool.query(
      `insert into graphql_documents (organization_id, id, document, source)
         select $1, $2, $3, 'apq'
          where (select count(*) from graphql_documents where organization_id = $1 and source = 'apq') < $4
       on conflict do nothing`,
      [organizationId, hash, document, this.#maxApq],
    );
    if (inserted.rowCount) return;
    const known = await this.#pool.query('select 1 from graphql_documents where organization_id = $1 and id = $2', [organizationId, hash]);
    if (known.rowCount) return;
    throw new ServiceError('QUOTA_EXCEEDED', `This organization has registered ${this.#maxApq} APQ documents, the most it may: upload the documents your clients send as trusted documents (POST /v1/graphql/documents) or send the query text`, { limit: 'apq_documents', max: this.#maxApq });
  }

  /** Stores an uploaded manifest (id → document) as trusted documents; returns how many it holds. */
  async upload(organizationId: string, manifest: Record<string, string>): Promise<PersistedDocument[]> {
    const entries = Object.entries(manifest);
    if (entries.length === 0) throw new ServiceError('VALIDATION_ERROR', 'The manifest holds no documents', { field: 'documents' });
    if (entries.length > MAX_MANIFEST_DOCUMENTS) throw new ServiceError('VALIDATION_ERROR', `At most ${MAX_MANIFEST_DOCUMENTS} documents per upload`, { field: 'documents' });
    for (const [id, doc] of entries) {
      if (!id || id.length > 200 || typeof doc !== 'string' || !doc.trim()) throw new ServiceError('VALIDATION_ERROR', 'Each manifest entry maps an id to a document text', { field: 'documents', id });
    }
    const { rows } = await this.#pool.query<{ id: string; document: string; source: DocumentSource; created_at: Date }>(
      `insert into graphql_documents (organization_id, id, document, source)
         select $1, e.id, e.document, 'trusted' from unnest($2::text[], $3::text[]) as e(id, document)
       on conflict (organization_id, id) do update set document = excluded.document, source = 'trusted'
       returning id, document, source, created_at`,
      [organizationId, entries.map(([id]) => id), entries.map(([, d]) => d)],
    );
    for (const [id] of entries) this.#cache.delete(`${organizationId}\u0000${id}`);
    return rows.map((r) => ({ id: r.id, document: r.document, source: r.source, createdAt: r.created_at })).sort((a, b) => a.id.localeCompare(b.id));
  }

  async list(organizationId: string): Promise<PersistedDocument[]> {
    const { rows } = await this.#pool.query<{ id: string; document: string; source: DocumentSource; created_at: Date }>(
      `select id, document, source, created_at from graphql_documents where organization_id = $1 and source = 'trusted' order by id`,
      [organizationId],
    );
    return rows.map((r) => ({ id: r.id, document: r.document, source: r.source, createdAt: r.created_at }));
  }

  async remove(organizationId: string, id: string): Promise<PersistedDocument> {
    const { rows } = await this.#pool.query<{ id: string; document: string; source: DocumentSource; created_at: Date }>(
      `delete from graphql_documents where organization_id = $1 and id = $2 and source = 'trusted' returning id, document, source, created_at`,
      [organizationId, id],
    );
    this.#cache.delete(`${organizationId}\u0000${id}`);
    const r = rows[0];
    if (!r) throw new ServiceError('NOT_FOUND', 'Trusted document not found', { id });
    return { id: r.id, document: r.document, source: r.source, createdAt: r.created_at };
  }
}
