/** GraphQL errors carry the same `code`, `status` and `details` as REST, in `extensions`. */
import { GraphQLError } from 'graphql';
import { isServiceError, ServiceError } from '../platform/errors.ts';

export function serviceErrorToGraphQL(e: ServiceError, base?: GraphQLError, requestId?: string): GraphQLError {
  const http = e.status === 429 ? { http: { status: 429, headers: e.headers } } : {};
  return new GraphQLError(e.message, {
    nodes: base?.nodes, source: base?.source, positions: base?.positions, path: base?.path, originalError: undefined,
    extensions: { code: e.code, status: e.status, details: e.details, ...(requestId ? { request_id: requestId } : {}), ...http },
  });
}

/** Yoga's maskError: ServiceErrors keep their code; anything unexpected becomes INTERNAL_ERROR without internals. */
export function maskError(error: unknown): Error {
  const base = error instanceof GraphQLError ? error : undefined;
  let original = base ? base.originalError : error;
  // Variable coercion (no path) wraps the input error in another GraphQLError: the client's error, not an internal one.
  if (base && !base.path && original instanceof GraphQLError) original = original.originalError;
  if (isServiceError(original)) return serviceErrorToGraphQL(original, base);
  if (base && base.extensions?.code) return base;
  if (base && !original) {
    return new GraphQLError(base.message, { nodes: base.nodes, source: base.source, positions: base.positions, path: base.path, extensions: { ...base.extensions, code: 'VALIDATION_ERROR', status: 400 } });
  }
  return serviceErrorToGraphQL(new ServiceError('INTERNAL_ERROR'), base);
}

/** A complete GraphQL-over-HTTP error body for failures before execution (authentication, body size). */
export function graphqlErrorBody(e: ServiceError, requestId: string): string {
  return JSON.stringify({ errors: [{ message: e.message, extensions: { code: e.code, status: e.status, details: e.details, request_id: requestId } }] });
}
