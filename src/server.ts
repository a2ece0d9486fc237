/**
 * One node:http server for everything: REST `/v1` (http/rest.ts), provider callbacks, GraphQL
 * `/graphql` over HTTP, SSE and graphql-ws (http/graphql.ts), the Twilio-compatible surface
 * `/2010-04-01` and `/v2/Services` (twilio/mount.ts), `/healthz` and `/readyz`
 * (http/health.ts). Both API surfaces pass the same front door (http/frontDoor.ts). This file
 * dispatches by path, counts in-flight requests, sheds API requests past HTTP_MAX_IN_FLIGHT (503
 * SERVICE_UNAVAILABLE with Retry-After, before anything is read or queried) and drains on shutdown.
 */
import http from 'node:http';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { YogaServerInstance } from 'graphql-yoga';
import type { Pool } from 'pg';
import { WebSocketServer } from 'ws';
import type { Config } from './config.ts';
import type { RequestContext } from './context.ts';
import type { Clock } from './platform/clock.ts';
import type { Logger } from './platform/logger.ts';
import type { Authenticator } from './platform/auth/authenticate.ts';
import type { Scope } from './platform/auth/scope.ts';
import { ServiceError } from './platform/errors.ts';
import { newId } from './platform/ids.ts';
import type { IdempotencyStore } from './platform/idempotency.ts';
import type { Jobs } from './platform/jobs/jobs.ts';
import type { RateLimiter } from './platform/ratelimit/limiter.ts';
import type { RestRouter } from './rest/router.ts';
import type { GraphqlRateLimits } from './graphql/rateLimits.ts';
import { CORS_HEADERS, FrontDoor, header, notesOf, PREFLIGHT_HEADERS, RELEASE_ADMISSION, send } from './http/frontDoor.ts';
import { PROVIDER_CALLBACK, restMount, type ProviderCallback, type ProviderPage } from './http/rest.ts';
import { graphqlMount } from './http/graphql.ts';
import { TWILIO_PATH, twilioMount } from './twilio/mount.ts';
import { TwilioRouter } from './twilio/router.ts';
import { twilioRoutes } from './twilio/routes.ts';
import { healthz, readyz } from './http/health.ts';
import { Admission, AdmissionLimit } from './http/admission.ts';
import { graphqlErrorBody } from './graphql/errors.ts';
import { createDocs } from './http/docs.ts';
import { routeTemplates, type Metrics } from './http/metrics.ts';
import { contextOf, markError, runIn, SpanKind, startSpan, tracingEnabled } from './platform/tracing.ts';

export { readBody } from './http/frontDoor.ts';

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
  graphqlRateLimits: GraphqlRateLimits;
  /** A persisted GraphQL document's text (settings' graphql documents), see http/graphql.ts. */
  persistedDocument?(organizationId: string, id: string): Promise<string | undefined>;
  jobs: Jobs;
  contextFor(scope: Scope): RequestContext;
  /** Provider callbacks (`POST /v1/providers/{provider}/callbacks`): signed by the provider, no API key. */
  providerCallback: ProviderCallback;
  /** A provider's page for a person (`GET` on its callback path), when it has one. */
  providerPage?: ProviderPage;
  /** `/metrics` and the request counters (created with the app: its workers report to it too). */
  metrics: Metrics;
};

export type HttpServer = {
  server: http.Server;
  listen(port: number, host: string): Promise<{ port: number }>;
  /** Stops accepting, waits for in-flight requests (at most `timeoutMs`), closes sockets. */
  drain(timeoutMs: number): Promise<void>;
};

/** Seconds a shed request is told to wait (Retry-After). */
export const OVERLOAD_RETRY_AFTER_SECONDS = 1;
const overloaded = () => new ServiceError('SERVICE_UNAVAILABLE', 'The server is at capacity; retry shortly with exponential backoff',
  { retry_after: OVERLOAD_RETRY_AFTER_SECONDS, reason: 'overloaded' }, { headers: { 'Retry-After': String(OVERLOAD_RETRY_AFTER_SECONDS) } });

export function createHttpServer(deps: ServerDeps): HttpServer {
  const { clock, log } = deps;
  const front = new FrontDoor(deps);
  const rest = restMount({ front, clock, limiter: deps.limiter, rest: deps.rest, contextFor: deps.contextFor, providerCallback: deps.providerCallback, providerPage: deps.providerPage });
  const graphql = graphqlMount({ front, yoga: deps.yoga, rateLimits: deps.graphqlRateLimits, contextFor: deps.contextFor, log, persistedDocument: deps.persistedDocument });
  const twilio = twilioMount({ front, clock, limiter: deps.limiter, router: new TwilioRouter(twilioRoutes), contextFor: deps.contextFor });
  let inFlight = 0;
  /**
   * API requests being worked on (streams excluded), bounded by HTTP_MAX_IN_FLIGHT (lowered while
   * the event loop lags); past it a request waits up to HTTP_ADMISSION_WAIT_MS for a slot (at most
   * HTTP_MAX_IN_FLIGHT wait; none for a while after a wait ran out), then is shed (http/admission.ts).
   */
  const maxInFlight = deps.config.httpMaxInFlight;
  const admissionLimit = new AdmissionLimit({ max: maxInFlight, targetMs: deps.config.httpMaxLoopDelayMs });
  const admission = new Admission(admissionLimit, { waitMs: deps.config.httpAdmissionWaitMs, maxWaiting: maxInFlight });
  let stopWatching: (() => void) | undefined;
  let draining = false;
  const idleWaiters: (() => void)[] = [];

  const docs = createDocs(() => deps.rest.routes);
  const metrics = deps.metrics;
  const logRequests = log.isLevelEnabled('info');
  let template: ReturnType<typeof routeTemplates> | undefined;
  /**
   * With tracing on, each request runs in a SERVER span named by its route template (a GraphQL
   * request is renamed by its operation in http/graphql.ts), child of an incoming `traceparent`.
   * Only the template, method, status, request id and (once authenticated) organization are recorded.
   */
  const traced = (req: http.IncomingMessage, res: http.ServerResponse, requestId: string, handle: () => void): void => {
    if (!tracingEnabled()) return handle();
    const method = req.method ?? 'GET';
    template ??= routeTemplates(deps.rest.routes);
    const { surface, route } = template(method, (req.url ?? '/').split('?')[0]!);
    const started = startSpan(`${method} ${route}`, {
      kind: SpanKind.SERVER, parent: contextOf(header(req, 'traceparent')),
      attributes: { 'http.request.method': method, 'http.route': route, 'app.surface': surface, 'app.request_id': requestId },
    })!;
    res.on('close', () => {
      started.span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) markError(started.span, `HTTP ${res.statusCode}`);
      started.span.end();
    });
    runIn(started.context, handle);
  };
  const server = http.createServer((req, res) => {
    front.startTiming(res);
    const requestId = front.requestId(req);
    res.setHeader('X-Request-Id', requestId);
    for (const [k, v] of Object.entries(CORS_HEADERS)) res.setHeader(k, v);
    inFlight++;
    let counted = false;
    let withdraw: (() => void) | undefined;
    const started = performance.now();
    res.on('close', () => {
      inFlight--;
      withdraw?.();
      if (counted) admission.release();
      if (logRequests) log.info({ request_id: requestId, method: req.method, path: req.url?.split('?')[0], status: res.statusCode, ms: Math.round(performance.now() - started), ...notesOf(res) }, 'request');
      metrics.observe(req.method ?? 'GET', path, res.statusCode, (performance.now() - started) / 1000);
      if (inFlight === 0) idleWaiters.splice(0).forEach((w) => w());
    });
    const url = new URL(req.url ?? '/', `http://${header(req, 'host') ?? 'localhost'}`);
    const path = url.pathname;
    const done = (p: Promise<void>) => p.catch((e: unknown) => send(res, front.errorResult(e, requestId)));
    const isGraphql = path === '/graphql';
    const isTwilio = TWILIO_PATH.test(path);
    const isApi = isGraphql || isTwilio || path === '/v1' || path.startsWith('/v1/');
    // Admission: a request past the bound waits briefly for a slot, then is answered 503, instead of
    // queueing without bound for the event loop and the database pool. Streams live long and cost
    // little once open: a request that asks for server-sent events is not counted, a REST stream
    // gives its slot back when it starts (writeStream).
    if (isApi && maxInFlight > 0 && req.method !== 'OPTIONS' && !header(req, 'accept')?.includes('text/event-stream')) {
      withdraw = admission.enter(() => {
        counted = true;
        (res as { [RELEASE_ADMISSION]?: () => void })[RELEASE_ADMISSION] = () => {
          if (counted) admission.release();
          counted = false;
        };
        handle();
      }, () => {
        const se = overloaded();
        send(res, isGraphql
          ? { status: se.status, headers: { 'Content-Type': 'application/json; charset=utf-8', ...se.headers }, body: graphqlErrorBody(se, requestId) }
          : front.errorResult(se, requestId));
      });
      return;
    }
    handle();

    function handle(): void {
      traced(req, res, requestId, () => {
        if (req.method === 'OPTIONS') {
          send(res, { status: 204, headers: PREFLIGHT_HEADERS, body: '' });
        } else if (path === '/healthz') {
          healthz(res);
        } else if (docs(req, res, path) || metrics.handle(req, res, path)) {
          // /v1/openapi.json, /docs, /docs/errors, /metrics: public (metrics: its own token).
        } else if (path === '/readyz') {
          done(readyz(res, { pool: deps.pool, jobs: deps.jobs, draining }));
        } else if (isGraphql) {
          done(graphql.handleGraphql(req, res, url, requestId));
        } else if (PROVIDER_CALLBACK.test(path)) {
          done(rest.handleProviderCallback(req, res, PROVIDER_CALLBACK.exec(path)![1]!, requestId, url));
        } else if (isTwilio) {
          done(twilio.handle(req, res, url, requestId));
        } else if (path === '/v1' || path.startsWith('/v1/')) {
          done(rest.handleRest(req, res, url, requestId));
        } else {
          send(res, front.errorResult(new ServiceError('NOT_FOUND', `Unknown route: ${req.method} ${path}`, { method: req.method, path }), requestId));
        }
      });
    }
  });
  server.requestTimeout = 60_000;
  server.headersTimeout = 20_000;
  // An idle keep-alive connection stays open 65 s, longer than the 60 s idle timeout of common load
  // balancers and than clients keep one: the service never closes a connection as a client starts
  // its next request on it (Node's 5 s default lost that race: the client saw ECONNRESET).
  server.keepAliveTimeout = 65_000;
  // A request Node's parser refuses (a request line and headers past http.maxHeaderSize, malformed
  // framing) never reaches the handler: answer the error envelope, 400 VALIDATION_ERROR as for a body
  // past its limit, and close, instead of Node's bare 431/400 (found by the fuzz harness, issue 43).
  server.on('clientError', (err: NodeJS.ErrnoException, socket: import('node:stream').Duplex) => {
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const overflow = err.code === 'HPE_HEADER_OVERFLOW';
    const e = new ServiceError('VALIDATION_ERROR', overflow ? `The request line and headers are larger than ${http.maxHeaderSize} bytes` : 'The request is not valid HTTP/1.1',
      overflow ? { limit: 'headers', max_bytes: http.maxHeaderSize } : { limit: 'framing' }, { status: 400 });
    const requestId = newId('req', clock.now().getTime());
    const result = front.errorResult(e, requestId);
    const body = Buffer.from(String(result.body));
    const headers = { ...result.headers, ...CORS_HEADERS, 'X-Request-Id': requestId, 'Content-Length': String(body.length), Connection: 'close' };
    socket.end(Buffer.concat([Buffer.from(`HTTP/1.1 400 Bad Request\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`), body]));
  });

  const wss = new WebSocketServer({ server, path: '/graphql' });
  graphql.attachWs(wss);

  return {
    server,
    listen: (port, host) => new Promise((resolve, reject) => {
      server.once('error', reject);
      stopWatching ??= admissionLimit.watch(() => admission.wake());
      server.listen({ port, host, backlog: deps.config.httpListenBacklog }, () => {
        const addr = server.address();
        resolve({ port: typeof addr === 'object' && addr ? addr.port : port });
      });
    }),
    async drain(timeoutMs) {
      draining = true;
      stopWatching?.();
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
