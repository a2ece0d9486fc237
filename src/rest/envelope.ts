/** The REST envelopes: `{ data, meta }` on success, `{ error, meta }` on failure. */
import { ServiceError } from '../platform/errors.ts';

/** `body` is text, or bytes for binary documents (invoice PDFs); `chunks`: a body written piece by piece (Server-Sent Events) instead. */
/** An HTTP answer; `code` is the error code of an error answer (for the request log, not sent). */
export type HttpResult = { status: number; headers: Record<string, string>; body: string | Buffer; chunks?: AsyncIterable<string>; code?: string };

export type Pagination = { cursor: string | null; has_more: boolean; total?: number };

export function successBody(data: unknown, requestId: string, now: Date, pagination?: Pagination): string {
  return JSON.stringify({ data, meta: { request_id: requestId, timestamp: now.toISOString(), ...(pagination ? { pagination } : {}) } });
}

export function errorResult(e: ServiceError, requestId: string, now: Date, docsBaseUrl: string): HttpResult {
  const body = JSON.stringify({
    error: { code: e.code, message: e.message, status: e.status, details: e.details },
    meta: { request_id: requestId, timestamp: now.toISOString(), docs_url: `${docsBaseUrl}#${e.code.toLowerCase()}` },
  });
  return { status: e.status, headers: { 'Content-Type': 'application/json; charset=utf-8', ...e.headers }, body, code: e.code };
}
