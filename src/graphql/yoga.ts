/**
 * Yoga over the Pothos schema. Per-field window rate limits go through @envelop/rate-limiter,
 * whose store is our shared PostgreSQL limiter keyed by the field's REST twin endpoint, so a REST
 * endpoint and its GraphQL field count against one bucket.
 */
import { useRateLimiter } from '@envelop/rate-limiter';
import { complexityFromQuery } from '@pothos/plugin-complexity';
import { getOperationAST, GraphQLError, Kind, parse, specifiedRules, TypeInfo, visit, visitWithTypeInfo, type DocumentNode, type GraphQLSchema, type ValidationRule } from 'graphql';
import { createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { RequestContext } from '../context.ts';
import { isServiceError, ServiceError } from '../platform/errors.ts';
import { rateLimitIdentity } from '../platform/auth/scope.ts';
import type { RateLimiter } from '../platform/ratelimit/limiter.ts';
import { maskError, serviceErrorToGraphQL } from './errors.ts';
import { ENDPOINT_BY_FIELD_NAME, FIELD_ENDPOINTS } from './operationField.ts';
import { schema } from './schema.ts';
import { COMPLEXITY_LIMITS } from './builder.ts';

type Identity = { contextIdentity: string; fieldIdentity: string };

/**
 * Live request contexts by request id: the rate-limit store sees only the identity string.
 * `preCounted`: the endpoint whose window the front door already counted with the burst slot
 * (see `firstLimitedEndpoint`); the store then skips its first count for that endpoint.
 */
export type LiveContext = RequestContext & { rateLimitError?: ServiceError; preCounted?: string };
export const liveContexts = new Map<string, LiveContext>();

const operationEndpoints = new Map<string, string | null>();

/**
 * The rate-limit endpoint of the first root field with a window in the operation `query` runs
 * (null when none, or when the query does not parse: Yoga reports that itself). The front door takes
 * this field's window together with the burst slot, one round trip instead of two, so a GraphQL
 * request counts like its REST twin: at admission, whatever happens after. Cached per query text.
 */
export function firstLimitedEndpoint(query: string, operationName: string | undefined): string | null {
  const key = `${operationName ?? ''}\u0000${query}`;
  const known = operationEndpoints.get(key);
  if (known !== undefined) return known;
  let found: string | null = null;
  try {
    const operation = getOperationAST(parse(query), operationName);
    const rootType = operation ? { query: 'Query', mutation: 'Mutation', subscription: 'Subscription' }[operation.operation] : undefined;
    for (const selection of operation?.selectionSet.selections ?? []) {
      if (selection.kind !== Kind.FIELD) continue;
      const endpoint = FIELD_ENDPOINTS.get(`${rootType}.${selection.name.value}`);
      if (endpoint) {
        found = endpoint;
        break;
      }
    }
  } catch {
    found = null;
  }
  if (operationEndpoints.size >= 1000) operationEndpoints.delete(operationEndpoints.keys().next().value!);
  operationEndpoints.set(key, found);
  return found;
}

/**
 * The @envelop/rate-limiter Store contract is "give me this identity's timestamps". We answer with
 * the outcome of an atomic conditional increment in the shared store: no timestamps when the call
 * is within its window, one (with max 1) when it is over, which makes the plugin reject it.
 */
class SharedWindowStore {
  readonly #limiter: RateLimiter;
  constructor(limiter: RateLimiter) {
    this.#limiter = limiter;
  }

  async getForIdentity(identity: Identity): Promise<readonly number[]> {
    const ctx = liveContexts.get(identity.contextIdentity);
    // fieldIdentity is "<fieldName>:<identifier>".
    const endpoint = ENDPOINT_BY_FIELD_NAME.get(identity.fieldIdentity.split(':')[0]!);
    if (!ctx || !endpoint) return [];
    if (ctx.preCounted === endpoint) {
      // Counted at admission with the burst slot (its result, or its refusal, is on the context).
      ctx.preCounted = undefined;
      return ctx.rateLimitError ? [Date.now()] : [];
    }
    try {
      ctx.rateLimit = await this.#limiter.consume(rateLimitIdentity(ctx.scope), ctx.scope.plan, endpoint);
      return [];
    } catch (e) {
      if (isServiceError(e) && e.code === 'RATE_LIMIT_EXCEEDED') {
        ctx.rateLimitError = e;
        return [Date.now()];
      }
      throw e;
    }
  }

  setForIdentity(): void {
    // Counting already happened atomically in getForIdentity.
  }
}

export function createGraphQL(limiter: RateLimiter): YogaServerInstance<{ requestContext: RequestContext }, RequestContext> {
  const identify = (ctx: unknown) => (ctx as RequestContext).scope.requestId;
  // One config per root type whose field pattern lists its limited fields: the plugin looks up every
  // field of every query in these configs and does not remember a miss, so a config per field made
  // each nested field (id, status, …) test all of them. max 1 + the store's answer (see
  // SharedWindowStore); the message is replaced by transformError.
  const fieldsByType = new Map<string, string[]>();
  for (const key of FIELD_ENDPOINTS.keys()) {
    const [type, field] = key.split('.') as [string, string];
    fieldsByType.set(type, [...(fieldsByType.get(type) ?? []), field]);
  }
  const configByField = [...fieldsByType].map(([type, fields]) => ({
    type, field: fields.length === 1 ? fields[0]! : `{${fields.join(',')}}`, max: 1, window: '60s', message: 'rate limited', identifyFn: identify,
  }));
  return createYoga<{ requestContext: RequestContext }, RequestContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    logging: false,
    // The HTTP front door (server.ts) already answers CORS and preflights for every path and caps
    // body sizes, and no field takes file uploads: Yoga need not do any of it again per request.
    cors: false,
    multipart: false,
    maxRequestBodySize: false,
    // Replaced by documentCaches() below.
    parserAndValidationCache: false,
    graphiql: { title: 'Omnichannel API', defaultQuery: '{ viewer { role mode organization { id name plan } } }' },
    // GraphiQL with its assets inlined from the installed package (no CDN), loaded on first use.
    renderGraphiQL: async (opts) => (await import('@graphql-yoga/render-graphiql')).renderGraphiQL(opts),
    maskedErrors: { maskError: (error) => maskError(error) },
    context: ({ requestContext }) => requestContext,
    plugins: [
      documentCaches(),
      specErrorCodes(),
      complexityGate(),
      settledAtAdmission(useRateLimiter({
        identifyFn: identify,
        configByField,
        store: new SharedWindowStore(limiter) as never,
        // Interpolation runs before the store is asked, so the message carries only the request id;
        // transformError then reads the limiter's own error (limit, window, retry_after) from the context.
        interpolateMessage: (_message, identifier) => identifier,
        transformError: (requestId: string) =>
          serviceErrorToGraphQL(liveContexts.get(requestId)?.rateLimitError ?? new ServiceError('RATE_LIMIT_EXCEEDED'), undefined, requestId),
      }) as Plugin<RequestContext>),
    ],
  });
}

const limitedFieldsByDocument = new WeakMap<DocumentNode, readonly string[]>();

/**
 * The rate-limit endpoints of every rate-limited field in `document`, one entry per field node in
 * document order (every operation and fragment, as @envelop/rate-limiter walks it: the plugin asks
 * its store once per such node). Remembered per document object: the parse cache (documentCaches) hands the same
 * object to every request with the same query text.
 */
export function limitedFieldEndpoints(document: DocumentNode, schema: GraphQLSchema): readonly string[] {
  const known = limitedFieldsByDocument.get(document);
  if (known) return known;
  const typeInfo = new TypeInfo(schema);
  const found: string[] = [];
  visit(document, visitWithTypeInfo(typeInfo, {
    Field() {
      const type = typeInfo.getParentType();
      const field = typeInfo.getFieldDef();
      const endpoint = type && field ? FIELD_ENDPOINTS.get(`${type.name}.${field.name}`) : undefined;
      if (endpoint) found.push(endpoint);
    },
  }));
  limitedFieldsByDocument.set(document, found);
  return found;
}

/**
 * Runs @envelop/rate-limiter's per-execution walk only when it can change the outcome. When the
 * document's only rate-limited field is the one whose window the front door already took at
 * admission, and that window had room, the plugin would ask its store once, get "within the window"
 * back (SharedWindowStore answers from the context) and reject nothing; its TypeInfo walk of the
 * document is then skipped and the admission count is marked used, as the store would. Any other
 * document (a refused window, a second limited field, subscriptions and graphql-ws operations,
 * which are not counted at admission) goes through the plugin unchanged.
 */
function settledAtAdmission(plugin: Plugin<RequestContext>): Plugin<RequestContext> {
  const onExecute = plugin.onExecute!;
  return {
    ...plugin,
    onExecute(payload) {
      // The live context, not the execution's copy of it: the front door reads preCounted afterwards.
      const ctx = liveContexts.get((payload.args.contextValue as RequestContext).scope.requestId);
      if (ctx?.preCounted && !ctx.rateLimitError) {
        const endpoints = limitedFieldEndpoints(payload.args.document, payload.args.schema);
        if (endpoints.length === 1 && endpoints[0] === ctx.preCounted) {
          ctx.preCounted = undefined;
          return;
        }
      }
      return onExecute(payload);
    },
  };
}

/**
 * Rejects a query over the depth, breadth or complexity limits before execution starts, so a
 * refused query consumes no rate-limit quota. This is the only complexity check (the builder sets no limit).
 */
function complexityGate(): Plugin<RequestContext> {
  return {
    onExecute({ args }) {
      let r: ReturnType<typeof complexityFromQuery>;
      try {
        r = complexityFromQuery(args.document, { schema: args.schema, ctx: args.contextValue as object, variables: (args.variableValues ?? {}) as Record<string, unknown> });
      } catch (e) {
        // Variables that do not coerce to their declared types: the client's error, like a validation error.
        if (e instanceof GraphQLError) throw toSpecValidationError(e);
        throw e;
      }
      for (const what of ['depth', 'breadth', 'complexity'] as const) {
        if (r[what] > COMPLEXITY_LIMITS[what]) {
          throw serviceErrorToGraphQL(new ServiceError('VALIDATION_ERROR', `Query exceeds maximum ${what} (${what}: ${r[what]}, max: ${COMPLEXITY_LIMITS[what]})`,
            { limit: what, value: r[what], max: COMPLEXITY_LIMITS[what] }, { status: 400 }));
        }
      }
    },
  };
}

/**
 * Parse and validation caches, in place of Yoga's: parsed documents by query text (at most `max`,
 * the oldest dropped first) and validation results per (schema, document object) when the rules are
 * graphql's standard set, which Yoga's engine adds to every request; any other rule set validates
 * afresh. Yoga's own cache joined every rule's name into a key and read a TTL-checked LRU twice per
 * request: about a fifth of its per-request processing in a profile of sendSms.
 */
export function documentCaches(max = 1024): Plugin<RequestContext> {
  const documents = new Map<string, DocumentNode>();
  const validations = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, readonly GraphQLError[]>>();
  const standard = (rules: readonly ValidationRule[] | undefined) =>
    rules !== undefined && rules.length === specifiedRules.length && rules.every((rule, i) => rule === specifiedRules[i]);
  return {
    onParse({ params, setParsedDocument }) {
      const text = params.source.toString();
      const known = documents.get(text);
      if (known) {
        setParsedDocument(known);
        return;
      }
      return ({ result }) => {
        if (!result || result instanceof Error) return;
        if (documents.size >= max) documents.delete(documents.keys().next().value!);
        documents.set(text, result as DocumentNode);
      };
    },
    onValidate({ params: { schema, documentAST, rules }, setResult }) {
      if (!schema || !standard(rules)) return;
      let bySchema = validations.get(schema);
      if (!bySchema) validations.set(schema, (bySchema = new WeakMap()));
      const known = bySchema.get(documentAST);
      if (known) {
        setResult(known);
        return;
      }
      return ({ result }) => {
        bySchema.set(documentAST, result as readonly GraphQLError[]);
      };
    },
  };
}

/** A request error (parse, validation, variable coercion) as the spec's VALIDATION_ERROR with HTTP 400. */
function toSpecValidationError(e: Error): GraphQLError {
  return new GraphQLError(e.message, {
    ...(e instanceof GraphQLError ? { nodes: e.nodes, source: e.source, positions: e.positions, path: e.path } : {}),
    extensions: { code: 'VALIDATION_ERROR', status: 400, details: {}, http: { status: 400 } },
  });
}

/** Parse and validation failures carry the spec's VALIDATION_ERROR (HTTP 400) like every other client error. */
function specErrorCodes(): Plugin<RequestContext> {
  return {
    onParse: () => ({ result, replaceParseResult }) => {
      if (result instanceof GraphQLError) replaceParseResult(toSpecValidationError(result));
    },
    onValidate: () => ({ result, setResult }) => {
      if (result.length > 0) setResult(result.map(toSpecValidationError));
    },
  };
}

export { COMPLEXITY_LIMITS };
