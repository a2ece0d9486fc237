/** REST routes are data: method, path, the operation they run, how to read input and shape output. */
import type { RequestContext } from '../context.ts';
import type { Operation } from '../platform/operations.ts';
import { badRequest } from '../platform/errors.ts';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export type RestRequest = {
  params: Record<string, string>;
  query: Record<string, string>;
  body: Record<string, unknown>;
  ctx: RequestContext;
};

/** A non-JSON response (CSV export and the like). */
export type RawResponse = { raw: true; status: number; contentType: string; body: string | Buffer; headers?: Record<string, string> };

export type RestRoute = {
  method: HttpMethod;
  /** `/v1/settings/api-keys/{id}` */
  path: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  operation: Operation<RequestContext, any, any, any>;
  /** Query parameters this route accepts; anything else is a 400. */
  query?: readonly string[];
  input?: (req: RestRequest) => unknown;
  /** Shapes the result (each item of a page) as the REST `data`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  output?: (result: any, req: RestRequest) => unknown;
  paginated?: boolean;
  status?: 200 | 201 | 202 | 204;
  /** Resource type (id prefix) of the `{id}` parameter, for the generated cross-tenant tests. */
  resource?: string;
};

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
