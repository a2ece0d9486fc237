/** A code's HTTP status and default message. */
export type ErrorDefinition = { readonly status: number; readonly message: string };

/**
 * One error type for the whole service. The platform declares the codes every context shares
 * (authentication, validation, limits, the generic ones); each module declares its own in its
 * manifest's `errors` (src/modules/<ctx>/index.ts), which also hands their names to
 * {@link ModuleErrorCodes}. Together they are the specification's error table and the few codes
 * this service adds (docs/errors.md; the module list's test checks both). REST renders a
 * ServiceError in the error envelope and GraphQL in `extensions`.
 */
export const PLATFORM_ERROR_CODES = {
  UNAUTHORIZED: { status: 401, message: 'Missing or invalid authentication' },
  INVALID_API_KEY: { status: 401, message: 'API key is malformed, revoked or unknown' },
  EXPIRED_TOKEN: { status: 401, message: 'Bearer token has expired' },
  INSUFFICIENT_PERMISSIONS: { status: 403, message: 'Your role lacks permission for this operation' },
  FORBIDDEN: { status: 403, message: 'Access to this resource is denied' },
  VALIDATION_ERROR: { status: 422, message: 'Field validation failed' },
  // Field kinds the shared validation reports (platform/validation.ts), whichever context's input holds the field.
  INVALID_PHONE_NUMBER: { status: 422, message: 'Phone number is not a valid E.164 number' },
  INVALID_EMAIL: { status: 422, message: 'Email address syntax is invalid' },
  INVALID_TEMPLATE: { status: 422, message: 'Template is malformed or parameters are missing' },
  MISSING_REQUIRED_FIELD: { status: 422, message: 'A required field is missing' },
  INVALID_WEBHOOK_URL: { status: 422, message: 'Webhook URL is not allowed or unreachable' },
  MESSAGE_TOO_LONG: { status: 422, message: 'Message body is too long' },
  MEDIA_TOO_LARGE: { status: 422, message: 'Media is over the channel limit' },
  INVALID_CURSOR: { status: 400, message: 'Cursor is malformed or expired' },
  NOT_FOUND: { status: 404, message: 'Resource not found' },
  ALREADY_EXISTS: { status: 409, message: 'A resource with this unique key already exists' },
  CONFLICT: { status: 409, message: 'Request conflicts with the current state' },
  TENANT_NOT_FOUND: { status: 404, message: 'No organization found for this credential' },
  RATE_LIMIT_EXCEEDED: { status: 429, message: 'Rate limit exceeded' },
  QUOTA_EXCEEDED: { status: 429, message: 'Plan quota reached' },
  BURST_LIMIT_EXCEEDED: { status: 429, message: 'Too many requests per second' },
  INTERNAL_ERROR: { status: 500, message: 'An unexpected error occurred' },
  SERVICE_UNAVAILABLE: { status: 503, message: 'Service unavailable; retry with exponential backoff' },
  MAINTENANCE_MODE: { status: 503, message: 'Scheduled maintenance' },
  // Not in the specification's table (docs/errors.md, "Codes this service adds").
  METHOD_NOT_ALLOWED: { status: 405, message: 'The path exists but not with this method; see the Allow header' },
  PERSISTED_QUERY_NOT_FOUND: { status: 404, message: 'PersistedQueryNotFound' },
  PERSISTED_QUERY_REQUIRED: { status: 400, message: 'This organization accepts only trusted documents: send a documentId' },
  PERSISTED_QUERY_HASH_MISMATCH: { status: 400, message: 'The persisted query hash is not the sha256 of the query' },
} as const satisfies Record<string, ErrorDefinition>;

/**
 * Codes the modules add: their manifests' `errors`, derived into this interface by each module
 * (`interface ModuleErrorCodes extends Readonly<typeof errors> {}`), so `ServiceError` accepts them;
 * the platform names none of them.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ModuleErrorCodes {}
export type ErrorCode = keyof typeof PLATFORM_ERROR_CODES | keyof ModuleErrorCodes;
export type ErrorDetails = Record<string, unknown>;

const CODES = new Map<string, ErrorDefinition & { owner: string }>(Object.entries(PLATFORM_ERROR_CODES).map(([code, d]) => [code, { ...d, owner: 'platform' }]));

/** Registers a module's codes (the module list does, before anything runs); a code has one owner. */
export function registerErrorCodes(owner: string, codes: Readonly<Record<string, ErrorDefinition>>): void {
  for (const [code, d] of Object.entries(codes)) {
    if (!/^[A-Z][A-Z0-9_]*$/.test(code)) throw new Error(`error code ${code} must be UPPER_SNAKE_CASE`);
    const known = CODES.get(code);
    if (known && known.owner !== owner) throw new Error(`error code ${code} is already declared by ${known.owner}`);
    CODES.set(code, { status: d.status, message: d.message, owner });
  }
}

/** A code's status and default message; throws for a code no loaded module declared (a wiring bug). */
export function errorDefinition(code: ErrorCode): ErrorDefinition {
  const d = CODES.get(code);
  if (!d) throw new Error(`error code ${code} is declared neither by the platform nor by a loaded module (src/modules/index.ts registers them)`);
  return d;
}

/** Every declared code with its owner, the platform's first and then each module's in module-list order. */
export function declaredErrorCodes(): ReadonlyMap<ErrorCode, ErrorDefinition & { owner: string }> {
  return CODES as ReadonlyMap<ErrorCode, ErrorDefinition & { owner: string }>;
}

export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: ErrorDetails;
  /** Extra response headers (Retry-After, Allow, …). */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message?: string, details: ErrorDetails = {}, opts: { status?: number; headers?: Record<string, string> } = {}) {
    const definition = errorDefinition(code);
    super(message ?? definition.message);
    this.name = 'ServiceError';
    this.code = code;
    // VALIDATION_ERROR is 400 for malformed requests and 422 for field validation (the spec allows both).
    this.status = opts.status ?? definition.status;
    this.details = details;
    this.headers = opts.headers ?? {};
  }
}

export function isServiceError(e: unknown): e is ServiceError {
  return e instanceof ServiceError;
}

/** What was thrown, as an Error (a thrown string or object wrapped), for results that hold errors. */
export function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

/** A malformed request (bad JSON, bad query parameter): VALIDATION_ERROR with HTTP 400. */
export function badRequest(message: string, details: ErrorDetails = {}): ServiceError {
  return new ServiceError('VALIDATION_ERROR', message, details, { status: 400 });
}

export function notFound(what = 'Resource', id?: string): ServiceError {
  return new ServiceError('NOT_FOUND', `${what} not found`, id ? { id } : {});
}

/** Seconds a client is asked to wait (Retry-After) when the database cannot be reached. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/** Socket errors and PostgreSQL SQLSTATEs that mean "the database is not answering now", not a bug. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  '57P01', '57P02', '57P03', // admin_shutdown, crash_shutdown, cannot_connect_now
  '53300', // too_many_connections
  '57014', // query_canceled (statement_timeout)
]);
const UNAVAILABLE_MESSAGES = /Connection terminated|is not currently accepting connections|timeout exceeded when trying to connect|Connection refused|connection timeout|Client has encountered a connection error|the database system is (starting up|shutting down)|terminating connection due to administrator command|Query read timeout/i;

/**
 * Whether `e` (or an error it wraps, as MikroORM's exceptions wrap the driver's) says the database
 * is out of reach or overloaded: the request may succeed when retried a little later.
 */
export function isDatabaseUnavailable(e: unknown): boolean {
  for (let cur: unknown = e, depth = 0; cur && typeof cur === 'object' && depth < 6; cur = (cur as { cause?: unknown }).cause, depth++) {
    const { code, message, errors } = cur as { code?: unknown; message?: unknown; errors?: unknown };
    if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message)) return true;
    // AggregateError (a connect attempt to several addresses).
    if (Array.isArray(errors) && errors.some((x) => isDatabaseUnavailable(x))) return true;
  }
  return false;
}

/**
 * Anything that is not a ServiceError becomes INTERNAL_ERROR (its message and stack never leave),
 * except a database that cannot be reached: SERVICE_UNAVAILABLE 503 with Retry-After.
 */
export function toServiceError(e: unknown): ServiceError {
  if (isServiceError(e)) return e;
  if (isDatabaseUnavailable(e)) {
    return new ServiceError('SERVICE_UNAVAILABLE', 'The database is not reachable right now; retry with exponential backoff',
      { retry_after: UNAVAILABLE_RETRY_AFTER_SECONDS, reason: 'database_unavailable' }, { headers: { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_SECONDS) } });
  }
  return new ServiceError('INTERNAL_ERROR');
}

/** A start-up failure the operator fixes by configuration: `npm start` prints its message as one line, no stack. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}
