/**
 * The front door both API surfaces pass: request id (a well-formed incoming `X-Request-Id` is kept
 * and echoed), CORS, the client address, authentication (API key or bearer token, then the
 * organization's IP allowlist), request bodies with their size limit, JSON parsing, and
 * Idempotency-Key handling. Rate-limit admission is per surface (REST: rest.ts; GraphQL:
 * graphql/rateLimits.ts), both on the same limiter.
 */
import type http from 'node:http';
import type { Config } from '../config.ts';
import type { Clock } from '../platform/clock.ts';
import type { Logger } from '../platform/logger.ts';
import type { Authenticator } from '../platform/auth/authenticate.ts';
import { buildBlockList, clientIp } from '../platform/auth/ip.ts';
import type { Scope } from '../platform/auth/scope.ts';
import { badRequest, isServiceError, ServiceError, toServiceError } from '../platform/errors.ts';
import { jsonNestsDeeper, tooDeep } from '../platform/nesting.ts';
import { newId } from '../platform/ids.ts';
import { parsePhiReason, PHI_REASON_HEADER } from '../platform/phi.ts';
import { IdempotencyClaim, requestHash, validateIdempotencyKey, type IdempotencyStore } from '../platform/idempotency.ts';
import { errorResult, type HttpResult } from '../rest/envelope.ts';
import { annotate, currentTraceparent, tracingEnabled } from '../platform/tracing.ts';

export const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/** CORS on every response: any origin may call (credentials are API keys and bearer tokens, never cookies). */
export const CORS_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Expose-Headers': 'X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, Idempotent-Replayed',
};
/** Read by browsers only on a preflight (OPTIONS) answer, so only sent there. */
export const PREFLIGHT_HEADERS = {
  'Access-Control-Allow-Methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': 'Authorization, Content-Type, X-API-Key, Idempotency-Key, X-Request-Id, X-PHI-Reason',
  'Access-Control-Max-Age': '600',
};

/** An incoming request id we keep: 8-128 visible characters without spaces or quotes. */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{8,128}$/;

export function header(req: http.IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Stage timings of a request when SERVER_TIMING is on (see {@link FrontDoor.startTiming}). */
const TIMING = Symbol('serverTiming');
type Timing = { last: number; start: number; parts: string[] };

/** Ends the current stage of the request's timing (no-op when timing is off). */
export function mark(res: http.ServerResponse, stage: string): void {
  const t = (res as { [TIMING]?: Timing })[TIMING];
  if (!t) return;
  const now = performance.now();
  t.parts.push(`${stage};dur=${(now - t.last).toFixed(3)}`);
  t.last = now;
}

/** Records a stage that ran alongside others (from `since` to now) without ending the current one. */
export function span(res: http.ServerResponse, stage: string, since: number): void {
  const t = (res as { [TIMING]?: Timing })[TIMING];
  if (t) t.parts.push(`${stage};dur=${(performance.now() - since).toFixed(3)}`);
}

const LOG_NOTES = Symbol('log notes');
/** What the request log line says of a request besides method, path and status. */
export type LogNotes = { operation?: string; code?: string };

/** Adds to what the request log line of `res` says (the operation that served it, the error code). */
export function note(res: http.ServerResponse, notes: LogNotes): void {
  const r = res as { [LOG_NOTES]?: LogNotes };
  r[LOG_NOTES] = { ...r[LOG_NOTES], ...notes };
}
export const notesOf = (res: http.ServerResponse): LogNotes | undefined => (res as { [LOG_NOTES]?: LogNotes })[LOG_NOTES];

export function send(res: http.ServerResponse, result: HttpResult): void {
  if (res.headersSent) return;
  if (result.code) note(res, { code: result.code });
  const t = (res as { [TIMING]?: Timing })[TIMING];
  if (t) res.setHeader('Server-Timing', [...t.parts, `total;dur=${(performance.now() - t.start).toFixed(3)}`].join(', '));
  res.writeHead(result.status, result.headers);
  res.end(result.body);
}

/**
 * The request body as text, refused over `limit` bytes (declared or streamed). Read with plain
 * 'data'/'end' listeners: an async iterator over the request costs several times more per request.
 * Past the limit the rest is not read; the 400 closes the connection (`Connection: close`).
 */
export function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  return readBodyBytes(req, limit).then((b) => b.toString('utf8'));
}

/** {@link readBody} as bytes (multipart uploads). */
export function readBodyBytes(req: http.IncomingMessage, limit: number): Promise<Buffer> {
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
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
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

/** A multipart/form-data body: text fields as strings, files as `{ filename, type, bytes }`. */
export async function parseMultipart(bytes: Buffer, contentType: string): Promise<Record<string, unknown>> {
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(bytes), { headers: { 'content-type': contentType } }).formData();
  } catch {
    throw badRequest('Request body is not valid multipart/form-data');
  }
  const out: Record<string, unknown> = {};
  for (const [name, value] of form) {
    out[name] = typeof value === 'string' ? value : { filename: value.name, type: value.type, bytes: new Uint8Array(await value.arrayBuffer()) };
  }
  return out;
}

/** Set by the server on an admitted request: gives its in-flight slot back (see HTTP_MAX_IN_FLIGHT). */
export const RELEASE_ADMISSION = Symbol('releaseAdmission');

/**
 * Writes a streamed answer; the client going away ends the iterator (its `return()`). A stream
 * lives long and costs little once open: its admission slot is given back when it starts.
 */
export async function writeStream(res: http.ServerResponse, result: HttpResult & { chunks: AsyncIterable<string> }): Promise<void> {
  const t = (res as { [TIMING]?: Timing })[TIMING];
  // Streamed answers report the stages before the stream starts (the checks a stream passes first).
  if (t) res.setHeader('Server-Timing', [...t.parts, `headers;dur=${(performance.now() - t.start).toFixed(3)}`].join(', '));
  res.writeHead(result.status, result.headers);
  res.flushHeaders();
  (res as { [RELEASE_ADMISSION]?: () => void })[RELEASE_ADMISSION]?.();
  const it = result.chunks[Symbol.asyncIterator]();
  let closed = false;
  res.on('close', () => {
    if (res.writableFinished) return;
    closed = true;
    void it.return?.();
  });
  try {
    for (let n = await it.next(); !n.done && !closed; n = await it.next()) {
      if (!res.write(n.value)) await new Promise((resolve) => res.once('drain', resolve));
    }
  } finally {
    if (!closed) res.end();
  }
}

export function parseJsonObject(text: string, contentType: string | undefined): Record<string, unknown> {
  if (text.trim() === '') return {};
  if (contentType && !/^application\/(.+\+)?json\b/i.test(contentType)) {
    throw badRequest(`Content-Type must be application/json, got ${contentType}`, { field: 'Content-Type' });
  }
  if (jsonNestsDeeper(text)) throw tooDeep('Request body');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badRequest('Request body is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw badRequest('Request body must be a JSON object');
  return parsed as Record<string, unknown>;
}

export type FrontDoorDeps = { config: Config; clock: Clock; log: Logger; authenticator: Authenticator; idempotency: IdempotencyStore };

export class FrontDoor {
  readonly #deps: FrontDoorDeps;
  readonly #trusted: ReturnType<typeof buildBlockList>;
  readonly #hasTrusted: boolean;

  constructor(deps: FrontDoorDeps) {
    this.#deps = deps;
    this.#trusted = buildBlockList(deps.config.trustedProxies);
    this.#hasTrusted = deps.config.trustedProxies.length > 0;
  }

  /** Starts the request's stage timing when SERVER_TIMING is on (stages end with {@link mark}). */
  startTiming(res: http.ServerResponse): void {
    if (!this.#deps.config.serverTiming) return;
    const now = performance.now();
    (res as { [TIMING]?: Timing })[TIMING] = { start: now, last: now, parts: [] };
  }

  /** The caller's request id when well-formed, else a new one. */
  requestId(req: http.IncomingMessage): string {
    const given = header(req, 'x-request-id');
    return given !== undefined && CLIENT_REQUEST_ID.test(given) ? given : newId('req', this.#deps.clock.now().getTime());
  }

  /** The client's address: the peer, or `X-Forwarded-For` when the peer is a trusted proxy. */
  clientIp(req: http.IncomingMessage): string | undefined {
    return clientIp(req.socket.remoteAddress, header(req, 'x-forwarded-for'), this.#trusted, this.#hasTrusted);
  }

  /**
   * Authenticates the request's API key or bearer token (401/403/404 as ServiceErrors), with a
   * developer's PHI reason code (HIPAA mode; platform/phi.ts). With tracing on, the request span
   * gets the organization and mode, and the scope the span's context.
   */
  async authenticate(req: http.IncomingMessage, requestId: string, params: { apiKey?: string; authorization?: string; phiReason?: unknown } = {}): Promise<Scope> {
    let scope = await this.#deps.authenticator.authenticate({
      apiKey: params.apiKey ?? header(req, 'x-api-key'),
      authorization: params.authorization ?? header(req, 'authorization'),
      ip: this.clientIp(req),
      requestId,
    });
    const phiReason = parsePhiReason(params.phiReason ?? header(req, 'x-phi-reason'), PHI_REASON_HEADER);
    if (phiReason) scope = { ...scope, phiReason };
    if (!tracingEnabled()) return scope;
    annotate({ 'app.organization_id': scope.organizationId, 'app.mode': scope.mode });
    const traceparent = currentTraceparent();
    return traceparent ? { ...scope, traceparent } : scope;
  }

  /** The request body as text (POST, PUT, PATCH), refused over MAX_BODY_BYTES. */
  body(req: http.IncomingMessage): Promise<string> {
    return readBody(req, this.#deps.config.maxBodyBytes);
  }

  /** A multipart upload's bytes, refused over MAX_UPLOAD_BYTES. */
  upload(req: http.IncomingMessage): Promise<Buffer> {
    return readBodyBytes(req, this.#deps.config.maxUploadBytes);
  }

  /** An error as the REST envelope (unexpected errors are logged and answered without detail). */
  errorResult(e: unknown, requestId: string): HttpResult {
    if (!isServiceError(e)) this.#deps.log.error({ err: e, request_id: requestId }, 'unexpected error');
    return errorResult(toServiceError(e), requestId, this.#deps.clock.now(), this.#deps.config.docsBaseUrl);
  }

  /**
   * Runs `produce` once per Idempotency-Key (per tenant): a repeat replays the stored response.
   * `produce` gets the claim to hand to the request's operations (RequestContext.idempotency).
   */
  async withIdempotency(req: http.IncomingMessage, scope: Scope, method: string, path: string, body: string, produce: (claim?: IdempotencyClaim) => Promise<HttpResult>): Promise<HttpResult> {
    const raw = header(req, 'idempotency-key');
    if (raw === undefined) return produce();
    const key = validateIdempotencyKey(raw);
    const hash = requestHash(method, path, body);
    const begun = await this.#deps.idempotency.begin(scope, key, hash);
    if (begun.kind === 'replay') {
      return { status: begun.status, headers: { ...begun.headers, 'Idempotent-Replayed': 'true' }, body: begun.body };
    }
    let result: HttpResult;
    try {
      result = await produce(new IdempotencyClaim(key, hash, begun.resumed));
    } catch (e) {
      await this.#deps.idempotency.abandon(scope, key);
      throw e;
    }
    // A stream cannot be replayed: the key is released (a retry runs again).
    if (result.chunks) {
      await this.#deps.idempotency.abandon(scope, key);
      return result;
    }
    const stored = Object.fromEntries(Object.entries(result.headers).filter(([k]) => !k.toLowerCase().startsWith('x-ratelimit')));
    await this.#deps.idempotency.complete(scope, key, { status: result.status, headers: stored, body: result.body.toString() });
    return result;
  }

}
