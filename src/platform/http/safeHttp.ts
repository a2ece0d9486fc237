/**
 * The outbound HTTP client for webhook deliveries, built against SSRF. A URL is checked statically
 * when an endpoint is created (checkWebhookUrl) and again at every delivery; the host is then
 * resolved once, every resolved address is vetted, and the socket connects only to the vetted
 * address (a pinned `lookup`), so a DNS answer that changes between check and connect (rebinding)
 * cannot redirect the request. Redirects are never followed, the whole exchange has one deadline,
 * and only a bounded prefix of the response body is kept.
 *
 * Connections are fresh per request unless the caller passes a PinnedAgents pool: then connections
 * are kept alive per (protocol, host name, port, vetted address), so a pooled socket is only ever
 * reused for a request whose own resolution vetted that same address (see PinnedAgents).
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { SafeHttpError, vetUrl, resolveAndVet, type HostLookup, type UrlPolicy, type VettedAddress } from './safeHttp.vetting.ts';
import { injectTraceHeaders, markError, SpanKind, tracingEnabled, withSpan } from '../tracing.ts';

export { isBlockedAddress } from './addresses.ts';
export { checkWebhookUrl, LOOPBACK_HINT, resolveAndVet, SafeHttpError, vetHost, type HostLookup, type HostVerdict, type SafeHttpErrorKind, type UrlPolicy, type VettedAddress } from './safeHttp.vetting.ts';

export type SafeResponse = { status: number; headers: Record<string, string>; body: string; timeMs: number };

export type SafePostOptions = {
  policy: UrlPolicy;
  /** One deadline for DNS, connect, TLS, and reading the response. */
  timeoutMs: number;
  maxResponseBytes?: number;
  lookup?: HostLookup;
  /** Aborting rejects with SafeHttpError('connection') whose `cause` is the signal's reason. */
  signal?: AbortSignal;
  /** Keep-alive connections pinned to vetted addresses; without it every request opens a fresh connection. */
  agents?: PinnedAgents;
  /** The body's Content-Type (default application/json; Twilio-format callbacks are forms). */
  contentType?: string;
};

export const USER_AGENT = 'omnichannel-webhooks/1';
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

/** Headers the client owns: a caller may not smuggle a different Host or framing. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'content-type', 'user-agent', 'expect', 'upgrade']);


/**
 * Keep-alive connection pools for deliveries, one http(s).Agent per (protocol, host name, port,
 * vetted address). Every request still resolves and vets its host first (resolveAndVet) and only
 * then picks the agent for the address it vetted, whose connections are all pinned (`lookup`) to
 * that address: a pooled socket is reused only by a request that vetted the same address again,
 * a DNS change selects another agent (a new connection to the newly vetted address), and a blocked
 * answer is refused before any pool is consulted. Idle sockets close after `idleSocketMs` (or
 * earlier when the server's `Keep-Alive: timeout` says so); the least recently used agents beyond
 * `maxAgents` are destroyed.
 */
export class PinnedAgents {
  readonly #agents = new Map<string, http.Agent>();
  readonly #maxAgents: number;
  readonly #idleSocketMs: number;
  readonly #maxFreeSockets: number;

  constructor(opts: { maxAgents?: number; idleSocketMs?: number; maxFreeSockets?: number } = {}) {
    this.#maxAgents = opts.maxAgents ?? 256;
    this.#idleSocketMs = opts.idleSocketMs ?? 4000;
    this.#maxFreeSockets = opts.maxFreeSockets ?? 64;
  }

  /** The agent for requests to `url` connecting to `vetted` (created on first use). */
  agentFor(url: URL, vetted: VettedAddress): http.Agent {
    const key = `${url.protocol}//${url.hostname}:${url.port}@${vetted.address}`;
    let agent = this.#agents.get(key);
    if (agent) {
      // Most recently used last, so eviction takes the least recently used first.
      this.#agents.delete(key);
    } else {
      const lookup = pinnedLookup(vetted);
      const options = { keepAlive: true, timeout: this.#idleSocketMs, maxFreeSockets: this.#maxFreeSockets, scheduling: 'lifo' as const, lookup };
      agent = url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
    }
    this.#agents.set(key, agent);
    while (this.#agents.size > this.#maxAgents) {
      const [oldest, old] = this.#agents.entries().next().value!;
      this.#agents.delete(oldest);
      old.destroy();
    }
    return agent;
  }

  /** Open sockets across all agents (in use and idle), for tests and diagnostics. */
  get socketCount(): number {
    let n = 0;
    for (const agent of this.#agents.values()) {
      for (const list of Object.values(agent.sockets)) n += list?.length ?? 0;
      for (const list of Object.values(agent.freeSockets)) n += list?.length ?? 0;
    }
    return n;
  }

  /** Closes every pooled connection (requests in flight are aborted); the pool stays usable. */
  destroy(): void {
    for (const agent of this.#agents.values()) agent.destroy();
    this.#agents.clear();
  }
}

/** A `lookup` that answers only `vetted`, whatever host name it is asked about. */
function pinnedLookup(vetted: VettedAddress): net.LookupFunction {
  return (_host, options, callback) => {
    // Node asks for all addresses when it races IPv4/IPv6 (autoSelectFamily); answer both ways.
    if (options.all) callback(null, [{ address: vetted.address, family: vetted.family }]);
    else callback(null, vetted.address, vetted.family);
  };
}

function flattenHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function outgoingHeaders(headers: Record<string, string>, body: string | null, contentType = 'application/json'): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const key = name.toLowerCase();
    if (!RESERVED_HEADERS.has(key)) out[key] = value;
  }
  if (body !== null) out['content-type'] = contentType;
  out['user-agent'] = USER_AGENT;
  if (body !== null) out['content-length'] = String(Buffer.byteLength(body));
  return out;
}

function transportError(e: unknown): SafeHttpError {
  if (e instanceof SafeHttpError) return e;
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const message = e instanceof Error ? e.message : String(e);
  if (code === 'HPE_HEADER_OVERFLOW') return new SafeHttpError('too_large', 'response headers are too large', { cause: e });
  if (code === 'ETIMEDOUT') return new SafeHttpError('timeout', message, { cause: e });
  return new SafeHttpError('connection', code ? `${code}: ${message}` : message, { cause: e });
}

type Exchange = {
  /** Default POST. */
  method?: string;
  /** null: no body (GET, DELETE without one). */
  body: string | null;
  headers: Record<string, string>;
  timeoutMs: number;
  maxResponseBytes: number;
  signal: AbortSignal | undefined;
  agents: PinnedAgents | undefined;
  contentType?: string | undefined;
};

/** A pooled socket the server closed while idle fails like this before any response byte. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/**
 * One POST under one deadline: `target()` supplies the address to connect to, then the request is
 * sent with a `lookup` pinned to that address while Host and SNI keep the URL's host name.
 */
function exchange(url: URL, target: () => Promise<VettedAddress>, x: Exchange): Promise<SafeResponse> {
  const started = performance.now();
  return new Promise<SafeResponse>((resolve, reject) => {
    let settled = false;
    let request: http.ClientRequest | undefined;
    const onAbort = (): void => fail(new SafeHttpError('connection', 'request aborted', { cause: x.signal?.reason }));
    const timer = setTimeout(() => fail(new SafeHttpError('timeout', `no complete response within ${x.timeoutMs} ms`)), x.timeoutMs);
    function settle(outcome: () => void): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      x.signal?.removeEventListener('abort', onAbort);
      outcome();
    }
    function fail(error: SafeHttpError): void {
      settle(() => {
        request?.destroy();
        reject(error);
      });
    }
    if (x.signal?.aborted) return onAbort();
    x.signal?.addEventListener('abort', onAbort, { once: true });

    const send = (vetted: VettedAddress, pooled: boolean): void => {
      if (settled) return;
      const secure = url.protocol === 'https:';
      const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
      const options: https.RequestOptions = {
        method: x.method ?? 'POST',
        protocol: url.protocol,
        hostname,
        port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
        path: `${url.pathname}${url.search}`,
        headers: outgoingHeaders(x.headers, x.body, x.contentType),
        lookup: pinnedLookup(vetted),
        // Without a pool, a fresh agent per request: no socket outlives the address it was vetted for.
        // With one, the agent of exactly this vetted address (its sockets are pinned to it as well).
        agent: pooled && x.agents ? x.agents.agentFor(url, vetted) : false,
        ...(secure && net.isIP(hostname) === 0 ? { servername: hostname } : {}),
      };
      let responded = false;
      const req = (secure ? https : http).request(options, (res) => {
        responded = true;
        const chunks: Buffer[] = [];
        let size = 0;
        const done = (): void =>
          settle(() => resolve({
            status: res.statusCode ?? 0,
            headers: flattenHeaders(res.headers),
            body: Buffer.concat(chunks).toString('utf8'),
            timeMs: performance.now() - started,
          }));
        res.on('data', (chunk: Buffer) => {
          if (settled) return;
          if (size + chunk.length > x.maxResponseBytes) {
            // Enough to log: keep the prefix, answer, and drop the connection instead of reading on.
            chunks.push(chunk.subarray(0, x.maxResponseBytes - size));
            done();
            res.destroy();
            return;
          }
          chunks.push(chunk);
          size += chunk.length;
        });
        res.on('end', done);
        res.on('error', (e) => fail(transportError(e)));
        res.on('close', () => {
          if (!res.complete) fail(new SafeHttpError('connection', 'response ended before it was complete'));
        });
      });
      request = req;
      req.on('error', (e) => {
        // A kept-alive socket the server closed while it sat idle: once, on a fresh connection.
        const code = (e as NodeJS.ErrnoException).code;
        if (!settled && !responded && req.reusedSocket && code !== undefined && STALE_SOCKET_CODES.has(code)) {
          send(vetted, false);
          return;
        }
        fail(transportError(e));
      });
      req.end(x.body ?? undefined);
    };
    target().then((vetted) => send(vetted, true)).catch((e: unknown) => fail(transportError(e)));
  });
}

/**
 * With tracing on, the POST runs in a CLIENT span (host and port, status: never the path, query or
 * body) whose context is sent as the W3C `traceparent` header.
 */
function tracedExchange(url: URL, headers: Record<string, string>, run: (headers: Record<string, string>) => Promise<SafeResponse>, method = 'POST'): Promise<SafeResponse> {
  if (!tracingEnabled()) return run(headers);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return withSpan(method, {
    kind: SpanKind.CLIENT,
    attributes: { 'http.request.method': method, 'server.address': host, 'server.port': url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port) },
  }, async (span) => {
    const traced = { ...headers };
    injectTraceHeaders(traced);
    const r = await run(traced);
    span?.setAttribute('http.response.status_code', r.status);
    if (r.status >= 400) markError(span, `HTTP ${r.status}`);
    return r;
  });
}

/**
 * POSTs `body` (JSON) to an already vetted address, keeping `url`'s host for Host and SNI. Callers
 * use safePost; this is the transport underneath it, and `target` MUST come from resolveAndVet.
 */
export function postToVettedAddress(
  url: URL,
  target: VettedAddress,
  body: string,
  headers: Record<string, string>,
  opts: { timeoutMs: number; maxResponseBytes?: number; signal?: AbortSignal; agents?: PinnedAgents },
): Promise<SafeResponse> {
  return tracedExchange(url, headers, (traced) => exchange(url, () => Promise.resolve(target), {
    body,
    headers: traced,
    timeoutMs: opts.timeoutMs,
    maxResponseBytes: opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    signal: opts.signal,
    agents: opts.agents,
  }));
}

/**
 * Delivers one webhook POST. Throws SafeHttpError for a refused URL or address, a timeout or a
 * connection failure; any HTTP status (3xx included, never followed) is returned as a response.
 */
export async function safePost(url: string, body: string, headers: Record<string, string>, opts: SafePostOptions): Promise<SafeResponse> {
  return safeRequest('POST', url, body, headers, opts);
}

/** The same guarantees for any method (flows' http_request); `body` null sends none (and no Content-Type). */
export async function safeRequest(method: string, url: string, body: string | null, headers: Record<string, string>, opts: SafePostOptions): Promise<SafeResponse> {
  const verdict = vetUrl(url, opts.policy);
  if (!verdict.ok) throw new SafeHttpError(verdict.kind, verdict.reason);
  const parsed = verdict.url;
  return tracedExchange(parsed, headers, (traced) => exchange(parsed, () => resolveAndVet(parsed.hostname, opts.policy, opts.lookup), {
    method,
    body,
    headers: traced,
    timeoutMs: opts.timeoutMs,
    maxResponseBytes: opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    signal: opts.signal,
    agents: opts.agents,
    contentType: opts.contentType,
  }), method);
}
