/**
 * Turns request credentials into a Scope, the same way for REST, GraphQL over HTTP and
 * subscriptions. API keys are looked up by their keyed hash; bearer tokens are verified with jose
 * on every request and the role comes from our team membership, never from the token.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { createRemoteJWKSet, jwtVerify, errors as joseErrors, type JWTPayload } from 'jose';
import type { Pool } from 'pg';
import type { Config } from '../../config.ts';
import type { Clock } from '../clock.ts';
import { ServiceError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { recordAudit } from '../audit/audit.ts';
import type { Mode } from '../db/tenant.ts';
import type { Plan, Role } from '../tenancy/tenancy.entities.ts';
import { API_KEY_PATTERN, hashApiKey } from './apiKeys.ts';
import { buildBlockList, ipMatches } from './ip.ts';
import type { Scope } from './scope.ts';

export type Credentials = { apiKey: string | undefined; authorization: string | undefined; ip: string | undefined; requestId: string };

const LAST_USED_RESOLUTION_MS = 60_000;
/** Upper bound on how long a cached credential row lives, even if a change notification were lost. */
const CACHE_TTL_MS = 30_000;
export const AUTH_CHANGED_CHANNEL = 'auth_changed';

/**
 * Tells every instance that credentials changed (a key revoked, an allowlist or a role changed):
 * NOTIFY is delivered when the caller's transaction commits, and each instance drops its cache.
 */
export async function notifyAuthChanged(em: EntityManager): Promise<void> {
  await em.getConnection().execute(`select pg_notify('${AUTH_CHANGED_CHANNEL}', '')`, [], 'all', em.getTransactionContext());
}

type KeyRow = { id: string; organization_id: string; mode: string; role: string; revoked_at: Date | null; last_used_at: Date | null; plan: string; ip_allowlist: string[]; graphql_trusted_documents_only: boolean };
type Cached<T> = { row: T; at: number };

export class Authenticator {
  readonly #pool: Pool;
  readonly #orm: MikroORM;
  readonly #config: Config;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #jwtKey: Uint8Array | ReturnType<typeof createRemoteJWKSet> | undefined;
  /** Sessions whose first use this process has already audited (the table is the source of truth). */
  readonly #seenSessions = new Set<string>();
  /**
   * API-key rows by key hash. Used only while the LISTEN connection is up, so a change on any
   * instance (revocation, allowlist, role) reaches this cache within the commit's notification.
   */
  readonly #keys = new Map<string, Cached<KeyRow>>();
  /** When this process last wrote last_used_at per key (the write is at most once a minute). */
  readonly #touched = new Map<string, number>();
  #listener: pg.Client | undefined;
  #listening = false;
  #stopped = false;

  constructor(deps: { pool: Pool; orm: MikroORM; config: Config; clock: Clock; log: Logger }) {
    this.#pool = deps.pool;
    this.#orm = deps.orm;
    this.#config = deps.config;
    this.#clock = deps.clock;
    this.#log = deps.log;
    const { jwksUrl, secret } = deps.config.jwt;
    this.#jwtKey = jwksUrl ? createRemoteJWKSet(new URL(jwksUrl)) : secret ? new TextEncoder().encode(secret) : undefined;
  }

  /** Starts listening for credential changes; until then (and after a dropped connection) nothing is cached. */
  async start(): Promise<void> {
    this.#stopped = false;
    await this.#listen();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#listening = false;
    this.invalidate();
    await this.#listener?.end().catch(() => {});
    this.#listener = undefined;
  }

  /** Drops every cached credential (called on NOTIFY, and directly by the instance that made the change). */
  invalidate(): void {
    this.#keys.clear();
  }

  async #listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#pool.options.connectionString });
    const lost = () => {
      this.#listening = false;
      this.invalidate();
      if (this.#listener === client) this.#listener = undefined;
      if (!this.#stopped) setTimeout(() => { void this.#listen().catch(() => {}); }, 1000).unref();
    };
    client.on('error', lost);
    client.on('end', lost);
    client.on('notification', () => this.invalidate());
    try {
      await client.connect();
      await client.query(`listen ${AUTH_CHANGED_CHANNEL}`);
      this.#listener = client;
      this.invalidate();
      this.#listening = true;
    } catch (e) {
      this.#log.warn({ err: e }, 'auth change listener unavailable; credentials are not cached');
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      if (!this.#stopped) setTimeout(() => { void this.#listen().catch(() => {}); }, 5000).unref();
    }
  }

  async #keyRow(hash: string): Promise<KeyRow | undefined> {
    const now = Date.now();
    const hit = this.#listening ? this.#keys.get(hash) : undefined;
    if (hit && now - hit.at < CACHE_TTL_MS) return hit.row;
    const { rows } = await this.#pool.query(
      `select k.id, k.organization_id, k.mode, k.role, k.revoked_at, k.last_used_at,
              case when k.mode = 'test' then o.test_plan else o.plan end as plan, o.ip_allowlist, o.graphql_trusted_documents_only
         from api_keys k join organizations o on o.id = k.organization_id
        where k.key_hash = $1`,
      [hash],
    );
    const row = rows[0] as KeyRow | undefined;
    if (row && this.#listening) {
      if (this.#keys.size > 50_000) this.#keys.clear();
      this.#keys.set(hash, { row, at: now });
    }
    return row;
  }

  async authenticate(c: Credentials): Promise<Scope> {
    if (c.apiKey !== undefined) return this.#fromApiKey(c);
    if (c.authorization !== undefined) return this.#fromBearer(c);
    throw new ServiceError('UNAUTHORIZED', 'Provide an X-API-Key header or an Authorization: Bearer token');
  }

  async #fromApiKey(c: Credentials): Promise<Scope> {
    const key = c.apiKey!.trim();
    if (!API_KEY_PATTERN.test(key)) throw new ServiceError('INVALID_API_KEY', 'API key is malformed');
    const row = await this.#keyRow(hashApiKey(this.#config.appSecret, key));
    if (!row) throw new ServiceError('INVALID_API_KEY', 'API key is unknown');
    const scope: Scope = {
      organizationId: row.organization_id, mode: row.mode as Mode, plan: row.plan as Plan, role: row.role as Role,
      actor: { type: 'api_key', id: row.id }, ip: c.ip, requestId: c.requestId,
      ...(row.graphql_trusted_documents_only ? { graphqlTrustedOnly: true } : {}),
    };
    if (row.revoked_at) {
      this.auditDenied(scope, 'auth.api_key_revoked_used', {});
      throw new ServiceError('INVALID_API_KEY', 'API key has been revoked');
    }
    this.#checkIpAllowlist(scope, row.ip_allowlist as string[]);
    const now = this.#clock.now();
    const last = Math.max(row.last_used_at ? new Date(row.last_used_at).getTime() : 0, this.#touched.get(row.id) ?? 0);
    if (now.getTime() - last > LAST_USED_RESOLUTION_MS) {
      if (this.#touched.size > 50_000) this.#touched.clear();
      this.#touched.set(row.id, now.getTime());
      this.#pool.query('update api_keys set last_used_at = $2 where id = $1', [row.id, now]).catch((e: unknown) => this.#log.warn({ err: e }, 'last_used_at update failed'));
    }
    return scope;
  }

  async #fromBearer(c: Credentials): Promise<Scope> {
    const m = /^Bearer\s+(\S+)$/i.exec(c.authorization!.trim());
    if (!m) throw new ServiceError('UNAUTHORIZED', 'Authorization header must be "Bearer <token>"');
    if (!this.#jwtKey) throw new ServiceError('UNAUTHORIZED', 'Bearer tokens are not configured on this server');
    let claims: JWTPayload;
    try {
      const verified = await jwtVerify(m[1]!, this.#jwtKey as Uint8Array, {
        algorithms: this.#config.jwt.algorithms,
        issuer: this.#config.jwt.issuer,
        audience: this.#config.jwt.audience,
        currentDate: this.#clock.now(),
        requiredClaims: ['exp'],
      });
      claims = verified.payload;
    } catch (e) {
      if (e instanceof joseErrors.JWTExpired) throw new ServiceError('EXPIRED_TOKEN', 'Bearer token has expired');
      throw new ServiceError('UNAUTHORIZED', 'Bearer token is invalid');
    }
    const orgId = typeof claims.org_id === 'string' ? claims.org_id : typeof claims.org === 'string' ? claims.org : undefined;
    const email = typeof claims.email === 'string' ? claims.email.toLowerCase() : undefined;
    if (!orgId || (!email && !claims.sub)) throw new ServiceError('UNAUTHORIZED', 'Bearer token must name an organization (org_id) and a user (email or sub)');
    const mode: Mode = claims.mode === 'test' ? 'test' : claims.mode === undefined || claims.mode === 'live' ? 'live' : (() => { throw new ServiceError('UNAUTHORIZED', 'Bearer token mode must be live or test'); })();
    const { rows } = await this.#pool.query(
      `select o.id as organization_id, case when $4 = 'test' then o.test_plan else o.plan end as plan, o.ip_allowlist, o.graphql_trusted_documents_only, u.id as user_id, u.email, m.role
         from organizations o
         left join users u on (u.email = $2 or ($2::text is null and u.id = $3))
         left join team_members m on m.organization_id = o.id and m.user_id = u.id
        where o.id = $1`,
      [orgId, email ?? null, claims.sub ?? null, mode],
    );
    const row = rows[0];
    if (!row) throw new ServiceError('TENANT_NOT_FOUND', 'The organization named by the token does not exist');
    const sessionId = typeof claims.sid === 'string' ? claims.sid : typeof claims.jti === 'string' ? claims.jti : undefined;
    const scope: Scope = {
      organizationId: row.organization_id, mode, plan: row.plan as Plan, role: (row.role ?? 'viewer') as Role,
      actor: { type: 'user', id: row.user_id ?? String(claims.sub ?? email), email: row.email ?? email ?? '', sessionId },
      ip: c.ip, requestId: c.requestId,
      ...(row.graphql_trusted_documents_only ? { graphqlTrustedOnly: true } : {}),
    };
    if (!row.role) {
      this.auditDenied(scope, 'auth.not_a_member', {});
      throw new ServiceError('FORBIDDEN', 'The user is not a member of this organization');
    }
    this.#checkIpAllowlist(scope, row.ip_allowlist as string[]);
    if (sessionId) await this.#auditFirstUse(scope, sessionId);
    return scope;
  }

  #checkIpAllowlist(scope: Scope, allowlist: string[]): void {
    if (!allowlist || allowlist.length === 0) return;
    if (scope.ip && ipMatches(buildBlockList(allowlist), scope.ip)) return;
    this.auditDenied(scope, 'auth.ip_denied', { ip: scope.ip ?? null });
    throw new ServiceError('FORBIDDEN', 'Requests from this IP address are not allowed for this organization', { ip: scope.ip ?? null });
  }

  async #auditFirstUse(scope: Scope, sessionId: string): Promise<void> {
    const key = `${scope.organizationId}:${sessionId}`;
    if (this.#seenSessions.has(key)) return;
    const now = this.#clock.now();
    const { rowCount } = await this.#pool.query(
      `insert into token_sessions (organization_id, session_id, user_id, first_seen_at) values ($1, $2, $3, $4)
       on conflict do nothing`,
      [scope.organizationId, sessionId, scope.actor.id, now],
    );
    if (this.#seenSessions.size > 10_000) this.#seenSessions.clear();
    this.#seenSessions.add(key);
    if (rowCount === 1) await this.#writeAudit(scope, 'auth.token_session_started', { session_id: sessionId });
  }

  /** Records a denied request; never fails the request path. */
  auditDenied(scope: Scope, action: string, details: Record<string, unknown>): void {
    this.#writeAudit(scope, action, { ...details, denied: true }).catch((e: unknown) => this.#log.warn({ err: e }, 'audit write failed'));
  }

  async #writeAudit(scope: Scope, action: string, details: Record<string, unknown>): Promise<void> {
    const em = this.#orm.em.fork();
    recordAudit(em, scope, { action, details }, this.#clock.now());
    await em.flush();
  }
}
