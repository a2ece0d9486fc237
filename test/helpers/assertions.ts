/** Assertions and polling shared by the integration tests. */
import { expect } from 'vitest';
import type { HttpResponse } from './testApp.ts';

export type ErrorBody = {
  error: { code: string; message: string; status: number; details: Record<string, any> };
  meta: { request_id: string; timestamp: string; docs_url: string };
};
export type GqlError = { message: string; extensions: { code: string; status: number; details?: Record<string, unknown> } };

/** The REST error envelope with this status and code (and a request id matching X-Request-Id). */
export function expectError(res: HttpResponse, status: number, code: string): ErrorBody {
  expect({ status: res.status, code: (res.body as ErrorBody | undefined)?.error?.code }, res.text).toEqual({ status, code });
  const body = res.body as ErrorBody;
  expect(body.error.status).toBe(status);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.details).toBeTypeOf('object');
  expect(body.meta.request_id).toMatch(/^req_/);
  expect(res.headers.get('x-request-id')).toBe(body.meta.request_id);
  return body;
}

/** The first GraphQL error carries this spec code in `extensions`. */
export function expectGqlError(res: HttpResponse<{ data?: unknown; errors?: GqlError[] }>, code: string): GqlError {
  const err = res.body.errors?.[0];
  expect(err?.extensions.code, res.text).toBe(code);
  return err!;
}

/**
 * Polls (real time, bounded) until `probe` answers something other than undefined: the one polling
 * loop of the tests (the helpers' `eventually`, `waitFor` and `until` are this with their defaults).
 */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Reads until `ok` holds for what was read, and answers it; a timeout names the last value read. */
export async function eventuallyHolds<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  let last: T | undefined;
  try {
    return await eventually(what, async () => {
      last = await read();
      return ok(last) ? last : undefined;
    }, timeoutMs, intervalMs);
  } catch (e) {
    throw new Error(`${(e as Error).message}; last: ${JSON.stringify(last)?.slice(0, 2000)}`, { cause: e });
  }
}
