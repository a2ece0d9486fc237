/**
 * The OpenAPI 3.1 document of the REST surface, built from the route table (every module's
 * `routes`): paths and methods, path and query parameters, request bodies and query parameter
 * types from each operation's zod input (zod 4 `z.toJSONSchema`), the `{ data, meta }` envelope
 * with `pagination` on lists, response shapes from `schema/responses.json` (the presenters' return
 * types, printed by `npm run codegen`), the error codes each operation can answer with their
 * statuses, roles (`x-roles`), rate-limit headers, `Idempotency-Key` and both credentials.
 * A context that lands later appears here through its routes, with no other step.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { declaredErrorCodes, errorDefinition, type ErrorCode } from '../platform/errors.ts';
import { idPatternOf } from '../platform/ids.ts';
import { ROLES } from '../platform/tenancy/tenancy.entities.ts';
import type { RestRoute } from '../rest/route.ts';

type JsonSchema = Record<string, unknown>;
export type OpenApiDocument = {
  openapi: '3.1.0';
  info: Record<string, unknown>;
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components: Record<string, Record<string, unknown>>;
  [k: string]: unknown;
};

const RESPONSES_FILE = new URL('../../schema/responses.json', import.meta.url);
const ERRORS_FILE = new URL('../../schema/operation-errors.json', import.meta.url);

/** The presenters' shapes by `METHOD /v1/path` (empty when the file is absent: shapes stay open). */
export function loadResponseSchemas(): Record<string, JsonSchema> {
  try {
    return JSON.parse(readFileSync(RESPONSES_FILE, 'utf8')) as Record<string, JsonSchema>;
  } catch {
    return {};
  }
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const RATE_HEADERS = {
  'X-RateLimit-Limit': { $ref: '#/components/headers/X-RateLimit-Limit' },
  'X-RateLimit-Remaining': { $ref: '#/components/headers/X-RateLimit-Remaining' },
  'X-RateLimit-Reset': { $ref: '#/components/headers/X-RateLimit-Reset' },
  'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
};

/**
 * The error codes each operation's own code can raise, by operation name (`npm run codegen` reads
 * them from the code: scripts/operation-errors.ts); empty when the file is absent.
 */
export function loadOperationErrors(): Record<string, string[]> {
  try {
    return JSON.parse(readFileSync(ERRORS_FILE, 'utf8')) as Record<string, string[]>;
  } catch {
    return {};
  }
}

/** The zod input as JSON Schema (what a client sends); parts zod cannot express stay open. */
function inputSchema(schema: z.ZodType): JsonSchema {
  try {
    const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-2020-12' }) as JsonSchema;
    delete json.$schema;
    return json;
  } catch {
    return {};
  }
}

/**
 * The error codes an operation can answer, by HTTP status: the front door's (credentials, roles,
 * limits, malformed requests, cursors, unknown ids, Idempotency-Key conflicts), those its code
 * raises (`derived`, from schema/operation-errors.json), and the route's own `errors`.
 */
function errorCodes(route: RestRoute, input: JsonSchema, pathParams: string[], derived: readonly string[]): Map<number, Set<ErrorCode>> {
  const codes: ErrorCode[] = ['UNAUTHORIZED', 'INVALID_API_KEY', 'EXPIRED_TOKEN', 'FORBIDDEN', 'RATE_LIMIT_EXCEEDED', 'BURST_LIMIT_EXCEEDED', 'INTERNAL_ERROR', 'SERVICE_UNAVAILABLE'];
  if (route.operation.roles.length < ROLES.length) codes.push('INSUFFICIENT_PERMISSIONS');
  // Malformed requests (bad JSON, unknown query parameters): VALIDATION_ERROR with HTTP 400.
  codes.push('VALIDATION_ERROR');
  if (input.properties && Object.keys(input.properties as object).length > 0) codes.push('MISSING_REQUIRED_FIELD');
  if (route.paginated) codes.push('INVALID_CURSOR');
  if (pathParams.length > 0) codes.push('NOT_FOUND');
  if (route.method === 'POST') codes.push('CONFLICT');
  for (const code of derived) if (declaredErrorCodes().has(code as ErrorCode)) codes.push(code as ErrorCode);
  for (const code of route.errors ?? []) codes.push(code);
  const byStatus = new Map<number, Set<ErrorCode>>();
  const add = (status: number, code: ErrorCode) => byStatus.set(status, (byStatus.get(status) ?? new Set()).add(code));
  for (const code of codes) add(errorDefinition(code).status, code);
  add(400, 'VALIDATION_ERROR');
  return new Map([...byStatus].sort(([a], [b]) => a - b));
}

function errorResponse(status: number, codes: Set<ErrorCode>): Record<string, unknown> {
  const list = [...codes].sort();
  return {
    description: list.map((c) => `${c}: ${errorDefinition(c).message}`).join('; '),
    headers: status === 429 ? { ...RATE_HEADERS, 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : { 'X-Request-Id': RATE_HEADERS['X-Request-Id'] },
    'x-error-codes': list,
    content: {
      'application/json': {
        schema: {
          allOf: [ref('ErrorEnvelope')],
          properties: { error: { type: 'object', properties: { code: { type: 'string', enum: list }, status: { const: status } } } },
        },
      },
    },
  };
}

/**
 * Moves the `$defs` of an input's JSON Schema (recursive zod schemas such as IVR submenus, and
 * schemas given an id with `.meta({ id })`) to `components/schemas`, pointing their `$ref`s there:
 * a `#/$defs/…` reference inside a request body resolves against the document root, where tools
 * (validators, Prism, generators) find nothing. A definition with an id keeps it as its name;
 * zod's anonymous ones (`__schema0`) are named after the operation.
 */
function hoistDefinitions(input: JsonSchema, operation: string, components: Components): JsonSchema {
  const defs = input.$defs as Record<string, JsonSchema> | undefined;
  if (!defs) return input;
  const names = new Map(Object.keys(defs).map((k) => [k, /^__schema\d+$/.test(k) ? `${operation}${k.replace(/^__schema/, 'Schema')}` : k]));
  const rewrite = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(rewrite);
    if (!v || typeof v !== 'object') return v;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => {
      const target = k === '$ref' && typeof x === 'string' && x.startsWith('#/$defs/') ? names.get(x.slice('#/$defs/'.length)) : undefined;
      return [k, target ? `#/components/schemas/${target}` : rewrite(x)];
    }));
  };
  const { $defs: _d, ...rest } = input;
  for (const [k, def] of Object.entries(defs)) components.define(names.get(k)!, rewrite(def) as JsonSchema);
  return rewrite(rest) as JsonSchema;
}

/**
 * A path parameter's schema: an `{id}` of a route with a `resource` has that type's id pattern
 * (`msg_` and 26 base32 characters), which also tells a literal segment (`/v1/messages/connectors`)
 * from an id, so no URL matches two templated paths (`/v1/messages/{id}/retry` and
 * `/v1/messages/connectors/{id}`) and validators need not guess.
 */
function pathParameterSchema(route: RestRoute, name: string, fromInput: JsonSchema | undefined): JsonSchema {
  const prefix = name === 'id' ? route.resource?.split('+')[0] : undefined;
  const pattern = prefix ? idPatternOf(prefix) : undefined;
  if (!pattern) return fromInput ?? { type: 'string' };
  return { type: 'string', pattern, description: `An id of the form \`${prefix}_…\`` };
}

/** Shared pieces of the document (response shapes, error responses) under components, each once. */
class Components {
  readonly schemas: Record<string, unknown> = {};
  readonly responses: Record<string, unknown> = {};
  readonly #names = new Map<string, string>();

  #add(bag: Record<string, unknown>, kind: string, name: string, value: unknown): string {
    const key = `${kind}\u0000${JSON.stringify(value)}`;
    const known = this.#names.get(key);
    if (known) return known;
    let unique = name;
    for (let i = 2; unique in bag; i++) unique = `${name}${i}`;
    bag[unique] = value;
    this.#names.set(key, unique);
    return unique;
  }

  /** A named schema (hoisted definitions): defined once; a second, different one with the same name is a bug. */
  define(name: string, value: JsonSchema): void {
    const known = this.schemas[name];
    if (known && JSON.stringify(known) !== JSON.stringify(value)) throw new Error(`two different schemas are named ${name}`);
    this.schemas[name] = value;
  }

  schema(name: string, value: JsonSchema): JsonSchema {
    if (Object.keys(value).length === 0) return value;
    return ref(this.#add(this.schemas, 's', name, value));
  }

  response(name: string, value: unknown): { $ref: string } {
    return { $ref: `#/components/responses/${this.#add(this.responses, 'r', name, value)}` };
  }
}

function operationObject(route: RestRoute, responses: Record<string, JsonSchema>, errors: Record<string, string[]>, components: Components): Record<string, unknown> {
  const op = route.operation;
  const pathParams = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  const pascal = op.name.split('.').map((w) => w.replace(/^./, (c) => c.toUpperCase())).join('');
  const input = hoistDefinitions(inputSchema(op.input), pascal, components);
  const props = (input.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((input.required ?? []) as string[]);
  const query = new Set(route.query ?? []);
  const parameters: Record<string, unknown>[] = [
    ...pathParams.map((name) => ({ name, in: 'path', required: true, schema: pathParameterSchema(route, name, props[name]) })),
    ...[...query].map((name) => ({ name, in: 'query', required: false, schema: props[name] ?? (name === 'limit' ? { type: 'integer', minimum: 1, maximum: 100 } : { type: 'string' }) })),
  ];
  if (route.method === 'POST') parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
  const result: Record<string, unknown> = {
    operationId: op.name,
    // `messaging.sendSms` → "Send Sms".
    summary: op.name.split('.').pop()!.replace(/([a-z])([A-Z])/g, '$1 $2').replace(/^./, (c) => c.toUpperCase()),
    tags: [route.path.split('/')[2] ?? 'v1'],
    description: `Roles: ${op.roles.join(', ')}. Rate-limit bucket: \`${op.endpoint}\`.`,
    'x-roles': [...op.roles],
    'x-rate-limit-endpoint': op.endpoint,
    security: [{ ApiKey: [] }, { BearerToken: [] }],
    parameters,
  };
  if (route.body) {
    result.requestBody = { required: true, content: { 'application/json': { schema: hoistDefinitions(inputSchema(route.body), `${pascal}Body`, components) } } };
  } else if (route.method === 'POST' || route.method === 'PUT' || route.method === 'PATCH') {
    const bodyProps = Object.fromEntries(Object.entries(props).filter(([k]) => !pathParams.includes(k) && !query.has(k)));
    const bodyRequired = [...required].filter((k) => k in bodyProps);
    const { properties: _p, required: _r, ...rest } = input;
    result.requestBody = {
      required: bodyRequired.length > 0,
      content: { 'application/json': { schema: { ...rest, type: 'object', properties: bodyProps, ...(bodyRequired.length ? { required: bodyRequired } : {}) } } },
    };
  }
  const status = route.status ?? 200;
  const shape = components.schema(`${op.name.replace(/^./, (c) => c.toUpperCase())}Result`, responses[`${route.method} ${route.path}`] ?? {});
  const success: Record<string, unknown> = { description: route.paginated ? 'A page of results' : 'Success', headers: RATE_HEADERS };
  if (status !== 204) {
    success.content = {
      'application/json': {
        schema: {
          type: 'object',
          required: ['data', 'meta'],
          properties: route.paginated
            ? { data: { type: 'array', items: shape }, meta: ref('PageMeta') }
            : { data: shape, meta: ref('Meta') },
        },
      },
    };
  }
  const out: Record<string, unknown> = { [String(status)]: success };
  for (const [code, codes] of errorCodes(route, input, pathParams, errors[op.name] ?? [])) out[String(code)] = components.response(`Error${code}`, errorResponse(code, codes));
  result.responses = out;
  return result;
}

export function buildOpenApi(routes: readonly RestRoute[], opts: { version?: string; responses?: Record<string, JsonSchema>; errors?: Record<string, string[]> } = {}): OpenApiDocument {
  const responses = opts.responses ?? loadResponseSchemas();
  const errors = opts.errors ?? loadOperationErrors();
  const paths: OpenApiDocument['paths'] = {};
  const shared = new Components();
  for (const route of [...routes].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method))) {
    (paths[route.path] ??= {})[route.method.toLowerCase()] = operationObject(route, responses, errors, shared);
  }
  const integerHeader = (description: string) => ({ description, schema: { type: 'integer' } });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Omnichannel communications platform',
      version: opts.version ?? '0.1.0',
      description: 'REST `/v1` (GraphQL at `/graphql` shares the same operations). Test-mode keys (`svc_test_sk_…`) use sandbox providers. Error codes: `/docs/errors`.',
    },
    servers: [{ url: '/' }],
    security: [{ ApiKey: [] }, { BearerToken: [] }],
    paths,
    components: {
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'svc_test_sk_… (sandbox) or svc_live_sk_…' },
        BearerToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A token from the identity provider (or `admin token mint`)' },
      },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key', in: 'header', required: false,
          description: 'Replays the first answer for 24 h when the same key is sent again with the same request (1-255 visible ASCII characters)',
          schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
        },
      },
      headers: {
        'X-RateLimit-Limit': integerHeader('Requests allowed in the window of this endpoint'),
        'X-RateLimit-Remaining': integerHeader('Requests left in the window'),
        'X-RateLimit-Reset': integerHeader('Unix time at which the window ends'),
        'Retry-After': integerHeader('Seconds to wait before retrying'),
        'X-Request-Id': { description: 'Id of this request (also meta.request_id)', schema: { type: 'string' } },
      },
      responses: shared.responses,
      schemas: {
        ...shared.schemas,
        Meta: {
          type: 'object', required: ['request_id', 'timestamp'],
          properties: { request_id: { type: 'string' }, timestamp: { type: 'string', format: 'date-time' } },
        },
        PageMeta: {
          type: 'object', required: ['request_id', 'timestamp', 'pagination'],
          properties: {
            request_id: { type: 'string' }, timestamp: { type: 'string', format: 'date-time' },
            pagination: {
              type: 'object', required: ['cursor', 'has_more'],
              properties: { cursor: { type: ['string', 'null'] }, has_more: { type: 'boolean' }, total: { type: 'integer' } },
            },
          },
        },
        ErrorEnvelope: {
          type: 'object', required: ['error', 'meta'],
          properties: {
            error: {
              type: 'object', required: ['code', 'message', 'status', 'details'],
              properties: {
                code: { type: 'string', enum: [...declaredErrorCodes().keys()] },
                message: { type: 'string' }, status: { type: 'integer' }, details: { type: 'object' },
              },
            },
            meta: {
              type: 'object', required: ['request_id', 'timestamp', 'docs_url'],
              properties: { request_id: { type: 'string' }, timestamp: { type: 'string', format: 'date-time' }, docs_url: { type: 'string', format: 'uri' } },
            },
          },
        },
      },
    },
  };
}
