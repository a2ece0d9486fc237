/**
 * One typed, validated view of the environment. Nothing else in the code base reads process.env.
 */
import { randomBytes, createHmac } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export type Config = {
  /** Connection string; undefined means "run an embedded PostgreSQL in dataDir". */
  databaseUrl: string | undefined;
  dataDir: string;
  embeddedPgPort: number;
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
  /** Namespaces Redis keys, so several deployments (or test databases) can share one Redis. */
  redisPrefix: string;
  logLevel: string;
  docsBaseUrl: string;
  maxBodyBytes: number;
  cursorTtlSeconds: number;
  workers: boolean;
  http: boolean;
  messaging: {
    /** Live email over SMTP (`smtp://user:pass@host:port`); unset → live email is CHANNEL_UNAVAILABLE. */
    smtpUrl: string | undefined;
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
  };
  /** Secret a provider signs its callbacks with (X-Provider-Signature), by provider name. */
  providerSecret(provider: string): string;
};

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
    embeddedPgPort: int('EMBEDDED_PG_PORT', env.EMBEDDED_PG_PORT, 54329),
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
    redisPrefix: env.REDIS_PREFIX || '',
    logLevel: env.LOG_LEVEL || 'info',
    docsBaseUrl: env.DOCS_BASE_URL || 'https://docs.omnichannel.dev/errors',
    maxBodyBytes: int('MAX_BODY_BYTES', env.MAX_BODY_BYTES, 1024 * 1024),
    cursorTtlSeconds: int('CURSOR_TTL_SECONDS', env.CURSOR_TTL_SECONDS, 24 * 3600),
    workers: !argv.includes('--no-workers'),
    http: !argv.includes('--workers-only'),
    messaging: {
      smtpUrl: env.SMTP_URL || undefined,
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
    },
    providerSecret: (provider: string) =>
      env[`PROVIDER_SECRET_${provider.toUpperCase()}`] || createHmac('sha256', appSecret).update(`provider-callback:${provider}`).digest('hex'),
  };
}
