/**
 * Starts the real service for one test file: its own database cloned from the migrated template,
 * the real HTTP server on a free port, and helpers that call it over HTTP like a client would.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, inject } from 'vitest';
import { createApp, type App } from '../../src/app.ts';
import type { Config } from '../../src/config.ts';
import { loadConfig } from '../../src/modules/config.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { ManualClock, type Clock } from '../../src/platform/clock.ts';
import { resetIdClock } from '../../src/platform/ids.ts';
import type { JobRegistry } from '../../src/platform/jobs/jobs.ts';
import type { Plan, Role } from '../../src/platform/tenancy/tenancy.entities.ts';

export const TEST_APP_SECRET = 'test-app-secret-0123456789abcdef';
export const TEST_JWT_SECRET = 'test-jwt-secret-0123456789abcdef';

export type TestOrg = { orgId: string; ownerUserId: string; testKey: string; liveKey: string };
export type HttpResponse<T = any> = { status: number; headers: Headers; text: string; body: T };
export type CallOptions = { key?: string; token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> };

export type TestApp = {
  app: App;
  baseUrl: string;
  /** The service's connection: its own role, which owns nothing (test/helpers/globalSetup.ts). */
  databaseUrl: string;
  /** The same database as its owner (the admin role), for what only an owner may do. */
  ownerUrl: string;
  config: Config;
  clock: Clock;
  /** A raw connection to this file's database, for assertions the API cannot make. */
  db: pg.Pool;
  createOrg(plan?: Plan, name?: string): Promise<TestOrg>;
  createKey(orgId: string, role: Role, mode?: 'test' | 'live'): Promise<string>;
  mintToken(orgId: string, email: string, role: Role, opts?: { ttlSeconds?: number; mode?: 'live' | 'test'; sid?: string; secret?: string; alg?: string }): Promise<string>;
  rest<T = any>(method: string, path: string, opts?: CallOptions): Promise<HttpResponse<T>>;
  gql<T = any>(query: string, variables?: Record<string, unknown>, opts?: CallOptions): Promise<HttpResponse<{ data?: T; errors?: any[] }>>;
  close(): Promise<void>;
};

/**
 * A database of its own for one test file, cloned from the migrated template (see globalSetup.ts):
 * `url` logs in as the service's role (no ownership, no DDL), `ownerUrl` as the admin that owns it.
 */
export async function cloneTestDatabase(): Promise<{ url: string; ownerUrl: string; name: string; drop(): Promise<void> }> {
  const template = inject('pgTemplate');
  const name = `omni_t_${randomBytes(5).toString('hex')}_${template.split('_').pop()}`;
  const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await admin.connect();
  await admin.query(`create database "${name}" template "${template}"`);
  await admin.end();
  const u = new URL(inject('pgAdminUrl'));
  u.pathname = `/${name}`;
  return { url: serviceUrl(u.toString()), ownerUrl: u.toString(), name, drop: () => dropTestDatabase(name) };
}

/**
 * For a `node` child a test starts (src/main.ts, src/admin.ts): Node's compile cache, shared by the
 * run's children, so that each one after the first skips compiling the sources and dependencies.
 */
export const CHILD_NODE_ENV = { NODE_COMPILE_CACHE: path.join(os.tmpdir(), 'omnichannel-test-compile-cache') };

/** `url` logged in as the service's role instead of the admin. */
export function serviceUrl(url: string): string {
  const u = new URL(url);
  const role = inject('pgServiceRole');
  u.username = role.name;
  u.password = role.password;
  return u.toString();
}

/**
 * Drops a file's database without waiting for the drop to finish: PostgreSQL's DROP DATABASE waits
 * for an immediate checkpoint of the whole cluster (seconds on a busy machine), which the next file
 * has no reason to wait for. A drop the worker does not live to see finish is done by the global
 * setup's teardown (globalSetup.ts), which drops every database of the run that is left.
 */
export async function dropTestDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
  void admin.connect()
    .then(() => admin.query(`drop database if exists "${name}" with (force)`))
    .catch(() => {})
    .finally(() => admin.end().catch(() => {}));
}

export async function startTestApp(opts: {
  clock?: Clock; env?: Record<string, string>; registerJobs?: (r: JobRegistry) => void; workers?: boolean;
  /** Another instance over the same database (its owner drops it on close). */
  sameDatabaseAs?: TestApp;
  /**
   * Run the app as the database's owner instead of the service's role: only for what needs
   * ownership before PostgreSQL 17 (VACUUM of the service's own tables, DB_VACUUM), test/faults/vacuum.test.ts.
   */
  asOwner?: boolean;
  /** Receives every log line (with LOG_LEVEL in `env`), e.g. to scan what the service logged. */
  logStream?: { write(line: string): void };
} = {}): Promise<TestApp> {
  const ownsDatabase = !opts.sameDatabaseAs;
  // A new database and clock, as a new process would have: ids start from this app's time (a file
  // before this one in the same worker may have run its manual clock days ahead).
  if (ownsDatabase) resetIdClock();
  const cloned = opts.sameDatabaseAs ? { url: opts.sameDatabaseAs.databaseUrl, ownerUrl: opts.sameDatabaseAs.ownerUrl } : await cloneTestDatabase();
  const databaseUrl = opts.asOwner ? cloned.ownerUrl : cloned.url;
  const ownerUrl = cloned.ownerUrl;
  const dbName = new URL(databaseUrl).pathname.slice(1);

  const config = loadConfig({
    APP_SECRET: TEST_APP_SECRET,
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    DATA_DIR: path.join(os.tmpdir(), 'omnichannel-test-data'),
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'silent',
    // Several apps run at once in the suite: keep each one's connections few.
    DB_POOL_SIZE: '4',
    // A busy suite's event loop lags: the in-flight bound stays HTTP_MAX_IN_FLIGHT unless a test
    // asks (the lag-driven bound: src/http/admission.test.ts, test/faults/overload.test.ts).
    HTTP_MAX_LOOP_DELAY_MS: '0',
    ...opts.env,
  }, []);
  const clock = opts.clock ?? new ManualClock(Date.now());
  const app = await createApp({ config, databaseUrl, clock, log: createLogger(config.logLevel, opts.logStream), registerJobs: opts.registerJobs });
  await app.start({ workers: opts.workers ?? false });
  const { port } = await app.http.listen(0, '127.0.0.1');
  const baseUrl = `http://127.0.0.1:${port}`;
  // As the owner: assertions and fixtures may write what the service may not (the PHI access log).
  const db = new pg.Pool({ connectionString: ownerUrl, max: 2 });

  const call = async (method: string, url: string, o: CallOptions = {}): Promise<HttpResponse> => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.key) headers['X-API-Key'] = o.key;
    if (o.token) headers.Authorization = `Bearer ${o.token}`;
    let body: string | undefined = o.rawBody;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['Content-Type'] ??= 'application/json';
    }
    const res = await fetch(url, { method, headers, body });
    const text = await res.text();
    let parsed: unknown;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    return { status: res.status, headers: res.headers, text, body: parsed };
  };

  return {
    app, baseUrl, databaseUrl, ownerUrl, config, clock, db,
    async createOrg(plan = 'starter', name = 'Test org') {
      const r = await app.services.settings.createOrganization({ name, plan });
      return { orgId: r.organization.id, ownerUserId: r.owner.id, testKey: r.testKey, liveKey: r.liveKey };
    },
    async createKey(orgId, role, mode = 'test') {
      return (await app.services.settings.adminCreateApiKey(orgId, mode, role, `${role} key`)).key;
    },
    async mintToken(orgId, email, role, o = {}) {
      await app.services.settings.adminUpsertMember(orgId, email, role);
      const now = Math.floor(clock.now().getTime() / 1000);
      return new SignJWT({ org_id: orgId, email, mode: o.mode ?? 'test', ...(o.sid ? { sid: o.sid } : {}) })
        .setProtectedHeader({ alg: o.alg ?? 'HS256' })
        .setSubject(email).setIssuedAt(now).setExpirationTime(now + (o.ttlSeconds ?? 3600))
        .sign(new TextEncoder().encode(o.secret ?? TEST_JWT_SECRET));
    },
    rest: (method, p, o) => call(method, `${baseUrl}${p}`, o),
    gql: (query, variables, o = {}) => call('POST', `${baseUrl}/graphql`, { ...o, body: { query, variables } }),
    async close() {
      await db.end();
      await app.stop();
      if (!ownsDatabase) return;
      await dropTestDatabase(dbName);
    },
  };
}

/**
 * One app for a whole test file: `open` runs in beforeAll and its `close` in afterAll; the getter
 * answers what it opened (inside tests and later hooks).
 */
export function useFileApp<A extends { close(): Promise<void> }>(open: () => Promise<A>): () => A {
  let opened: A | undefined;
  beforeAll(async () => { opened = await open(); });
  afterAll(async () => { await opened?.close(); });
  return () => {
    if (!opened) throw new Error('the file\'s app is not started yet: use it inside tests or hooks');
    return opened;
  };
}

/**
 * REST and GraphQL calls as `defaultOrg` (another key when given) on an app with a manual clock:
 * the manual clock freezes the per-second burst window (enterprise: 100 requests/s per key), so
 * every call moves it 20 ms on and no key ever queues for a slot that would never come.
 */
export function manualClockClient(app: () => TestApp, defaultOrg: () => TestOrg) {
  const clock = () => app().clock as ManualClock;
  async function call<T = any>(method: string, path: string, o: CallOptions = {}): Promise<HttpResponse<T>> {
    clock().advance(20);
    return app().rest<T>(method, path, { key: defaultOrg().testKey, ...o });
  }
  async function gql(query: string, variables?: Record<string, unknown>, key = defaultOrg().testKey) {
    clock().advance(20);
    return app().gql<any>(query, variables, { key });
  }
  return { clock, call, gql };
}
