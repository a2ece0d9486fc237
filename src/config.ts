/**
 * One typed, validated view of the environment. Nothing else in the code base reads process.env.
 */
import { randomBytes, createHmac } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseBool as bool, parseInt as int } from './platform/env.ts';
import { VACUUM_MODES, type VacuumMode } from './platform/db/vacuum.ts';

/**
 * Each module's own settings, under the module's name: a module declares its section in
 * `src/modules/<ctx>/<ctx>.config.ts` (read through {@link EnvReader}, so it is documented in
 * docs/configuration.md) and adds its type here by augmentation:
 * `declare module '../../config.ts' { interface ModuleConfigs { voice: VoiceConfig } }`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ModuleConfigs {}

/** The service: its core settings and every module's section. */
export type Config = CoreConfig & ModuleConfigs;

/** Settings of the service itself (documented in docs/operations.md, Configuration). */
export type CoreConfig = {
  /** Connection string; undefined means "run an embedded PostgreSQL in dataDir". */
  databaseUrl: string | undefined;
  /** The owner role's connection string: migrations run through it, the service through databaseUrl (docs/operations.md, "Database roles"). */
  databaseMigrationUrl: string | undefined;
  dataDir: string;
  /** Unset: the port recorded for dataDir (`<dataDir>/pg-port`, chosen free from 54329 at first start). */
  embeddedPgPort: number | undefined;
  port: number;
  host: string;
  bootstrapOrg: boolean;
  /** Server secret: keys API-key hashes, signs cursors. */
  appSecret: string;
  jwt: {
    secret: string | undefined;
    jwksUrl: string | undefined;
    issuer: string | undefined;
    audience: string | undefined;
    algorithms: string[];
  };
  trustedProxies: string[];
  redisUrl: string | undefined;
  /** Connections per pool (the raw pool and the ORM's each; pg-boss gets half). */
  dbPoolSize: number;
  /** How long a query may wait for a pooled connection or a new connection (then 503 SERVICE_UNAVAILABLE). */
  dbConnectTimeoutMs: number;
  /** PostgreSQL statement_timeout of every pooled connection (a hung statement fails instead of holding a request). */
  dbStatementTimeoutMs: number;
  /** The service's own vacuuming of churning tables (platform/db/vacuum.ts): auto (when the server's autovacuum is off), always, off. */
  dbVacuum: VacuumMode;
  dbVacuumMinDeadRows: number;
  /** `vacuum_cost_delay` of the service's own vacuum passes (ms; 0: unthrottled). */
  dbVacuumCostDelayMs: number;
  /** Quick vacuum passes over queue tables every this many ms (0: only the minute's passes). */
  dbVacuumQueueIntervalMs: number;
  /** Bound of a Redis connection attempt and of each Redis command (then 503 SERVICE_UNAVAILABLE). */
  redisTimeoutMs: number;
  /** Namespaces Redis keys, so several deployments (or test databases) can share one Redis. */
  redisPrefix: string;
  logLevel: string;
  docsBaseUrl: string;
  /** Bearer token `GET /metrics` requires; unset → no metrics are kept and /metrics is 404. */
  metricsToken: string | undefined;
  /** OpenTelemetry traces over OTLP/HTTP (platform/tracing.ts); `endpoint` unset → tracing is off. */
  tracing: { endpoint: string | undefined; headers: Record<string, string>; serviceName: string; sampleRatio: number };
  maxBodyBytes: number;
  /**
   * API requests (REST and GraphQL, streams excluded) one process works on at once; more are shed
   * with 503. 0: no bound. The default, 64, keeps the database pool busy (throughput levels off at
   * 64 concurrent senders) while an admitted request waits at most about bound ÷ throughput; with
   * 256, a gateway short of CPU spent it on admitted work and its accept queue grew (fault
   * scenario 6, session 13: accepted p99 3.8–4.8 s at 256, 0.25 s at 64).
   */
  httpMaxInFlight: number;
  /**
   * Depth of the listening socket's accept queue (the kernel caps it at net.core.somaxconn). Node's
   * default, 511, overflows under overload: a burst of new connections is then dropped and the
   * clients' SYNs retried after 1 s, 3 s… instead of being answered at once (503 when shed).
   */
  httpListenBacklog: number;
  /**
   * Event-loop delay (ms) above which the in-flight bound is lowered (http/admission.ts), raised
   * again once the loop keeps time. 0: the bound is always HTTP_MAX_IN_FLIGHT.
   */
  httpMaxLoopDelayMs: number;
  /**
   * How long an API request past the in-flight bound waits for a slot before it is shed with 503
   * (at most HTTP_MAX_IN_FLIGHT wait; more are shed at once, and so is every request past the
   * bound once a wait ran out, an overload rather than a burst, until none came past it for 5 × this
   * long). 0: shed at once. A stall of a few
   * hundred milliseconds otherwise shed the burst that arrived during it (fault scenario 7).
   */
  httpAdmissionWaitMs: number;
  /** Adds a `Server-Timing` header (time per front-door stage) to every API answer: for profiling and the bench. */
  serverTiming: boolean;
  /** Largest multipart upload (routes that accept files: agent knowledge). */
  maxUploadBytes: number;
  cursorTtlSeconds: number;
  workers: boolean;
  http: boolean;
  /** Public address of this service (recording links, the sandbox checkout page), no trailing slash. */
  publicBaseUrl: string;
  /** Development and tests only: outbound URLs (webhooks, callbacks, tools, flow requests) may target loopback. */
  allowLoopback: boolean;
  /** Rows one PHI housekeeping statement (retention purge, backfill) handles. */
  phiBatchSize: number;
  /** Secret a provider signs its callbacks with (X-Provider-Signature), by provider name. */
  providerSecret(provider: string): string;
};

/** OTEL_EXPORTER_OTLP_HEADERS: `key=value` pairs, comma-separated, values percent-encoded (the OTLP exporter spec). */
function otlpHeaders(value: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (value ?? '').split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    out[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
  }
  return out;
}

/**
 * The traces URL from the standard variables: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else
 * OTEL_EXPORTER_OTLP_ENDPOINT + `/v1/traces`; none when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
 */
function otlpTracesEndpoint(env: NodeJS.ProcessEnv): string | undefined {
  if (bool(env.OTEL_SDK_DISABLED, false)) return undefined;
  const exporter = env.OTEL_TRACES_EXPORTER || 'otlp';
  if (exporter === 'none') return undefined;
  if (exporter !== 'otlp') throw new Error(`OTEL_TRACES_EXPORTER must be otlp or none, got "${exporter}"`);
  if (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT) return `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`;
  return undefined;
}

function vacuumMode(value: string | undefined): VacuumMode {
  const mode = (value || 'auto').trim().toLowerCase();
  if (!(VACUUM_MODES as readonly string[]).includes(mode)) throw new Error(`DB_VACUUM must be one of ${VACUUM_MODES.join(', ')}, got "${value}"`);
  return mode as VacuumMode;
}

function ratio(name: string, value: string | undefined): number {
  if (value === undefined || value === '') return 1;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new Error(`${name} must be a number from 0 to 1, got "${value}"`);
  return n;
}

/** A development secret persisted beside the embedded database, so server and CLI agree. */
function persistedSecret(dataDir: string): string {
  const file = path.join(dataDir, 'app-secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  writeFileSync(file, secret, { mode: 0o600 });
  return secret;
}

/** Settings of the service itself (the table in docs/operations.md; `test/architecture/config.test.ts` keeps the two in step). */
export function loadCoreConfig(env: NodeJS.ProcessEnv = process.env, argv: string[] = process.argv.slice(2)): CoreConfig {
  const dataDir = path.resolve(env.DATA_DIR ?? '.data');
  const appSecret = env.APP_SECRET || persistedSecret(dataDir);
  if (appSecret.length < 16) throw new Error('APP_SECRET must be at least 16 characters');
  const jwksUrl = env.AUTH_JWKS_URL || undefined;
  // Without a JWKS URL and without AUTH_JWT_SECRET, tokens are signed with a secret derived
  // from APP_SECRET, so `admin token mint` works out of the box in development.
  const jwtSecret = env.AUTH_JWT_SECRET || (jwksUrl ? undefined : createHmac('sha256', appSecret).update('jwt').digest('base64url'));
  const algorithms = (env.AUTH_JWT_ALGORITHMS || (jwksUrl ? 'RS256,ES256,EdDSA' : 'HS256'))
    .split(',').map((s) => s.trim()).filter(Boolean);
  if (algorithms.some((a) => a.toLowerCase() === 'none')) throw new Error('AUTH_JWT_ALGORITHMS may not contain "none"');
  return {
    databaseUrl: env.DATABASE_URL || undefined,
    databaseMigrationUrl: env.DATABASE_MIGRATION_URL || undefined,
    dataDir,
    embeddedPgPort: env.EMBEDDED_PG_PORT ? int('EMBEDDED_PG_PORT', env.EMBEDDED_PG_PORT, 0) : undefined,
    port: int('PORT', env.PORT, 4000),
    host: env.HOST || '0.0.0.0',
    bootstrapOrg: bool(env.BOOTSTRAP_ORG, true),
    appSecret,
    jwt: {
      secret: jwtSecret,
      jwksUrl,
      issuer: env.AUTH_JWT_ISSUER || undefined,
      audience: env.AUTH_JWT_AUDIENCE || undefined,
      algorithms,
    },
    trustedProxies: (env.TRUSTED_PROXIES ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    redisUrl: env.REDIS_URL || undefined,
    dbPoolSize: Math.max(2, int('DB_POOL_SIZE', env.DB_POOL_SIZE, 10)),
    dbConnectTimeoutMs: int('DB_CONNECT_TIMEOUT_MS', env.DB_CONNECT_TIMEOUT_MS, 5000),
    dbStatementTimeoutMs: int('DB_STATEMENT_TIMEOUT_MS', env.DB_STATEMENT_TIMEOUT_MS, 30_000),
    dbVacuum: vacuumMode(env.DB_VACUUM),
    dbVacuumMinDeadRows: Math.max(1, int('DB_VACUUM_MIN_DEAD_ROWS', env.DB_VACUUM_MIN_DEAD_ROWS, 10_000)),
    dbVacuumCostDelayMs: Math.min(100, Math.max(0, int('DB_VACUUM_COST_DELAY_MS', env.DB_VACUUM_COST_DELAY_MS, 2))),
    dbVacuumQueueIntervalMs: Math.max(0, int('DB_VACUUM_QUEUE_INTERVAL_MS', env.DB_VACUUM_QUEUE_INTERVAL_MS, 10_000)),
    redisPrefix: env.REDIS_PREFIX || '',
    redisTimeoutMs: Math.max(1, int('REDIS_TIMEOUT_MS', env.REDIS_TIMEOUT_MS, 1000)),
    logLevel: env.LOG_LEVEL || 'info',
    // This service's own error reference (GET /docs/errors); deployments set their public URL.
    docsBaseUrl: env.DOCS_BASE_URL || `http://localhost:${int('PORT', env.PORT, 4000)}/docs/errors`,
    metricsToken: env.METRICS_TOKEN || undefined,
    tracing: {
      endpoint: otlpTracesEndpoint(env),
      headers: otlpHeaders(env.OTEL_EXPORTER_OTLP_HEADERS),
      serviceName: env.OTEL_SERVICE_NAME || 'omnichannel-platform',
      sampleRatio: ratio('OTEL_TRACES_SAMPLER_ARG', env.OTEL_TRACES_SAMPLER_ARG),
    },
    maxBodyBytes: int('MAX_BODY_BYTES', env.MAX_BODY_BYTES, 1024 * 1024),
    httpMaxInFlight: int('HTTP_MAX_IN_FLIGHT', env.HTTP_MAX_IN_FLIGHT, 64),
    httpListenBacklog: Math.max(1, int('HTTP_LISTEN_BACKLOG', env.HTTP_LISTEN_BACKLOG, 4096)),
    httpMaxLoopDelayMs: int('HTTP_MAX_LOOP_DELAY_MS', env.HTTP_MAX_LOOP_DELAY_MS, 100),
    httpAdmissionWaitMs: int('HTTP_ADMISSION_WAIT_MS', env.HTTP_ADMISSION_WAIT_MS, 100),
    serverTiming: env.SERVER_TIMING === 'true',
    maxUploadBytes: int('MAX_UPLOAD_BYTES', env.MAX_UPLOAD_BYTES, 10 * 1024 * 1024),
    cursorTtlSeconds: int('CURSOR_TTL_SECONDS', env.CURSOR_TTL_SECONDS, 24 * 3600),
    workers: !argv.includes('--no-workers'),
    http: !argv.includes('--workers-only'),
    publicBaseUrl: (env.PUBLIC_BASE_URL || `http://localhost:${int('PORT', env.PORT, 4000)}`).replace(/\/+$/, ''),
    allowLoopback: bool(env.WEBHOOKS_ALLOW_LOOPBACK, false),
    phiBatchSize: Math.max(1, int('HIPAA_RETENTION_BATCH_SIZE', env.HIPAA_RETENTION_BATCH_SIZE, 1000)),
    providerSecret: (provider: string) =>
      env[`PROVIDER_SECRET_${provider.toUpperCase()}`] || createHmac('sha256', appSecret).update(`provider-callback:${provider}`).digest('hex'),
  };
}
