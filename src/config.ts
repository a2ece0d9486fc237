/**
 * One typed, validated view of the environment. Nothing else in the code base reads process.env.
 */
import { randomBytes, createHmac } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseMasterKeys, type MasterKey } from './providers/kms/local.ts';

export type Config = {
  /** Connection string; undefined means "run an embedded PostgreSQL in dataDir". */
  databaseUrl: string | undefined;
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
  /** API requests (REST and GraphQL, streams excluded) one process works on at once; more are shed with 503. 0: no bound. */
  httpMaxInFlight: number;
  /** Adds a `Server-Timing` header (time per front-door stage) to every API answer: for profiling and the bench. */
  serverTiming: boolean;
  /** Largest multipart upload (routes that accept files: agent knowledge). */
  maxUploadBytes: number;
  cursorTtlSeconds: number;
  workers: boolean;
  http: boolean;
  messaging: {
    /** Live email over SMTP (`smtp://user:pass@host:port`); unset → live email is CHANNEL_UNAVAILABLE. */
    smtpUrl: string | undefined;
    /** Development and benches only: live mode sends through the sandbox providers too (MESSAGING_LIVE_SANDBOX). */
    liveSandbox: boolean;
    /** Delivery attempts for retryable provider errors before a message fails. */
    sendAttempts: number;
    /** Seconds between delivery attempts (pg-boss backs off exponentially from here). */
    retryDelaySeconds: number;
    /** Parallel deliveries per worker process. */
    deliveryConcurrency: number;
    sandbox: { sendLatencyMs: number; deliveredAfterMs: number; readAfterMs: number; templateReviewMs: number };
  };
  numbers: {
    /** Sandbox ports: pending → submitted after portSubmitMs, then completed (or rejected) portCompleteMs later. */
    sandbox: { portSubmitMs: number; portCompleteMs: number };
  };
  voice: {
    /** Public address of this service: recording links (`recording_url`) are built on it. */
    publicBaseUrl: string;
    /** Lifetime of a signed recording link. */
    recordingUrlTtlSeconds: number;
    /** Sandbox calls: ringing after ringMs, answered answerMs later; magic no-answer numbers give up after noAnswerMs of ringing. */
    sandbox: { ringMs: number; answerMs: number; noAnswerMs: number };
  };
  campaigns: {
    /** Recipients per send batch (one job, one transaction). */
    batchSize: number;
    /** Parallel batches per worker process. */
    concurrency: number;
    /** A batch running longer is given up by pg-boss and retried (also how a killed worker's batches come back). */
    batchTimeoutSeconds: number;
    /** Test-mode SMS throughput (msg/s) of the sandbox registration; 0 sends unpaced. */
    sandboxThroughput: number;
  };
  compliance: {
    /** Sandbox registry: brand vetting and campaign review times (ms). */
    sandbox: { vettingMs: number; reviewMs: number };
  };
  webhooks: {
    /** Development and tests only: allow http://127.0.0.1:<port> and http://localhost:<port> targets. */
    allowLoopback: boolean;
    timeoutMs: number;
    /** How often an idle delivery worker looks for due deliveries. */
    pollIntervalMs: number;
    concurrency: number;
  };
  verify: {
    /** Code lifetime when the organization has not set its own (PUT /v1/verify/settings). */
    codeTtlSeconds: number;
    /** Abuse limits on sends: per recipient address, and per organization and mode (sliding windows). */
    recipientSends: number;
    recipientWindowSeconds: number;
    organizationSends: number;
    organizationWindowSeconds: number;
  };
  agents: {
    /** Live model provider (OpenAI-compatible API): base URL and key; unset → live chats answer LLM_PROVIDER_ERROR. */
    llmBaseUrl: string | undefined;
    llmApiKey: string | undefined;
    /** Deadline of one call to the live model provider (request to the answer's last byte); past it the turn fails LLM_PROVIDER_ERROR. */
    llmTimeoutMs: number;
    /** Embedding model of the live provider for knowledge retrieval (unset → full-text ranking only). */
    llmEmbeddingModel: string | undefined;
    /** Sandbox model timing: delay to the first streamed token and between chunks. */
    sandboxFirstTokenMs: number;
    sandboxChunkMs: number;
    /** Deadline of one webhook tool call. */
    toolTimeoutMs: number;
    /** Conversations with no message for this long are marked abandoned by the sweep job. */
    conversationIdleSeconds: number;
    /** Sandbox marketplace review: a submitted listing is approved after this delay. */
    sandboxReviewMs: number;
  };
  flows: {
    /** Executions running or waiting at once per organization and mode; more starts are refused (QUOTA_EXCEEDED). */
    maxActiveExecutions: number;
    /** Steps one execution may run; the next one fails it (STEP_LIMIT). */
    maxSteps: number;
    /** Parallel step-job fetchers per worker process, and jobs per fetch (each batch runs in parallel). */
    concurrency: number;
    batchSize: number;
    /** A step job a crashed worker held is retried after this long (covers the slowest step: an http_request timeout). */
    stepExpireSeconds: number;
  };
  hipaa: {
    /** Master keys wrapping the organizations' PHI data keys, the current one first (HIPAA_MASTER_KEYS). */
    masterKeys: MasterKey[];
    /** Rows purged per statement by the retention job. */
    retentionBatchSize: number;
    /** How long an instance trusts its cached view of an organization's HIPAA mode (then it reads it again). */
    modeCacheMs: number;
  };
  billing: {
    /** Live payments through Stripe; unset → live-mode billing calls are PAYMENT_REQUIRED (no provider). */
    stripeSecretKey: string | undefined;
    /** Stripe's webhook signing secret (`whsec_…`) for `POST /v1/providers/stripe/callbacks`. */
    stripeWebhookSecret: string | undefined;
    /** Our plan price ids → Stripe price ids (`STRIPE_PRICE_STARTER`, …). */
    stripePrices: Record<string, string>;
    /** Base URL of this service as browsers reach it (the sandbox's hosted checkout page). */
    publicBaseUrl: string;
    /** Checkout sessions expire after this (Stripe's minimum is 30 minutes). */
    checkoutTtlSeconds: number;
    /** Development and benches only: live mode uses the payments sandbox too. */
    liveSandbox: boolean;
    sandbox: { webhookDeliveries: number; webhookLatencyMs: number };
    /**
     * A credit reservation still open after this long is settled by the stale-reservation sweep the
     * way its owner says (an agent turn's is released; a message's by its status). Default: 10
     * minutes, or ten LLM_TIMEOUT_MS when that is longer (a turn makes up to five model calls).
     */
    staleReservationSeconds: number;
  };
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

function ratio(name: string, value: string | undefined): number {
  if (value === undefined || value === '') return 1;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new Error(`${name} must be a number from 0 to 1, got "${value}"`);
  return n;
}

function bool(value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  return !['0', 'false', 'no', 'off'].includes(value.toLowerCase());
}

function int(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${value}"`);
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

export function loadConfig(env: NodeJS.ProcessEnv = process.env, argv: string[] = process.argv.slice(2)): Config {
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
    httpMaxInFlight: int('HTTP_MAX_IN_FLIGHT', env.HTTP_MAX_IN_FLIGHT, 256),
    serverTiming: env.SERVER_TIMING === 'true',
    maxUploadBytes: int('MAX_UPLOAD_BYTES', env.MAX_UPLOAD_BYTES, 10 * 1024 * 1024),
    cursorTtlSeconds: int('CURSOR_TTL_SECONDS', env.CURSOR_TTL_SECONDS, 24 * 3600),
    workers: !argv.includes('--no-workers'),
    http: !argv.includes('--workers-only'),
    messaging: {
      smtpUrl: env.SMTP_URL || undefined,
      liveSandbox: bool(env.MESSAGING_LIVE_SANDBOX, false),
      sendAttempts: Math.max(1, int('MESSAGING_SEND_ATTEMPTS', env.MESSAGING_SEND_ATTEMPTS, 4)),
      retryDelaySeconds: int('MESSAGING_RETRY_DELAY_SECONDS', env.MESSAGING_RETRY_DELAY_SECONDS, 5),
      deliveryConcurrency: Math.max(1, int('MESSAGING_DELIVERY_CONCURRENCY', env.MESSAGING_DELIVERY_CONCURRENCY, 8)),
      sandbox: {
        sendLatencyMs: int('SANDBOX_SEND_LATENCY_MS', env.SANDBOX_SEND_LATENCY_MS, 40),
        deliveredAfterMs: int('SANDBOX_DELIVERED_AFTER_MS', env.SANDBOX_DELIVERED_AFTER_MS, 1500),
        readAfterMs: int('SANDBOX_READ_AFTER_MS', env.SANDBOX_READ_AFTER_MS, 3000),
        templateReviewMs: int('SANDBOX_TEMPLATE_REVIEW_MS', env.SANDBOX_TEMPLATE_REVIEW_MS, 10_000),
      },
    },
    numbers: {
      sandbox: {
        portSubmitMs: int('SANDBOX_PORT_SUBMIT_MS', env.SANDBOX_PORT_SUBMIT_MS, 5_000),
        portCompleteMs: int('SANDBOX_PORT_COMPLETE_MS', env.SANDBOX_PORT_COMPLETE_MS, 30_000),
      },
    },
    voice: {
      publicBaseUrl: (env.PUBLIC_BASE_URL || `http://localhost:${int('PORT', env.PORT, 4000)}`).replace(/\/+$/, ''),
      recordingUrlTtlSeconds: Math.max(60, int('VOICE_RECORDING_URL_TTL_SECONDS', env.VOICE_RECORDING_URL_TTL_SECONDS, 3600)),
      sandbox: {
        ringMs: int('SANDBOX_CALL_RING_MS', env.SANDBOX_CALL_RING_MS, 1000),
        answerMs: int('SANDBOX_CALL_ANSWER_MS', env.SANDBOX_CALL_ANSWER_MS, 2000),
        noAnswerMs: int('SANDBOX_CALL_NO_ANSWER_MS', env.SANDBOX_CALL_NO_ANSWER_MS, 30_000),
      },
    },
    campaigns: {
      batchSize: Math.min(1000, Math.max(1, int('CAMPAIGN_BATCH_SIZE', env.CAMPAIGN_BATCH_SIZE, 100))),
      concurrency: Math.max(1, int('CAMPAIGN_CONCURRENCY', env.CAMPAIGN_CONCURRENCY, 4)),
      batchTimeoutSeconds: Math.max(5, int('CAMPAIGN_BATCH_TIMEOUT_SECONDS', env.CAMPAIGN_BATCH_TIMEOUT_SECONDS, 120)),
      sandboxThroughput: Math.max(0, int('CAMPAIGN_SANDBOX_THROUGHPUT', env.CAMPAIGN_SANDBOX_THROUGHPUT, 75)),
    },
    compliance: {
      sandbox: {
        vettingMs: int('SANDBOX_BRAND_VETTING_MS', env.SANDBOX_BRAND_VETTING_MS, 10_000),
        reviewMs: int('SANDBOX_CAMPAIGN_REVIEW_MS', env.SANDBOX_CAMPAIGN_REVIEW_MS, 20_000),
      },
    },
    webhooks: {
      allowLoopback: bool(env.WEBHOOKS_ALLOW_LOOPBACK, false),
      timeoutMs: int('WEBHOOKS_TIMEOUT_MS', env.WEBHOOKS_TIMEOUT_MS, 15_000),
      pollIntervalMs: Math.max(50, int('WEBHOOKS_POLL_INTERVAL_MS', env.WEBHOOKS_POLL_INTERVAL_MS, 500)),
      concurrency: Math.max(1, int('WEBHOOKS_CONCURRENCY', env.WEBHOOKS_CONCURRENCY, 32)),
    },
    verify: {
      codeTtlSeconds: Math.min(86_400, Math.max(60, int('VERIFY_CODE_TTL_SECONDS', env.VERIFY_CODE_TTL_SECONDS, 600))),
      recipientSends: Math.max(1, int('VERIFY_RECIPIENT_SENDS', env.VERIFY_RECIPIENT_SENDS, 5)),
      recipientWindowSeconds: Math.max(1, int('VERIFY_RECIPIENT_WINDOW_SECONDS', env.VERIFY_RECIPIENT_WINDOW_SECONDS, 600)),
      organizationSends: Math.max(1, int('VERIFY_ORGANIZATION_SENDS', env.VERIFY_ORGANIZATION_SENDS, 1000)),
      organizationWindowSeconds: Math.max(1, int('VERIFY_ORGANIZATION_WINDOW_SECONDS', env.VERIFY_ORGANIZATION_WINDOW_SECONDS, 3600)),
    },
    agents: {
      llmBaseUrl: env.LLM_BASE_URL || undefined,
      llmApiKey: env.LLM_API_KEY || undefined,
      llmTimeoutMs: Math.max(100, int('LLM_TIMEOUT_MS', env.LLM_TIMEOUT_MS, 60_000)),
      llmEmbeddingModel: env.LLM_EMBEDDING_MODEL || undefined,
      sandboxFirstTokenMs: int('SANDBOX_LLM_FIRST_TOKEN_MS', env.SANDBOX_LLM_FIRST_TOKEN_MS, 120),
      sandboxChunkMs: int('SANDBOX_LLM_CHUNK_MS', env.SANDBOX_LLM_CHUNK_MS, 15),
      toolTimeoutMs: Math.max(100, int('AGENT_TOOL_TIMEOUT_MS', env.AGENT_TOOL_TIMEOUT_MS, 10_000)),
      conversationIdleSeconds: Math.max(60, int('AGENT_CONVERSATION_IDLE_SECONDS', env.AGENT_CONVERSATION_IDLE_SECONDS, 1800)),
      sandboxReviewMs: int('SANDBOX_MARKETPLACE_REVIEW_MS', env.SANDBOX_MARKETPLACE_REVIEW_MS, 5_000),
    },
    flows: {
      maxActiveExecutions: Math.max(1, int('FLOWS_MAX_ACTIVE_EXECUTIONS', env.FLOWS_MAX_ACTIVE_EXECUTIONS, 10_000)),
      maxSteps: Math.max(1, int('FLOWS_MAX_STEPS', env.FLOWS_MAX_STEPS, 200)),
      concurrency: Math.max(1, int('FLOWS_CONCURRENCY', env.FLOWS_CONCURRENCY, 2)),
      batchSize: Math.max(1, int('FLOWS_BATCH_SIZE', env.FLOWS_BATCH_SIZE, 8)),
      stepExpireSeconds: Math.max(1, int('FLOWS_STEP_EXPIRE_SECONDS', env.FLOWS_STEP_EXPIRE_SECONDS, 60)),
    },
    hipaa: {
      masterKeys: env.HIPAA_MASTER_KEYS
        ? parseMasterKeys(env.HIPAA_MASTER_KEYS)
        : [{ id: 'app-secret', key: createHmac('sha256', appSecret).update('hipaa:master-key').digest() }],
      retentionBatchSize: Math.max(1, int('HIPAA_RETENTION_BATCH_SIZE', env.HIPAA_RETENTION_BATCH_SIZE, 1000)),
      modeCacheMs: Math.max(0, int('HIPAA_MODE_CACHE_MS', env.HIPAA_MODE_CACHE_MS, 1000)),
    },
    billing: {
      stripeSecretKey: env.STRIPE_SECRET_KEY || undefined,
      stripeWebhookSecret: env.STRIPE_WEBHOOK_SECRET || undefined,
      stripePrices: Object.fromEntries(['starter', 'growth', 'business']
        .filter((plan) => env[`STRIPE_PRICE_${plan.toUpperCase()}`])
        .map((plan) => [`price_${plan}_monthly`, env[`STRIPE_PRICE_${plan.toUpperCase()}`]!])),
      publicBaseUrl: env.PUBLIC_BASE_URL || `http://localhost:${int('PORT', env.PORT, 4000)}`,
      checkoutTtlSeconds: Math.max(60, int('BILLING_CHECKOUT_TTL_SECONDS', env.BILLING_CHECKOUT_TTL_SECONDS, 1800)),
      liveSandbox: bool(env.BILLING_LIVE_SANDBOX, false),
      sandbox: {
        webhookDeliveries: Math.max(1, int('SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES', env.SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES, 2)),
        webhookLatencyMs: int('SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS', env.SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS, 50),
      },
      staleReservationSeconds: Math.max(1, int('BILLING_STALE_RESERVATION_SECONDS', env.BILLING_STALE_RESERVATION_SECONDS,
        Math.max(600, Math.ceil((10 * Math.max(100, int('LLM_TIMEOUT_MS', env.LLM_TIMEOUT_MS, 60_000))) / 1000)))),
    },
    providerSecret: (provider: string) =>
      env[`PROVIDER_SECRET_${provider.toUpperCase()}`] || createHmac('sha256', appSecret).update(`provider-callback:${provider}`).digest('hex'),
  };
}
