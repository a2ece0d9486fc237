/**
 * The GraphQL mount: `/graphql` over HTTP (JSON and SSE, through the front door) and graphql-ws on
 * the same path (authenticated once at `connection_init`). Rate limits: graphql/rateLimits.ts.
 */
import { graphiqlAnswer } from './graphiqlPage.ts';
import type http from 'node:http';
import { getOperationAST, GraphQLError, parse } from 'graphql';
import { processRegularResult, type YogaServerInstance } from 'graphql-yoga';
import { useServer } from 'graphql-ws/use/ws';
import type { WebSocketServer } from 'ws';
import type { RequestContext } from '../context.ts';
import { parsePhiReason } from '../platform/phi.ts';
import type { Scope } from '../platform/auth/scope.ts';
import { badRequest, isServiceError, toServiceError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import type { IdempotencyClaim } from '../platform/idempotency.ts';
import type { HttpResult } from '../rest/envelope.ts';
import { graphqlErrorBody } from '../graphql/errors.ts';
import { answersIncrementally, wholeAnswer } from '../graphql/incremental.ts';
import { persistedId } from '../graphql/persisted.ts';
import { MAX_RESPONSE_BYTES } from '../graphql/complexity.ts';
import { jsonNestsDeeper, tooDeep } from '../platform/nesting.ts';
import type { GraphqlRateLimits, LiveContext } from '../graphql/rateLimits.ts';
import { header, mark, note, send, type FrontDoor } from './frontDoor.ts';
import { activeSpan } from '../platform/tracing.ts';

export type GraphqlMountDeps = {
  front: FrontDoor;
  yoga: YogaServerInstance<{ requestContext: RequestContext }, RequestContext>;
  rateLimits: GraphqlRateLimits;
  contextFor(scope: Scope): RequestContext;
  log: { error(obj: object, msg: string): void };
  /** The text of a persisted document (graphql/persisted.ts), so a mutation sent by id gets Idempotency-Key replay too. */
  persistedDocument?(organizationId: string, id: string): Promise<string | undefined>;
};

export function graphqlMount(deps: GraphqlMountDeps) {
  const { front, yoga, rateLimits, log } = deps;

  async function handleGraphql(req: http.IncomingMessage, res: http.ServerResponse, url: URL, requestId: string): Promise<void> {
    const method = req.method ?? 'GET';
    const accept = header(req, 'accept') ?? '';
    const isGraphiql = method === 'GET' && accept.includes('text/html') && !url.searchParams.has('query');
    let ctx: LiveContext | undefined;
    let bodyText = '';
    let params: GraphqlParams | undefined;
    let persistedText: string | undefined;
    try {
      if (!isGraphiql) {
        ctx = deps.contextFor(await front.authenticate(req, requestId));
        mark(res, 'auth');
      }
      // Variables and extensions nest as deep as the client likes: bounded before anything parses them.
      for (const name of ['variables', 'extensions']) {
        const v = url.searchParams.get(name);
        if (v && jsonNestsDeeper(v)) throw tooDeep(`The ${name} parameter`);
      }
      if (method === 'POST') {
        bodyText = await front.body(req);
        if (jsonNestsDeeper(bodyText)) throw tooDeep('Request body');
        params = graphqlParams(bodyText);
        if (params) nameSpan(params);
        note(res, { operation: params?.operationName ? `graphql ${params.operationName}` : 'graphql' });
        // A developer's PHI reason code may also come as the request's `extensions.phiReason`.
        const reason = parsePhiReason(params?.extensions?.phiReason, 'extensions.phiReason');
        if (ctx && reason) ctx = deps.contextFor({ ...ctx.scope, phiReason: reason });
        mark(res, 'body');
      }
      // A persisted document is admitted by its text like a sent one (its first limited root field's
      // window taken with the burst slot, not counted again during execution).
      if (ctx && params && params.query === undefined) persistedText = await persistedTextOf(ctx, params);
      if (ctx) await rateLimits.admit(ctx, params?.query ?? persistedText, params?.operationName);
      mark(res, 'limit');
    } catch (e) {
      const se = toServiceError(e);
      if (!isServiceError(e)) log.error({ err: e, request_id: requestId }, 'unexpected error');
      send(res, { status: se.status, headers: { 'Content-Type': 'application/json; charset=utf-8', ...se.headers }, body: graphqlErrorBody(se, requestId), code: se.code });
      return;
    }
    const untrack = ctx ? rateLimits.track(ctx) : () => {};
    let streaming = false;
    try {
      // A plain record: Yoga builds its own Request from it (a Node Headers object here would be converted).
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      // The response cache's conditional requests (an ETag is a cache key, looked up before any
      // session is known) are not offered: graphql/responseCache.ts.
      delete headers['if-none-match'];
      type Streamed = { stream: Response };
      // The answer with its cost in `extensions`, as it is stored for an idempotent replay (which
      // answers the original byte for byte).
      const costed = (result: HttpResult & { [NO_EXTENSIONS]?: true }): HttpResult => {
        if (!ctx || isGraphiql) return result;
        const body = withCostExtensions(result, rateLimits.answerExtensions(ctx));
        if (body === result.body) return result;
        // The length Yoga computed is the old body's.
        return { ...result, body, headers: Object.fromEntries(Object.entries(result.headers).filter(([k]) => k.toLowerCase() !== 'content-length')) };
      };
      const produce = async (claim?: IdempotencyClaim): Promise<HttpResult | Streamed> => {
        if (claim && ctx) ctx.idempotency = claim;
        const direct = ctx && params ? await directGraphql(ctx, url, headers, params) : undefined;
        if (direct) return costed(direct);
        const response = await yoga.fetch(url.toString(), { method, headers, body: method === 'POST' ? bodyText : undefined }, { requestContext: ctx! });
        const out: Record<string, string> = {};
        response.headers.forEach((v, k) => { out[k] = v; });
        if (STREAMED.test(response.headers.get('content-type') ?? '')) {
          if (!claim) return { stream: response };
          // An idempotent mutation's answer is kept for its replay, which answers it byte for byte:
          // its parts are read whole (a mutation's deferred parts follow its own writes).
          return { status: response.status, headers: Object.fromEntries(Object.entries(out).filter(([k]) => !HOP_HEADERS.has(k))), body: await response.text() };
        }
        return costed({ status: response.status, headers: out, body: await response.text() });
      };
      let result: HttpResult | Streamed;
      if (ctx && method === 'POST' && header(req, 'idempotency-key') !== undefined && (isMutation(params) || (persistedText !== undefined && isMutation({ query: persistedText, operationName: params?.operationName })))) {
        // An invalid or conflicting Idempotency-Key is the client's error (400/409), not an unhandled 500.
        result = await front.withIdempotency(req, ctx.scope, 'POST', '/graphql', bodyText, produce as (claim?: IdempotencyClaim) => Promise<HttpResult>).catch((e: unknown) => {
          if (!isServiceError(e)) throw e;
          return { status: e.status, headers: { 'Content-Type': 'application/json; charset=utf-8', ...e.headers }, body: graphqlErrorBody(e, requestId), code: e.code };
        });
      } else {
        result = await produce();
      }
      mark(res, 'op');
      // GraphiQL's page (its assets inlined) is no answer of an operation.
      if (!isGraphiql && !('stream' in result) && overResponseLimit(result.body) && !isMutation(params)) {
        const e = badRequest(`The answer is larger than ${MAX_RESPONSE_BYTES} bytes: select fewer fields or smaller pages`, { limit: 'response_bytes', max: MAX_RESPONSE_BYTES });
        result = { status: e.status, headers: { 'Content-Type': 'application/json; charset=utf-8' }, body: graphqlErrorBody(e, requestId) };
      }
      const rateHeaders = ctx ? await rateLimits.settle(ctx) : {};
      if ('stream' in result) {
        streaming = true;
        const out: Record<string, string> = { ...rateHeaders };
        result.stream.headers.forEach((v, k) => { out[k] = v; });
        res.writeHead(result.stream.status, out);
        // Yoga's body is a ponyfilled ReadableStream: pump it by hand, flushing each event.
        const reader = (result.stream.body as ReadableStream<Uint8Array>).getReader();
        res.on('close', () => { void reader.cancel().catch(() => {}); untrack(); });
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
      if (isGraphiql) {
        send(res, await graphiqlAnswer(req, result));
        return;
      }
      send(res, { ...result, headers: { ...result.headers, ...rateHeaders }, code: result.code ?? firstErrorCode(result.body) });
    } finally {
      if (!streaming) untrack();
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
  async function directGraphql(ctx: RequestContext, url: URL, headers: Record<string, string>, params: GraphqlParams): Promise<(HttpResult & { [NO_EXTENSIONS]?: true }) | undefined> {
    const contentType = (headers['content-type'] ?? '').replace(/\s/g, '').toLowerCase();
    const accept = (headers.accept ?? '*/*').replace(/\s/g, '').toLowerCase();
    if (contentType !== 'application/json' && contentType !== 'application/json;charset=utf-8') return undefined;
    if (accept !== 'application/json' && accept !== 'application/json;charset=utf-8' && accept !== '*/*') return undefined;
    if (params.query !== undefined && /\bsubscription\b/.test(params.query)) return undefined;
    const request = new yoga.fetchAPI.Request(url.toString(), { method: 'POST', headers });
    let result: unknown;
    try {
      result = await yoga.getResultForParams({ params, request }, { requestContext: ctx, request } as never);
    } catch (e) {
      // Only a request-validation hook throws here (nothing ran): answer it as Yoga would, never re-run.
      if (!(e instanceof GraphQLError)) throw e;
      result = { errors: [e] };
    }
    if (result && typeof result === 'object' && Symbol.asyncIterator in result) {
      if (answersIncrementally(ctx)) {
        // @defer or @stream asked for one JSON answer: every part, merged into one.
        result = await wholeAnswer(result as AsyncIterable<never>);
      } else {
        // A subscription the text did not show (a persisted document named by its id) asked for one
        // JSON answer: the client's error, as Yoga answers a subscription over plain JSON.
        await (result as AsyncGenerator).return?.(undefined);
        result = { errors: [new GraphQLError('A subscription streams its answers: send it with Accept: text/event-stream (SSE) or over graphql-ws', { extensions: { code: 'VALIDATION_ERROR', status: 400, details: { field: 'Accept' } } })] };
      }
    }
    if (!result || typeof result !== 'object') throw new Error('unexpected GraphQL result on the direct path');
    const plain = result as { errors?: readonly unknown[]; extensions?: Record<string, unknown> };
    if (!plain.errors?.length && !plain.extensions) {
      return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(result), [NO_EXTENSIONS]: true };
    }
    const response = await processRegularResult(result as never, yoga.fetchAPI, 'application/json');
    const out: Record<string, string> = {};
    response.headers.forEach((v, k) => { out[k] = v; });
    return { status: response.status, headers: out, body: await response.text() };
  }

  /** The text of the persisted document a request names (documentId or APQ hash, no text), when this organization holds it. */
  async function persistedTextOf(ctx: RequestContext, params: GraphqlParams): Promise<string | undefined> {
    const id = persistedId(params);
    return id === undefined || !deps.persistedDocument ? undefined : deps.persistedDocument(ctx.scope.organizationId, id);
  }

  return { handleGraphql, attachWs: (wss: WebSocketServer) => attachGraphqlWs(wss, deps) };
}

/**
 * With tracing on, the request span is named by its GraphQL operation (`mutation SendSms`), read
 * from the document's first definition (or the requested operationName): never variables.
 */
function nameSpan(params: GraphqlParams): void {
  const span = activeSpan();
  if (!span) return;
  const m = /^\s*(?:#[^\n]*\n\s*)*(query|mutation|subscription)?\s*([_A-Za-z][_0-9A-Za-z]*)?/.exec(params.query ?? '');
  const type = m?.[1] ?? 'query';
  const name = params.operationName ?? m?.[2];
  span.updateName(name ? `${type} ${name}` : type);
  span.setAttributes({ 'graphql.operation.type': type, ...(name ? { 'graphql.operation.name': name } : {}) });
}

type GraphqlParams = { query?: string; documentId?: string; variables?: Record<string, unknown>; operationName?: string; extensions?: Record<string, unknown> };

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
  if (Object.keys(parsed).some((k) => k !== 'query' && k !== 'variables' && k !== 'operationName' && k !== 'extensions' && k !== 'documentId')) return undefined;
  const { query, variables, operationName, extensions, documentId } = parsed as Record<string, unknown>;
  const isObject = (v: unknown) => v == null || (typeof v === 'object' && !Array.isArray(v));
  if (!isObject(variables) || !isObject(extensions) || (operationName != null && typeof operationName !== 'string')) return undefined;
  // A persisted operation (graphql/persisted.ts) names its document: Yoga's onParams resolves it.
  if (typeof query !== 'string') {
    if (query != null || (typeof documentId !== 'string' && !(extensions as { persistedQuery?: unknown } | undefined)?.persistedQuery)) return undefined;
  } else if (documentId != null) {
    return undefined;
  }
  return {
    ...(typeof query === 'string' ? { query } : {}),
    ...(typeof documentId === 'string' ? { documentId } : {}),
    ...(variables != null ? { variables: variables as Record<string, unknown> } : {}),
    ...(operationName != null ? { operationName: operationName as string } : {}),
    ...(extensions != null ? { extensions: extensions as Record<string, unknown> } : {}),
  };
}

/** Answers Yoga streams (SSE, and multipart/mixed for incremental delivery): pumped to the client as they come. */
const STREAMED = /text\/event-stream|multipart\/mixed/i;
/** Headers of a streamed response that a whole (replayed) body must not repeat. */
const HOP_HEADERS = new Set(['connection', 'transfer-encoding', 'content-length']);

/** Marks a direct-path answer serialized from a result without `extensions` (they can be appended to the text). */
const NO_EXTENSIONS = Symbol('graphql.noExtensions');

/**
 * The answer with what the operation cost and what is left of the caller's budget in `extensions`
 * (GraphqlRateLimits.answerExtensions). The common answer (no errors, no extensions) gets them
 * appended to its text; any other JSON answer is parsed and written again; a non-JSON body is left
 * as it is. Streamed answers (incremental delivery) carry them in their first payload instead
 * (graphql/yoga.ts, incrementalExtensions).
 */
function withCostExtensions(result: HttpResult & { [NO_EXTENSIONS]?: true }, extensions: Record<string, unknown>): HttpResult['body'] {
  if (!Object.keys(extensions).length || typeof result.body !== 'string') return result.body;
  if (result[NO_EXTENSIONS] && result.body.endsWith('}')) return `${result.body.slice(0, -1)},"extensions":${JSON.stringify(extensions)}}`;
  const type = Object.entries(result.headers).find(([k]) => k.toLowerCase() === 'content-type')?.[1] ?? '';
  if (!/json/i.test(type)) return result.body;
  try {
    const parsed = JSON.parse(result.body) as unknown;
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return result.body;
    const answer = parsed as { extensions?: Record<string, unknown> };
    return JSON.stringify({ ...answer, extensions: { ...answer.extensions, ...extensions } });
  } catch {
    return result.body;
  }
}

/**
 * Whether an answer is over MAX_RESPONSE_BYTES. A string's UTF-8 length is at most three bytes per
 * UTF-16 unit, so only a long answer is measured.
 */
export function overResponseLimit(body: string | Buffer, max = MAX_RESPONSE_BYTES): boolean {
  if (typeof body !== 'string') return body.length > max;
  return body.length * 3 > max && Buffer.byteLength(body) > max;
}

function isMutation(params: GraphqlParams | undefined): boolean {
  if (!params?.query) return false;
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
function attachGraphqlWs(wss: WebSocketServer, deps: GraphqlMountDeps): void {
  useServer<Record<string, unknown>, { scope?: Scope }>({
    onConnect: async (ctx) => {
      const params = ctx.connectionParams ?? {};
      const req = ctx.extra.request;
      const pick = (k: string) => (typeof params[k] === 'string' ? (params[k] as string) : undefined);
      try {
        ctx.extra.scope = await deps.front.authenticate(req, newId('req'), {
          apiKey: pick('apiKey') ?? pick('x-api-key') ?? pick('X-API-Key'),
          authorization: pick('authorization') ?? pick('Authorization'),
          phiReason: pick('phiReason') ?? pick('x-phi-reason') ?? pick('X-PHI-Reason'),
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
      // Persisted operations are an HTTP feature (graphql/persisted.ts): an organization that
      // accepts only trusted documents takes no document text over graphql-ws either.
      if (scope.graphqlTrustedOnly) {
        return [new GraphQLError('This organization accepts only trusted documents, which graphql-ws does not carry: use HTTP (SSE) with a documentId', { extensions: { code: 'PERSISTED_QUERY_REQUIRED', status: 400, details: {} } })];
      }
      const requestContext = deps.contextFor(scope);
      // Visible to the rate limiter while the operation starts (subscriptions count at subscribe time).
      const untrack = deps.rateLimits.track(requestContext);
      setTimeout(untrack, 60_000).unref();
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

/** The first `extensions.code` of a GraphQL answer that carries errors (for the request log). */
function firstErrorCode(body: string | Buffer): string | undefined {
  if (typeof body !== 'string' || !body.includes('"errors"')) return undefined;
  return /"code":"([A-Z][A-Z0-9_]*)"/.exec(body)?.[1];
}
