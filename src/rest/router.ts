/**
 * The REST layer: matches `/v1` paths to route declarations, reads query and body, runs the
 * route's operation through the same `invoke` as GraphQL and renders the envelope.
 */
import type { RequestContext } from '../context.ts';
import { badRequest, ServiceError } from '../platform/errors.ts';
import { closest } from '../platform/suggest.ts';
import { problemsIn, validationError, type UnknownField } from '../platform/validation.ts';
import { invoke } from '../platform/operations.ts';
import type { Page } from '../platform/pagination.ts';
import { snake } from '../platform/naming.ts';
import { successBody, type HttpResult } from './envelope.ts';
import type { RawResponse, RestRoute } from './route.ts';

type Compiled = { route: RestRoute; regex: RegExp; names: string[]; staticness: number };

/**
 * A path parameter's text; a malformed percent-encoding (`%ED%A0%80`, a lone surrogate's bytes, or a
 * stray `%`) is the client's error: 400 VALIDATION_ERROR, not the URIError decodeURIComponent throws.
 */
function decodeSegment(raw: string, name: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw badRequest(`${name}: malformed percent-encoding in the path`, { field: name });
  }
}

/** `raw` decoded, or as it is when its percent-encoding is malformed (for suggestions only). */
function safeDecode(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** The routes a path can match: those with as many segments, by the path's second segment (`agents` of `/v1/agents/…`) when static. */
type Bucket = { byHead: Map<string, Compiled[]>; anyHead: Compiled[] };

/** How many `/`-separated segments `path` has, a single trailing `/` not counted (a route's pattern allows one). */
function segmentCount(path: string): number {
  const end = path.length > 1 && path.endsWith('/') ? path.length - 1 : path.length;
  let n = 0;
  for (let i = 0; i < end; i++) if (path.charCodeAt(i) === 47) n++;
  return n;
}

/** The second segment of `path` (`agents` of `/v1/agents/agt_1/chat`), or '' when it has none. */
function headOf(path: string): string {
  const start = path.indexOf('/', 1);
  if (start < 0) return '';
  const end = path.indexOf('/', start + 1);
  return path.slice(start + 1, end < 0 ? path.length : end);
}

const JSON_TYPE = 'application/json; charset=utf-8';

export class RestRouter {
  readonly #routes: Compiled[];
  /**
   * The routes by segment count, then by static second segment, each list in the routes' order: a
   * path is tried only against routes it could match (a parameter never spans a `/`), not against
   * the whole table (one regular expression per route: ~4 % of a chat request's CPU before).
   */
  readonly #buckets = new Map<number, Bucket>();

  constructor(routes: RestRoute[]) {
    this.#routes = routes.map((route) => {
      const names: string[] = [];
      const pattern = route.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
        names.push(name);
        return '([^/]+)';
      });
      if (route.operation.endpoint !== `${route.method} ${route.path}`) {
        throw new Error(`route ${route.method} ${route.path} runs ${route.operation.name}, whose endpoint is ${route.operation.endpoint}`);
      }
      return { route, regex: new RegExp(`^${pattern}/?$`), names, staticness: -names.length };
    }).sort((a, b) => b.staticness - a.staticness);
    for (const c of this.#routes) {
      const count = segmentCount(c.route.path);
      let bucket = this.#buckets.get(count);
      if (!bucket) this.#buckets.set(count, bucket = { byHead: new Map(), anyHead: [] });
      const head = headOf(c.route.path);
      if (head.includes('{')) bucket.anyHead.push(c);
      else if (!bucket.byHead.has(head)) bucket.byHead.set(head, []);
    }
    for (const [count, bucket] of this.#buckets) {
      for (const [head, list] of bucket.byHead) {
        for (const c of this.#routes) {
          if (segmentCount(c.route.path) !== count) continue;
          const h = headOf(c.route.path);
          if (h === head || h.includes('{')) list.push(c);
        }
      }
    }
  }

  /** The routes `path` may match, in the routes' order. */
  #candidates(path: string): readonly Compiled[] {
    const bucket = this.#buckets.get(segmentCount(path));
    if (!bucket) return [];
    return bucket.byHead.get(headOf(path)) ?? bucket.anyHead;
  }

  get routes(): RestRoute[] {
    return this.#routes.map((c) => c.route);
  }

  /**
   * Finds the route, or throws: NOT_FOUND for a path no route of this method knows, METHOD_NOT_ALLOWED
   * (405, `Allow`) for a path that routes of other methods serve (see {@link unmatchedRoute}).
   */
  match(method: string, path: string): { route: RestRoute; params: Record<string, string> } {
    let others: { route: RestRoute; values: string[] }[] | undefined;
    for (const c of this.#candidates(path)) {
      const m = c.regex.exec(path);
      if (!m) continue;
      if (c.route.method !== method) {
        (others ??= []).push({ route: c.route, values: m.slice(1) });
        continue;
      }
      const params: Record<string, string> = {};
      c.names.forEach((n, i) => {
        params[n] = decodeSegment(m[i + 1]!, n);
      });
      return { route: c.route, params };
    }
    throw unmatchedRoute(method, path, others ?? [], this.#routes.map((c) => c.route));
  }

  /** Runs a matched route. Errors propagate as ServiceError for the caller to render. */
  async execute(
    matched: { route: RestRoute; params: Record<string, string> },
    query: URLSearchParams,
    body: Record<string, unknown>,
    ctx: RequestContext,
    now: () => Date,
  ): Promise<HttpResult> {
    const { route, params } = matched;
    const q = readQuery(route, query);
    const read = readTracker(body);
    const req = { params, query: q, body: read.body, ctx };
    const raw = route.input ? route.input(req) : {};
    let result: unknown;
    try {
      result = await invoke(route.operation, ctx, raw, ctx.onDenied, { unknownFields: read.unread(raw) });
    } catch (e) {
      throw restFieldNames(e, route);
    }
    if (route.status === 204) return { status: 204, headers: {}, body: '' };
    const status = route.status ?? 200;
    if (route.paginated) {
      const page = result as Page<unknown>;
      const data = page.items.map((item) => (route.output ? route.output(item, req) : item));
      return {
        status, headers: { 'Content-Type': JSON_TYPE },
        body: successBody(data, ctx.scope.requestId, now(), { cursor: page.nextCursor, has_more: page.hasMore, ...(page.total !== undefined ? { total: page.total } : {}) }),
      };
    }
    const data = route.output ? route.output(result, req) : result;
    if (data && typeof data === 'object' && (data as RawResponse).raw === true) {
      const r = data as RawResponse;
      return { status: r.status, headers: { 'Content-Type': r.contentType, ...r.headers }, body: r.body, ...(r.stream ? { chunks: r.stream } : {}) };
    }
    return { status, headers: { 'Content-Type': JSON_TYPE }, body: successBody(data, ctx.scope.requestId, now()) };
  }
}

/** `/v1/messages/{id}` → `['', 'v1', 'messages', '{id}']` (a trailing `/` dropped). */
function segmentsOf(path: string): string[] {
  return (path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path).split('/');
}

const isParam = (segment: string) => segment.startsWith('{');

/**
 * The error for a request no route of its method matches. `others` are the routes of other methods
 * whose pattern matched the path, with their parameters' raw values in order.
 *
 * A path that other methods serve is 405 METHOD_NOT_ALLOWED with `Allow`, except where the request
 * put an unknown name in a place its method has fixed names: `POST /v1/messages/mms` matches only
 * `GET /v1/messages/{id}`, but POST names channels there (`/v1/messages/sms`, `/email`, …) and
 * `mms` is neither one of them nor a message id (`msg_…`, the route's `resource`), so it is an
 * unknown route: 404 NOT_FOUND, with the closest fixed name suggested. Anything else is 404.
 */
export function unmatchedRoute(method: string, path: string, others: readonly { route: RestRoute; values: string[] }[], routes: readonly RestRoute[]): ServiceError {
  const segments = segmentsOf(path);
  /** Fixed names the requested method has in segment `at`, where the rest of its path is this path's. */
  const namesAt = (at: number): string[] => routes.flatMap((r) => {
    if (r.method !== method) return [];
    const rs = segmentsOf(r.path);
    if (rs.length !== segments.length || isParam(rs[at]!)) return [];
    return rs.every((s, i) => i === at || isParam(s) || s === segments[i]) ? [rs[at]!] : [];
  });
  const suggestions = new Set<string>();
  const allowed = new Set<string>();
  for (const { route, values } of others) {
    const prefixes = route.resource?.split('+') ?? [];
    let unknownName = false;
    let value = 0;
    segmentsOf(route.path).forEach((s, at) => {
      if (!isParam(s)) return;
      const prefix = prefixes[value];
      const raw = values[value++] ?? '';
      const names = namesAt(at);
      // An id of the route's resource is the resource, whatever else the method names there.
      if (names.length === 0 || (prefix !== undefined && raw.startsWith(`${prefix}_`))) return;
      unknownName = true;
      const near = closest(safeDecode(raw), names);
      if (near) suggestions.add(segments.map((x, i) => (i === at ? near : x)).join('/'));
    });
    if (!unknownName) allowed.add(route.method);
  }
  if (allowed.size > 0) {
    const list = [...allowed].sort();
    return new ServiceError('METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}; it allows ${list.join(', ')}`,
      { method, path, allowed_methods: list }, { headers: { Allow: list.join(', ') } });
  }
  const hint = [...suggestions].sort()[0];
  return new ServiceError('NOT_FOUND', `Unknown route: ${method} ${path}${hint ? `; did you mean ${method} ${hint}?` : ''}`,
    { method, path, ...(hint ? { did_you_mean: `${method} ${hint}` } : {}) });
}

function readQuery(route: RestRoute, query: URLSearchParams): Record<string, string> {
  const allowed = new Set(route.query ?? []);
  const out: Record<string, string> = {};
  for (const [key, value] of query) {
    if (key === 'page' || key === 'offset') {
      throw badRequest(`Offset pagination is not supported; pass the cursor from meta.pagination instead of ${key}`, { field: key });
    }
    if (!allowed.has(key)) throw badRequest(`Unknown query parameter ${key}`, { field: key, allowed: [...allowed] });
    if (key in out) throw badRequest(`Query parameter ${key} given more than once`, { field: key });
    out[key] = value;
  }
  return out;
}


/**
 * The body as the route's `input` sees it, noting which fields it reads: a field it never read is
 * one the operation does not take (`POST /v1/campaigns/{id}/pause` reads none), reported as unknown
 * with the operation's own. A route that hands the body on whole (returns it or puts it in a field,
 * spreads it, lists its keys) leaves every field to the operation's schema.
 */
function readTracker(body: Record<string, unknown>): { body: Record<string, unknown>; unread(raw: unknown): UnknownField[] } {
  const read = new Set<string>();
  let whole = false;
  const tracked = new Proxy(body, {
    get(target, key, receiver) {
      if (typeof key === 'string') read.add(key);
      return Reflect.get(target, key, receiver) as unknown;
    },
    has(target, key) {
      if (typeof key === 'string') read.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      whole = true;
      return Reflect.ownKeys(target);
    },
  });
  return {
    body: tracked,
    unread(raw) {
      // Handed on whole: as the input, or as one of its fields (`{ id, tool: r.body }`).
      if (whole || raw === tracked || (raw !== null && typeof raw === 'object' && Object.values(raw).includes(tracked))) return [];
      const known = [...read];
      return Object.keys(body).filter((k) => !read.has(k)).map((k) => ({ path: [k], known }));
    },
  };
}

/**
 * A query parameter the route renames for its operation (`date_range` → `dateRange`) is named in
 * errors as the client sent it. Body fields keep the operation's names: a route hands them on as sent.
 */
function restFieldNames(e: unknown, route: RestRoute): unknown {
  if (!(e instanceof ServiceError) || typeof e.details.field !== 'string') return e;
  const query = new Set(route.query ?? []);
  const rename = (field: string) => {
    const [head, ...rest] = field.split('.');
    const wire = snake(head!);
    return wire !== head && query.has(wire) && !query.has(head!) ? [wire, ...rest].join('.') : field;
  };
  const field = rename(e.details.field);
  if (field === e.details.field) return e;
  const problems = problemsIn(e);
  if (problems.length > 0) {
    const renamed = validationError(problems.map((p) => ({ ...p, field: rename(p.field), message: p.message.replace(p.field, rename(p.field)) })));
    return new ServiceError(renamed.code, renamed.message, renamed.details, { status: e.status, headers: e.headers });
  }
  return new ServiceError(e.code, e.message.replace(e.details.field, field), { ...e.details, field }, { status: e.status, headers: e.headers });
}
