/**
 * The REST mount: `/v1/*` through the front door, rate-limit admission (burst slot and the
 * endpoint's window in one counter call), the route table, and Idempotency-Key on POST; and the
 * provider callbacks (`POST /v1/providers/{provider}/callbacks`, signed by the provider, no API key),
 * handled by the module that owns the provider, and the pages a provider shows a person there (GET).
 */
import type http from 'node:http';
import type { RequestContext } from '../context.ts';
import type { Clock } from '../platform/clock.ts';
import type { IdempotencyClaim } from '../platform/idempotency.ts';
import type { AdmissionTake } from '../platform/operations.ts';
import { rateLimitIdentity, type Scope } from '../platform/auth/scope.ts';
import { isServiceError, ServiceError } from '../platform/errors.ts';
import { headersOf, type RateLimiter } from '../platform/ratelimit/limiter.ts';
import type { RestRouter } from '../rest/router.ts';
import { BODY_METHODS, header, mark, note, parseJsonObject, parseMultipart, send, span, writeStream, type FrontDoor } from './frontDoor.ts';
import type { HttpResult } from '../rest/envelope.ts';
import { jsonNestsDeeper, tooDeep } from '../platform/nesting.ts';

export const PROVIDER_CALLBACK = /^\/v1\/providers\/([^/]+)\/callbacks\/?$/;

/** `request`: the path with its query and the headers, for providers that sign more than the body (Twilio signs the URL). */
export type ProviderCallback = (provider: string, rawBody: string, signature: string | undefined, request: { pathAndQuery: string; headers: http.IncomingHttpHeaders }) => Promise<Record<string, unknown>>;
/** The page a provider shows a person on its callback path (GET), if it has one. */
export type ProviderPage = (provider: string) => ((query: URLSearchParams) => Promise<{ status: number; html: string; headers?: Record<string, string> }>) | undefined;

export type RestMountDeps = {
  front: FrontDoor;
  clock: Clock;
  limiter: RateLimiter;
  rest: RestRouter;
  contextFor(scope: Scope): RequestContext;
  providerCallback: ProviderCallback;
  providerPage?: ProviderPage;
};

export function restMount(deps: RestMountDeps) {
  const { front, clock, limiter, rest } = deps;

  async function handleRest(req: http.IncomingMessage, res: http.ServerResponse, url: URL, requestId: string): Promise<void> {
    const method = req.method ?? 'GET';
    let rateHeaders: Record<string, string> = {};
    try {
      const scope = await front.authenticate(req, requestId);
      mark(res, 'auth');
      const matched = rest.match(method, url.pathname);
      note(res, { operation: matched.route.operation.name });
      const ctx = deps.contextFor(scope);
      // Burst slot and window in one round trip, under way while the body is read, the input checked
      // and the operation's `prepare` reads; nothing with an effect happens before it is admitted
      // (platform/operations.ts `invoke`), and a refusal answers first whatever else failed.
      const admitting = performance.now();
      let outcome: 'admitted' | 'refused' | undefined;
      const admissionTake: AdmissionTake = { take: undefined, outcome: () => outcome };
      const admission = limiter.admit(rateLimitIdentity(scope), scope.plan, matched.route.operation.endpoint, (take) => { admissionTake.take = take; }).then((window) => {
        outcome = 'admitted';
        rateHeaders = headersOf(window);
        span(res, 'limit', admitting);
        return window;
      }, (e: unknown) => {
        outcome = 'refused';
        throw e;
      });
      admission.catch(() => {});
      ctx.admission = admission;
      ctx.admissionTake = admissionTake;
      let result: HttpResult;
      try {
        const contentType = header(req, 'content-type');
        const multipart = matched.route.multipart && BODY_METHODS.has(method) && /^multipart\/form-data\b/i.test(contentType ?? '');
        const bytes = multipart ? await front.upload(req) : undefined;
        const text = bytes ? '' : BODY_METHODS.has(method) ? await front.body(req) : '';
        const body = bytes ? await parseMultipart(bytes, contentType!) : BODY_METHODS.has(method) ? parseJsonObject(text, contentType) : {};
        mark(res, 'body');
        const produce = (claim?: IdempotencyClaim) => {
          if (claim) ctx.idempotency = claim;
          return rest.execute(matched, url.searchParams, body, ctx, () => clock.now()).catch(async (e: unknown) => {
            await admission;
            return front.errorResult(e, requestId);
          });
        };
        const keyed = method === 'POST' && !bytes && header(req, 'idempotency-key') !== undefined;
        // Claiming an Idempotency-Key writes: only for an admitted request.
        if (keyed) await admission;
        result = keyed ? await front.withIdempotency(req, scope, method, url.pathname + url.search, text, produce) : await produce();
      } catch (e) {
        await admission;
        throw e;
      }
      await admission;
      mark(res, 'op');
      if (result.chunks) {
        await writeStream(res, { ...result, chunks: result.chunks, headers: { ...result.headers, ...rateHeaders } });
        return;
      }
      send(res, { ...result, headers: { ...result.headers, ...rateHeaders } });
    } catch (e) {
      const result = front.errorResult(e, requestId);
      send(res, { ...result, headers: { ...rateHeaders, ...result.headers, ...(isServiceError(e) && e.status === 400 && BODY_METHODS.has(method) ? { Connection: 'close' } : {}) } });
    }
  }

  async function handleProviderCallback(req: http.IncomingMessage, res: http.ServerResponse, provider: string, requestId: string, url: URL): Promise<void> {
    try {
      const page = deps.providerPage?.(provider);
      if (page && (req.method === 'GET' || req.method === 'HEAD')) {
        const r = await page(url.searchParams);
        send(res, { status: r.status, headers: { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store', ...r.headers }, body: req.method === 'HEAD' ? '' : r.html });
        return;
      }
      if (req.method !== 'POST') {
        const allow = page ? 'GET, POST' : 'POST';
        throw new ServiceError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${url.pathname}; it allows ${allow}`, { method: req.method, path: url.pathname, allowed_methods: allow.split(', ') }, { headers: { Allow: allow } });
      }
      const raw = await front.body(req);
      if (jsonNestsDeeper(raw)) throw tooDeep('Request body');
      const data = await deps.providerCallback(provider, raw, header(req, 'x-provider-signature') ?? header(req, 'stripe-signature'), { pathAndQuery: url.pathname + url.search, headers: req.headers });
      send(res, { status: 200, headers: { 'Content-Type': 'application/json; charset=utf-8' }, body: JSON.stringify({ data, meta: { request_id: requestId, timestamp: clock.now().toISOString() } }) });
    } catch (e) {
      send(res, front.errorResult(e, requestId));
    }
  }

  return { handleRest, handleProviderCallback };
}
