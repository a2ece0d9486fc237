/**
 * Persisted operations on /graphql: a client names a document by id instead of sending its text.
 *
 * - `documentId` (GraphQL over HTTP; what the graphql-codegen client preset's `persistedDocuments`
 *   clients send) or Apollo's `extensions.persistedQuery: { version: 1, sha256Hash }` (APQ).
 * - Known documents are per organization (table `graphql_documents`): `trusted` ones an owner
 *   uploaded (`POST /v1/graphql/documents`, the client preset's manifest), `apq` ones registered by a
 *   request carrying both the text and its hash (the hash must be the text's sha256, hex).
 * - An organization with `graphql_trusted_documents_only` accepts only trusted ids: a text (APQ
 *   registration included) answers PERSISTED_QUERY_REQUIRED, an APQ-registered id
 *   PERSISTED_QUERY_NOT_FOUND.
 * - An unknown id answers PERSISTED_QUERY_NOT_FOUND with the message `PersistedQueryNotFound`
 *   (Apollo's APQ link then retries with the text).
 *
 * Resolution happens in Yoga's onParams (usePersistedOperations), so the document then runs like any
 * other: the same rate limits, complexity gate and cost extensions. The documents themselves:
 * modules/settings/settings.documents.ts.
 */
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import type { RequestContext } from '../context.ts';
import { errorDefinition, ServiceError, type ErrorCode } from '../platform/errors.ts';
import type { GraphqlDocuments } from '../modules/settings/settings.documents.ts';

type Params = { query?: string; documentId?: unknown; extensions?: Record<string, unknown> | null };

function apqHash(params: Params): string | undefined {
  const pq = params.extensions?.persistedQuery as { version?: unknown; sha256Hash?: unknown } | undefined;
  return pq && typeof pq === 'object' && pq.version === 1 && typeof pq.sha256Hash === 'string' ? pq.sha256Hash : undefined;
}

/** The id a request names, `documentId` first. */
export function persistedId(params: Params): string | undefined {
  return typeof params.documentId === 'string' ? params.documentId : apqHash(params);
}

/** A refusal before anything ran, with its HTTP status (the direct path and Yoga both answer it). */
function gqlError(code: ErrorCode, message: string, details: Record<string, unknown> = {}): GraphQLError {
  const status = errorDefinition(code).status;
  return new GraphQLError(message, { extensions: { code, status, details, http: { status } } });
}

function requestContextOf(context: unknown): RequestContext {
  const c = context as { requestContext?: RequestContext };
  return c.requestContext ?? (context as RequestContext);
}

/**
 * The two onParams hooks: first the gate (trusted-only refuses texts; APQ registration of a text
 * with its hash), then Yoga's persisted-operations plugin resolving an id to its text.
 */
export function persistedOperations(documents: GraphqlDocuments): Plugin<RequestContext>[] {
  const gate: Plugin<RequestContext> = {
    // Synchronous unless it registers: a plain request with a query pays no promise here.
    onParams({ params, context }) {
      const p = params as Params;
      if (!p.query) return;
      const { scope } = requestContextOf(context);
      if (scope.graphqlTrustedOnly) throw gqlError('PERSISTED_QUERY_REQUIRED', 'This organization accepts only trusted documents: send a documentId, not a query');
      const hash = apqHash(p);
      if (hash === undefined) return;
      return documents.register(scope.organizationId, hash, p.query).catch((e: unknown) => {
        if (e instanceof ServiceError) throw gqlError(e.code, e.message, e.details);
        throw e;
      });
    },
  };
  const resolve = usePersistedOperations<RequestContext>({
    allowArbitraryOperations: true,
    extractPersistedOperationId: (params) => persistedId(params as Params) ?? null,
    getPersistedOperation: async (id, _request, context) => {
      const { scope } = requestContextOf(context);
      const found = await documents.find(scope.organizationId, id);
      if (!found || (scope.graphqlTrustedOnly && found.source !== 'trusted')) return null;
      return found.document;
    },
    customErrors: {
      notFound: () => gqlError('PERSISTED_QUERY_NOT_FOUND', 'PersistedQueryNotFound'),
      keyNotFound: () => gqlError('PERSISTED_QUERY_NOT_FOUND', 'Send a query, a documentId or extensions.persistedQuery'),
    },
  }) as Plugin<RequestContext>;
  return [gate, resolve];
}
