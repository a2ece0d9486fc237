/**
 * Yoga over the Pothos schema: parse and validation caches, the spec's error codes, the complexity
 * gate (graphql/complexity.ts), the introspection answer cache, and the rate limits of
 * graphql/rateLimits.ts.
 */
import { GraphQLError, introspectionFromSchema, specifiedRules, type DocumentNode, type ExecutionResult, type GraphQLSchema, type ValidationRule } from 'graphql';
import { createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { RequestContext } from '../context.ts';
import type { GraphqlRateLimits } from './rateLimits.ts';
import { maskError, serviceErrorToGraphQL } from './errors.ts';
import { schema } from './schema.ts';
import { COMPLEXITY_LIMITS } from './builder.ts';
import { heaviestRootField, operationCost, operationShape, overLimit } from './complexity.ts';
import { graphqlNestsDeeper, tooDeep } from '../platform/nesting.ts';
import { persistedOperations } from './persisted.ts';
import { incrementalParts } from './incremental.ts';
import type { GraphqlResponseCache } from './responseCache.ts';
import type { GraphqlDocuments } from '../modules/settings/settings.documents.ts';

export function createGraphQL(rateLimits: GraphqlRateLimits, documents: GraphqlDocuments, responseCache?: GraphqlResponseCache): YogaServerInstance<{ requestContext: RequestContext }, RequestContext> {
  return createYoga<{ requestContext: RequestContext }, RequestContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    logging: false,
    // The HTTP front door already answers CORS and preflights for every path and caps body sizes,
    // and no field takes file uploads: Yoga need not do any of it again per request.
    cors: false,
    multipart: false,
    maxRequestBodySize: false,
    // Replaced by documentCaches() below.
    parserAndValidationCache: false,
    graphiql: graphiqlOptions(),
    // GraphiQL with its assets inlined from the installed package (no CDN), loaded on first use and
    // rendered once: the page never changes while the process runs (http/graphiqlPage.ts compresses
    // it once and answers reloads with 304).
    renderGraphiQL: (opts) => (graphiqlHtml ??= import('@graphql-yoga/render-graphiql').then((m) => m.renderGraphiQL(opts))),
    maskedErrors: { maskError: (error) => maskError(error) },
    context: ({ requestContext }) => requestContext,
    // `documentId`: persisted operations' GraphQL-over-HTTP parameter (graphql/persisted.ts).
    extraParamNames: ['documentId'],
    plugins: [...persistedOperations(documents), sourceNesting(), documentCaches(), specErrorCodes(), complexityGate(), introspectionAnswers(), rateLimits.plugin(),
      // After the persisted operations (its key is the resolved text), the complexity gate and the rate limits (a hit is measured and counted like a miss).
      ...(responseCache?.plugins(schema) ?? []), incrementalParts(rateLimits)],
  });
}

/** GraphiQL's page, rendered on first use. */
let graphiqlHtml: Promise<string> | undefined;

/** A small favicon for GraphiQL's page: the renderer's default is a 150 KB data URL, inlined twice. */
const GRAPHIQL_FAVICON = `data:image/svg+xml,${encodeURIComponent('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="#e10098"/></svg>')}`;

/** The example GraphiQL opens with: who the key is, then the latest messages. */
export const GRAPHIQL_QUERY = `# Paste a test key (npm start prints one; svc_test_sk_…) into Headers below, then run.
query Start {
  viewer { role mode organization { id name plan } }
  messages(first: 5) { edges { node { id channel to status price priceUnit createdAt } } }
}
`;
/** The headers GraphiQL opens with: where the key goes (API keys go in X-API-Key; Authorization takes bearer tokens). */
export const GRAPHIQL_HEADERS = JSON.stringify({ 'X-API-Key': 'svc_test_sk_…' }, null, 2);

/**
 * GraphiQL's page: the example query, the headers template shown, and the schema given with the
 * page (its introspection), so opening it sends nothing: every request to /graphql needs a
 * credential, and an introspection sent before the key is pasted could only answer 401.
 */
function graphiqlOptions() {
  return {
    title: 'Omnichannel API',
    favicon: GRAPHIQL_FAVICON,
    defaultQuery: GRAPHIQL_QUERY,
    headers: GRAPHIQL_HEADERS,
    defaultEditorToolsVisibility: 'headers' as const,
    schema: introspectionFromSchema(schema, { descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, inputValueDeprecation: true }),
  };
}

/**
 * Rejects an operation over a limit of graphql/complexity.ts (depth, breadth, cost, introspection's
 * depth and cost, aliases, repeated root fields) before execution starts, so a refused query
 * consumes no rate-limit quota. This is the only complexity check (the builder sets no limit).
 */
function complexityGate(): Plugin<RequestContext> {
  return {
    onExecute({ args }) {
      let cost: ReturnType<typeof operationCost>;
      try {
        cost = operationCost(args.document, args.operationName, args.schema, (args.variableValues ?? {}) as Record<string, unknown>, args.contextValue as object);
      } catch (e) {
        // Variables that do not coerce to their declared types: the client's error, like a validation error.
        if (e instanceof GraphQLError) throw toSpecValidationError(e);
        throw e;
      }
      const ctx = args.contextValue as RequestContext;
      const variables = (args.variableValues ?? {}) as Record<string, unknown>;
      const refused = cost && overLimit(cost, ctx.scope.plan, () => heaviestRootField(args.document, args.operationName, args.schema, variables, ctx));
      if (refused) throw serviceErrorToGraphQL(refused);
      // Yoga hands execution a merged copy of the context: the measure goes on the request's own
      // (the server context's `requestContext`, which the HTTP handler holds).
      if (cost) ((ctx as { requestContext?: RequestContext }).requestContext ?? ctx).graphqlCost = cost.complexity;
    },
  };
}

/**
 * Answers of introspection-only operations (every root field `__schema`, `__type` or
 * `__typename`), kept per document object, operation name and variables: the schema does not
 * change while the process runs, so GraphiQL's and codegen's introspection runs once per process.
 * At most `perDocument` answers per document (the parse cache bounds the documents); only answers
 * without errors are kept.
 */
export function introspectionAnswers(perDocument = 16): Plugin<RequestContext> {
  const answers = new WeakMap<DocumentNode, Map<string, ExecutionResult>>();
  return {
    onExecute({ args, setResultAndStopExecution }) {
      if (!operationShape(args.document, args.operationName, args.schema)?.introspectionOnly) return;
      const key = `${args.operationName ?? ''}\u0000${JSON.stringify(args.variableValues ?? {})}`;
      let byKey = answers.get(args.document);
      const known = byKey?.get(key);
      if (known) {
        setResultAndStopExecution(known);
        return;
      }
      return {
        onExecuteDone({ result }) {
          const r = result as ExecutionResult;
          if (!r || typeof r !== 'object' || Symbol.asyncIterator in r || r.errors?.length) return;
          if (!byKey) answers.set(args.document, (byKey = new Map()));
          if (byKey.size >= perDocument) byKey.delete(byKey.keys().next().value!);
          byKey.set(key, r);
        },
      };
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

/**
 * A document nested deeper than MAX_NESTING (selections, lists, input objects, arguments) is
 * refused before graphql's recursive parser sees it (400 VALIDATION_ERROR, `details.limit`
 * `nesting`); parsed documents come from documentCaches, so only new texts are measured.
 */
function sourceNesting(): Plugin<RequestContext> {
  return {
    onParse({ parseFn, setParseFn }) {
      setParseFn((source, options) => {
        const text = typeof source === 'string' ? source : source.body;
        if (graphqlNestsDeeper(text)) {
          const e = tooDeep('The document');
          throw toSpecValidationError(new GraphQLError(e.message), e.details);
        }
        return parseFn(source, options);
      });
    },
  };
}

/** A request error (parse, validation, variable coercion) as the spec's VALIDATION_ERROR with HTTP 400. */
function toSpecValidationError(e: Error, details: Record<string, unknown> = {}): GraphQLError {
  return new GraphQLError(e.message, {
    ...(e instanceof GraphQLError ? { nodes: e.nodes, source: e.source, positions: e.positions, path: e.path } : {}),
    extensions: { code: 'VALIDATION_ERROR', status: 400, details, http: { status: 400 } },
  });
}

/** Parse and validation failures carry the spec's VALIDATION_ERROR (HTTP 400) like every other client error. */
function specErrorCodes(): Plugin<RequestContext> {
  return {
    onParse: () => ({ result, replaceParseResult }) => {
      if (result instanceof GraphQLError && !result.extensions.code) replaceParseResult(toSpecValidationError(result));
    },
    onValidate: () => ({ result, setResult }) => {
      if (result.length > 0) setResult(result.map((e) => toSpecValidationError(e)));
    },
  };
}

export { COMPLEXITY_LIMITS };
