/**
 * One node:http server for everything: REST `/v1`, GraphQL `/graphql` (HTTP, SSE and graphql-ws
 * on the same path), `/healthz` and `/readyz`. Both API surfaces pass the same front door:
 * request id, client address, authentication, burst limit, body limits and idempotency.
 */
import http from 'node:http';
import type { MikroORM } from '@mikro-orm/postgresql';
import { getOperationAST, GraphQLError, parse } from 'graphql';
import { processRegularResult, type YogaServerInstance } from 'graphql-yoga';
import { useServer } from 'graphql-ws/use/ws';
import type { Pool } from 'pg';
import { WebSocketServer } from 'ws';
import type { Config } from './config.ts';
import type { RequestContext } from './context.ts';
import type { Clock } from './platform/clock.ts';
import type { Logger } from './platform/logger.ts';
import type { Authenticator } from './platform/auth/authenticate.ts';
import { buildBlockList, clientIp } from './platform/auth/ip.ts';
import { rateLimitIdentity, type Scope } from './platform/auth/scope.ts';
import { badRequest, isServiceError, ServiceError, toServiceError } from './platform/errors.ts';
import { newId } from './platform/ids.ts';
import { requestHash, validateIdempotencyKey, type IdempotencyStore } from './platform/idempotency.ts';
import type { Jobs } from './platform/jobs/jobs.ts';
import { headersOf, type RateLimiter } from './platform/ratelimit/limiter.ts';
import { BURST_PER_SECOND } from './platform/ratelimit/plans.ts';
import { errorResult, type HttpResult } from './rest/envelope.ts';
import type { RestRouter } from './rest/router.ts';
import { graphqlErrorBody } from './graphql/errors.ts';
import { firstLimitedEndpoint, liveContexts, type LiveContext } from './graphql/yoga.ts';

export type ServerDeps = {
  config: Config;
  clock: Clock;
  log: Logger;
  pool: Pool;
  orm: MikroORM;
  authenticator: Authenticator;
  limiter: RateLimiter;
  idempotency: IdempotencyStore;
  rest: RestRouter;
  yoga: YogaServerInstance<{ requestContext: RequestContext }, RequestContext>;
  jobs: Jobs;
  contextFor(scope: Scope): RequestContext;
  /** Provider callbacks (`POST /v1/providers/{provider}/callbacks`): signed by the provider, no API key. */
  providerCallback(provider: string, rawBody: string, signature: string | undefined): Promise<Record<string, unknown>>;
};

export type HttpServer = {
  server: http.Server;
  listen(port: number, host: string): Promise<{ port: number }>;
  /** Stops accepting, waits for in-flight requests (at most `timeoutMs`), closes sockets. */
  drain(timeoutMs: number): Promise<void>;
};

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);
const PROVIDER_CALLBACK = /^\/v1\/providers\/([^/]+)\/callbacks\/?$/;
/** CORS on every response: any origin may call (credentials are API keys and bearer tokens, never cookies). */
const CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, Idempotent-Replayed',
};
/** Read by browsers only on a preflight (OPTIONS) answer, so only sent there. */
const PREFLIGHT_HEADERS = {
  'Access-Control-Allow-Methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': 'Authorization, Content-Type, X-API-Key, Idempotency-Key',
  'Access-Control-Max-Age': '600',
};

function header(req: http.IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The request body as text, refused over `limit` bytes (declared or streamed). Read with plain
 * 'data'/'end' listeners: an async iterator over the request costs several times more per request.
 * Past the limit the rest is not read; the 400 closes the connection (`Connection: close`).
 */
export function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  const tooLarge = () => new ServiceError('VALIDATION_ERROR', `Request body is larger than ${limit} bytes`, { max_bytes: limit }, { status: 400, headers: { Connection: 'close' } });
  const declared = Number(header(req, 'content-length') ?? '0');
  if (declared > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
      req.off('close', onAborted);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        done();
        req.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    };
    const onError = (e: Error) => {
      done();
      reject(e);
    };
    const onAborted = () => onError(new Error('request aborted'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
    // Closed before its end (the client went away): without this the read would never settle.
    req.on('close', onAborted);
  });
}

function parseJsonObject(text: string, contentType: string | undefined): Record<string, unknown> {
  if (text.trim() === '') return {};
  if (contentType && !/^application\/(.+\+)?json\b/i.test(contentType)) {
    throw badRequest(`Content-Type must be application/json, got ${contentType}`, { field: 'Content-Type' });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badRequest('Request body is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw badRequest('Request body must be a JSON object');
  return parsed as Record<string, unknown>;
}

export function createHttpServer(deps: ServerDeps): HttpServer {
  const { config, clock, log, authenticator, limiter, idempotency, rest, yoga } = deps;
  const trusted = buildBlockList(config.trustedProxies);
  const hasTrusted = config.trustedProxies.length > 0;
  let inFlight = 0;
  let draining = false;
  const idleWaiters: (() => void)[] = [];

  const credentials = (req: http.IncomingMessage, requestId: string) => ({
    apiKey: header(req, 'x-api-key'),
    authorization: header(req, 'authorization'),
    ip: clientIp(req.socket.remoteAddress, header(req, 'x-forwarded-for'), trusted, hasTrusted),
    requestId,
  });

  function send(res: http.ServerResponse, result: HttpResult): void {
    if (res.headersSent) return;
    res.writeHead(result.status, result.headers);
    res.end(result.body);
  }

  /**
   * Rate limits at GraphQL admission: the burst slot, together with the window of the operation's
   * first rate-limited root field when there is one (one counter round trip, as for REST); the
   * field's refusal is left on the context for the rate-limiter plugin to report on that field.
   * Other fields' windows are counted by @envelop/rate-limiter during execution.
   */
  async function admitGraphql(ctx: LiveContext, params: GraphqlParams | undefined): Promise<void> {
    const identity = rateLimitIdentity(ctx.scope);
    const endpoint = params ? firstLimitedEndpoint(params.query, params.operationName) : null;
    if (!endpoint) {
      await limiter.acquireBurst(identity, ctx.scope.plan);
      return;
    }
    try {
      ctx.rateLimit = await limiter.admit(identity, ctx.scope.plan, endpoint);
    } catch (e) {
      if (!isServiceError(e) || e.code !== 'RATE_LIMIT_EXCEEDED') throw e;
      ctx.rateLimitError = e;
    }
    ctx.preCounted = endpoint;
  }

  /** Runs `produce` once per Idempotency-Key (per tenant): a repeat replays the stored response. */
  async function withIdempotency(req: http.IncomingMessage, scope: Scope, method: string, path: string, body: string, produce: () => Promise<HttpResult>): Promise<HttpResult> {
    const raw = header(req, 'idempotency-key');
    if (raw === undefined) return produce();
    const key = validateIdempotencyKey(raw);
    const begun = await idempotency.begin(scope, key, requestHash(method, path, body));
    if (begun.kind === 'replay') {
      return { status: begun.status, headers: { ...begun.headers, 'Idempotent-Replayed': 'true' }, body: begun.body };
    }
    let result: HttpResult;
    try {
      result = await produce();
    } catch (e) {
      await idempotency.abandon(scope, key);
      throw e;
    }
    const stored = Object.fromEntries(Object.entries(result.headers).filter(([k]) => !k.toLowerCase().startsWith('x-ratelimit')));
    await idempotency.complete(scope, key, { status: result.status, headers: stored, body: result.body.toString() });
    return result;
  }

  async function handleRest(req: http.IncomingMessage, res: http.ServerResponse, url: URL, requestId: string): Promise<void> {
    const method = req.method ?? 'GET';
    let scope: Scope | undefined;
    let rateHeaders: Record<string, string> = {};
    try {
      scope = await authenticator.authenticate(credentials(req, requestId));
      const matched = rest.match(method, url.pathname);
      const ctx = deps.contextFor(scope);
      // Burst slot and window in one round trip.
      const window = await limiter.admit(rateLimitIdentity(scope), scope.plan, matched.route.operation.endpoint);
      rateHeaders = headersOf(window);
      const text = BODY_METHODS.has(method) ? await readBody(req, config.maxBodyBytes) : '';
      const body = BODY_METHODS.has(method) ? parseJsonObject(text, header(req, 'content-type')) : {};
      const produce = () => rest.execute(matched, url.searchParams, body, ctx, () => clock.now()).catch((e: unknown) => {
        const se = toServiceError(e);
        if (!isServiceError(e)) log.error({ err: e, request_id: requestId }, 'unexpected error');
        return errorResult(se, requestId, clock.now(), config.docsBaseUrl);
      });
      const result = method === 'POST' ? await withIdempotency(req, scope, method, url.pathname + url.search, text, produce) : await produce();
      send(res, { ...result, headers: { ...result.headers, ...rateHeaders } });
    } catch (e) {
      if (!isServiceError(e)) log.error({ err: e, request_id: requestId }, 'unexpected error');
      const result = errorResult(toServiceError(e), requestId, clock.now(), config.docsBaseUrl);
      send(res, { ...result, headers: { ...rateHeaders, ...result.headers, ...(isServiceError(e) && e.status === 400 && BODY_METHODS.has(method) ? { Connection: 'close' } : {}) } });
    }
  }

  async function handleGraphql(req: http.IncomingMessage, res: http.ServerResponse, url: URL, requestId: string): Promise<void> {
    const method = req.method ?? 'GET';
    const accept = header(req, 'accept') ?? '';
    const isGraphiql = method === 'GET' && accept.includes('text/html') && !url.searchParams.has('query');
    let ctx: LiveContext | undefined;
    let bodyText = '';
    let params: GraphqlParams | undefined;
    try {
      if (!isGraphiql) {
        const scope = await authenticator.authenticate(credentials(req, requestId));
        ctx = deps.contextFor(scope);
      }
      if (method === 'POST') {
        bodyText = await readBody(req, config.maxBodyBytes);
        params = graphqlParams(bodyText);
      }
      if (ctx) await admitGraphql(ctx, params);
    } catch (e) {
      const se = toServiceError(e);
      if (!isServiceError(e)) log.error({ err: e, request_id: requestId }, 'unexpected error');
      send(res, { status: se.status, headers: { 'Content-Type': 'application/json; charset=utf-8', ...se.headers }, body: graphqlErrorBody(se, requestId) });
      return;
    }
    if (ctx) liveContexts.set(requestId, ctx);
    let streaming = false;
    try {
      // A plain record: Yoga builds its own Request from it (a Node Headers object here would be converted).
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      type Streamed = { stream: Response };
      const produce = async (): Promise<HttpResult | Streamed> => {
        const direct = ctx && params ? await directGraphql(ctx, url, headers, params) : undefined;
        if (direct) return direct;
        const response = await yoga.fetch(url.toString(), { method, headers, body: method === 'POST' ? bodyText : undefined }, { requestContext: ctx! });
        const out: Record<string, string> = {};
        response.headers.forEach((v, k) => { out[k] = v; });
        if ((response.headers.get('content-type') ?? '').includes('text/event-stream')) return { stream: response };
        return { status: response.status, headers: out, body: await response.text() };
      };
      let result: HttpResult | Streamed;
      if (ctx && method === 'POST' && header(req, 'idempotency-key') !== undefined && isMutation(params)) {
        // An invalid or conflicting Idempotency-Key is the client's error (400/409), not an unhandled 500.
        result = await withIdempotency(req, ctx.scope, 'POST', '/graphql', bodyText, produce as () => Promise<HttpResult>).catch((e: unknown) => {
          if (!isServiceError(e)) throw e;
          return { status: e.status, headers: { 'Content-Type': 'application/json; charset=utf-8', ...e.headers }, body: graphqlErrorBody(e, requestId) };
        });
      } else {
        result = await produce();
      }
      // Counted at admission but never asked for by the field (refused before execution): a refused
      // document costs no window quota, as before admission counted it.
      if (ctx?.preCounted && ctx.rateLimit && !ctx.rateLimitError) {
        await limiter.release(rateLimitIdentity(ctx.scope), ctx.scope.plan, ctx.preCounted, ctx.rateLimit);
        ctx.preCounted = undefined;
        ctx.rateLimit = undefined;
      }
      // A field rejected by its window reports that window (remaining 0), like REST, not another bucket's or the burst's.
      const rejectedWindow = ctx ? liveContexts.get(requestId)?.rateLimitError : undefined;
      const rateHeaders = rejectedWindow ? rejectedWindow.headers : ctx?.rateLimit ? headersOf(ctx.rateLimit) : ctx ? burstHeaders(ctx.scope) : {};
      if ('stream' in result) {
        streaming = true;
        const out: Record<string, string> = { ...rateHeaders };
        result.stream.headers.forEach((v, k) => { out[k] = v; });
        res.writeHead(result.stream.status, out);
        // Yoga's body is a ponyfilled ReadableStream: pump it by hand, flushing each event.
        const reader = (result.stream.body as ReadableStream<Uint8Array>).getReader();
        res.on('close', () => { void reader.cancel().catch(() => {}); liveContexts.delete(requestId); });
        void (async () => {
          try {
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              res.write(value);
            }
          } catch { /* client went away */ }
          res.end();
        })();
        return;
      }
      send(res, { ...result, headers: { ...result.headers, ...rateHeaders } });
    } finally {
      if (!streaming) liveContexts.delete(requestId);
    }
  }

  /**
   * The common case without Yoga's HTTP layer: a JSON POST accepting JSON, a single query or
   * mutation. Yoga still runs it (`getResultForParams`: the same envelop plugins, parse and validation
   * caches, rate limits, complexity, masked errors) and formats it (`processRegularResult`, only
   * when there are errors); what is skipped is building a fetch Request from the node request and
   * a Response for the answer. Anything else (batches, subscriptions, other media types, bodies
   * Yoga must reject) returns undefined before anything ran, and goes through `yoga.fetch`.
   */
  async function directGraphql(ctx: RequestContext, url: URL, headers: Record<string, string>, params: GraphqlParams): Promise<HttpResult | undefined> {
    const contentType = (headers['content-type'] ?? '').replace(/\s/g, '').toLowerCase();
    const accept = (headers.accept ?? '*/*').replace(/\s/g, '').toLowerCase();
    if (contentType !== 'application/json' && contentType !== 'application/json;charset=utf-8') return undefined;
    if (accept !== 'application/json' && accept !== 'application/json;charset=utf-8' && accept !== '*/*') return undefined;
    if (/\bsubscription\b/.test(params.query)) return undefined;
    const request = new yoga.fetchAPI.Request(url.toString(), { method: 'POST', headers });
    let result: unknown;
    try {
      result = await yoga.getResultForParams({ params, request }, { requestContext: ctx, request } as never);
    } catch (e) {
      // Only a request-validation hook throws here (nothing ran): answer it as Yoga would, never re-run.
      if (!(e instanceof GraphQLError)) throw e;
      result = { errors: [e] };
    }
    if (!result || typeof result !== 'object' || Symbol.asyncIterator in result) throw new Error('unexpected streamed GraphQL result on the direct path');
    const plain = result as { errors?: readonly unknown[]; extensions?: Record<string, unknown> };
    if (!plain.errors?.length && !plain.extensions) {
      return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(result) };
    }
    const response = await processRegularResult(result as never, yoga.fetchAPI, 'application/json');
    const out: Record<string, string> = {};
    response.headers.forEach((v, k) => { out[k] = v; });
    return { status: response.status, headers: out, body: await response.text() };
  }

  function burstHeaders(scope: Scope): Record<string, string> {
    const limit = BURST_PER_SECOND[scope.plan];
    return { 'X-RateLimit-Limit': String(limit), 'X-RateLimit-Remaining': String(limit - 1), 'X-RateLimit-Reset': String(Math.floor(clock.now().getTime() / 1000) + 1) };
  }

  async function handleProviderCallback(req: http.IncomingMessage, res: http.ServerResponse, provider: string, requestId: string): Promise<void> {
    try {
      if (req.method !== 'POST') throw new ServiceError('NOT_FOUND', `${req.method} is not supported on provider callbacks; use POST`, {}, { headers: { Allow: 'POST' } });
      const raw = await readBody(req, config.maxBodyBytes);
      const data = await deps.providerCallback(provider, raw, header(req, 'x-provider-signature') ?? header(req, 'stripe-signature'));
      send(res, { status: 200, headers: { 'Content-Type': 'application/json; charset=utf-8' }, body: JSON.stringify({ data, meta: { request_id: requestId, timestamp: clock.now().toISOString() } }) });
    } catch (e) {
      if (!isServiceError(e)) log.error({ err: e, request_id: requestId }, 'unexpected error');
      send(res, errorResult(toServiceError(e), requestId, clock.now(), config.docsBaseUrl));
    }
  }

  async function handleReady(res: http.ServerResponse): Promise<void> {
    let database = false;
    try {
      await deps.pool.query('select 1');
      database = true;
    } catch { /* reported below */ }
    const queue = await deps.jobs.ready();
    const ok = database && queue && !draining;
    send(res, { status: ok ? 200 : 503, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ status: ok ? 'ready' : 'unavailable', database, queue, draining }) });
  }

  const logRequests = log.isLevelEnabled('info');
  const server = http.createServer((req, res) => {
    const requestId = newId('req', clock.now().getTime());
    res.setHeader('X-Request-Id', requestId);
    for (const [k, v] of Object.entries(CORS_HEADERS)) res.setHeader(k, v);
    inFlight++;
    const started = performance.now();
    res.on('close', () => {
      inFlight--;
      if (logRequests) log.info({ request_id: requestId, method: req.method, path: req.url?.split('?')[0], status: res.statusCode, ms: Math.round(performance.now() - started) }, 'request');
      if (inFlight === 0) idleWaiters.splice(0).forEach((w) => w());
    });
    const url = new URL(req.url ?? '/', `http://${header(req, 'host') ?? 'localhost'}`);
    const path = url.pathname;
    const done = (p: Promise<void>) => p.catch((e: unknown) => {
      log.error({ err: e, request_id: requestId }, 'unhandled error');
      send(res, errorResult(new ServiceError('INTERNAL_ERROR'), requestId, clock.now(), config.docsBaseUrl));
    });
    if (req.method === 'OPTIONS') {
      send(res, { status: 204, headers: PREFLIGHT_HEADERS, body: '' });
    } else if (path === '/healthz') {
      send(res, { status: 200, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ status: 'ok' }) });
    } else if (path === '/readyz') {
      done(handleReady(res));
    } else if (path === '/graphql') {
      done(handleGraphql(req, res, url, requestId));
    } else if (PROVIDER_CALLBACK.test(path)) {
      done(handleProviderCallback(req, res, PROVIDER_CALLBACK.exec(path)![1]!, requestId));
    } else if (path === '/v1' || path.startsWith('/v1/')) {
      done(handleRest(req, res, url, requestId));
    } else {
      send(res, errorResult(new ServiceError('NOT_FOUND', `No route ${req.method} ${path}`, { path }), requestId, clock.now(), config.docsBaseUrl));
    }
  });
  server.requestTimeout = 60_000;
  server.headersTimeout = 20_000;

  const wss = new WebSocketServer({ server, path: '/graphql' });
  attachGraphqlWs(wss, deps);

  return {
    server,
    listen: (port, host) => new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        const addr = server.address();
        resolve({ port: typeof addr === 'object' && addr ? addr.port : port });
      });
    }),
    async drain(timeoutMs) {
      draining = true;
      for (const client of wss.clients) client.close(1001, 'server shutting down');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      if (inFlight > 0) {
        await Promise.race([new Promise<void>((r) => idleWaiters.push(r)), new Promise((r) => setTimeout(r, timeoutMs))]);
      }
      server.closeAllConnections();
      await closed;
    },
  };
}

type GraphqlParams = { query: string; variables?: Record<string, unknown>; operationName?: string; extensions?: Record<string, unknown> };

/** A single GraphQL request's parameters from a JSON POST body, or undefined (batches, malformed: Yoga answers those). */
function graphqlParams(body: string): GraphqlParams | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  // Yoga refuses any other parameter: leave such bodies to it.
  if (Object.keys(parsed).some((k) => k !== 'query' && k !== 'variables' && k !== 'operationName' && k !== 'extensions')) return undefined;
  const { query, variables, operationName, extensions } = parsed as Record<string, unknown>;
  const isObject = (v: unknown) => v == null || (typeof v === 'object' && !Array.isArray(v));
  if (typeof query !== 'string' || !isObject(variables) || !isObject(extensions) || (operationName != null && typeof operationName !== 'string')) return undefined;
  return {
    query,
    ...(variables != null ? { variables: variables as Record<string, unknown> } : {}),
    ...(operationName != null ? { operationName: operationName as string } : {}),
    ...(extensions != null ? { extensions: extensions as Record<string, unknown> } : {}),
  };
}

function isMutation(params: GraphqlParams | undefined): boolean {
  if (!params) return false;
  try {
    return getOperationAST(parse(params.query), params.operationName)?.operation === 'mutation';
  } catch {
    return false;
  }
}

/**
 * graphql-ws on /graphql: the connection is authenticated once at `connection_init` with the same
 * API key or bearer token (connection params `apiKey` / `authorization`, or the upgrade request's
 * headers); each operation then runs with that scope through Yoga's envelop.
 */
function attachGraphqlWs(wss: WebSocketServer, deps: ServerDeps): void {
  const trusted = buildBlockList(deps.config.trustedProxies);
  useServer<Record<string, unknown>, { scope?: Scope }>({
    onConnect: async (ctx) => {
      const params = ctx.connectionParams ?? {};
      const req = ctx.extra.request;
      const pick = (k: string) => (typeof params[k] === 'string' ? (params[k] as string) : undefined);
      try {
        ctx.extra.scope = await deps.authenticator.authenticate({
          apiKey: pick('apiKey') ?? pick('x-api-key') ?? pick('X-API-Key') ?? header(req, 'x-api-key'),
          authorization: pick('authorization') ?? pick('Authorization') ?? header(req, 'authorization'),
          ip: clientIp(req.socket.remoteAddress, header(req, 'x-forwarded-for'), trusted, deps.config.trustedProxies.length > 0),
          requestId: newId('req'),
        });
        return true;
      } catch (e) {
        const se = toServiceError(e);
        ctx.extra.socket.close(se.status === 403 ? 4403 : 4401, `${se.code}: ${se.message}`.slice(0, 120));
        return false;
      }
    },
    onSubscribe: async (ctx, _id, payload) => {
      const scope = { ...ctx.extra.scope!, requestId: newId('req') };
      const requestContext = deps.contextFor(scope);
      liveContexts.set(scope.requestId, requestContext);
      setTimeout(() => liveContexts.delete(scope.requestId), 60_000).unref();
      const { schema, execute, subscribe, contextFactory, parse: parseDoc, validate } = deps.yoga.getEnveloped({
        ...ctx, req: ctx.extra.request, socket: ctx.extra.socket, params: payload, requestContext,
      });
      const args = {
        schema,
        operationName: payload.operationName,
        document: parseDoc(payload.query),
        variableValues: payload.variables,
        contextValue: await contextFactory(),
        rootValue: { execute, subscribe },
      };
      const errors = validate(args.schema, args.document);
      if (errors.length) return errors;
      return args;
    },
    execute: (args) => (args.rootValue as { execute: (a: unknown) => never }).execute(args),
    subscribe: (args) => (args.rootValue as { subscribe: (a: unknown) => never }).subscribe(args),
  }, wss);
}
