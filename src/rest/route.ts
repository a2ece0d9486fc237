/** REST routes are data: method, path, the operation they run, how to read input and shape output. */
import type { RequestContext } from '../context.ts';
import type { Operation } from '../platform/operations.ts';
import type { z } from 'zod';
import { badRequest, type ErrorCode } from '../platform/errors.ts';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export type RestRequest = {
  params: Record<string, string>;
  query: Record<string, string>;
  body: Record<string, unknown>;
  ctx: RequestContext;
};

/**
 * A non-JSON response (CSV export, invoice PDFs and the like). With `stream`, the body is written piece by piece
 * as the iterable yields (Server-Sent Events); the client going away calls the iterator's `return()`.
 */
export type RawResponse = { raw: true; status: number; contentType: string; body: string | Buffer; headers?: Record<string, string>; stream?: AsyncIterable<string> };

export type RestRoute = {
  method: HttpMethod;
  /** `/v1/settings/api-keys/{id}` */
  path: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  operation: Operation<RequestContext, any, any, any, any>;
  /** Query parameters this route accepts; anything else is a 400. */
  query?: readonly string[];
  input?: (req: RestRequest) => unknown;
  /**
   * The request body as the client sends it, when `input` reshapes it into a different operation
   * input (e.g. a channel map at the top level that the operation takes under `preferences`): the
   * OpenAPI document describes this instead of the operation's input.
   */
  body?: z.ZodType;
  /** Shapes the result (each item of a page) as the REST `data`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  output?: (result: any, req: RestRequest) => unknown;
  paginated?: boolean;
  status?: 200 | 201 | 202 | 204;
  /**
   * Accepts `multipart/form-data` (up to MAX_UPLOAD_BYTES): text fields arrive as strings in the
   * body, files as `{ filename, type, bytes }` (see {@link UploadedFile}).
   */
  multipart?: boolean;
  /** Resource type (id prefix) of the `{id}` parameter, for the generated cross-tenant tests. */
  resource?: string;
  /** Error codes this route answers beyond the common ones (auth, validation, not found, limits), for the OpenAPI document. */
  errors?: readonly ErrorCode[];
};

/** A file part of a multipart body. */
export type UploadedFile = { filename: string; type: string; bytes: Uint8Array };

export function route(r: RestRoute): RestRoute {
  return r;
}

export const PAGE_QUERY = ['cursor', 'limit'] as const;

/** `limit` as an integer (400 when it is not), `cursor` as given. */
export function pageQuery(query: Record<string, string>): { cursor: string | undefined; limit: number | undefined } {
  if (query.limit !== undefined && !/^\d{1,6}$/.test(query.limit)) {
    throw badRequest('limit must be an integer from 1 to 100', { field: 'limit', value: query.limit, expected: '1-100' });
  }
  return { cursor: query.cursor, limit: query.limit === undefined ? undefined : Number(query.limit) };
}
