/**
 * Turns request credentials into a Scope, the same way for REST, GraphQL over HTTP and
 * subscriptions. API keys are looked up by their keyed hash; bearer tokens are verified with jose
 * on every request and the role comes from our team membership, never from the token.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
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

export class Authenticator {
  readonly #pool: Pool;
  readonly #orm: MikroORM;
  readonly #config: Config;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #jwtKey: Uint8Array | ReturnType<typeof createRemoteJWKSet> | undefined;
  /** Sessions whose first use this process has already audited (the table is the source of truth). */
  readonly #seenSessions = new Set<string>();

  constructor(deps: { pool: Pool; orm: MikroORM; config: Config; clock: Clock; log: Logger }) {
    this.#pool = deps.pool;
    this.#orm = deps.orm;
    this.#config = deps.config;
    this.#clock = deps.clock;
    this.#log = deps.log;
    const { jwksUrl, secret } = deps.config.jwt;
    this.#jwtKey = jwksUrl ? createRemoteJWKSet(new URL(jwksUrl)) : secret ? new TextEncoder().encode(secret) : undefined;
  }

  async authenticate(c: Credentials): Promise<Scope> {
    if (c.apiKey !== undefined) return this.#fromApiKey(c);
    if (c.authorization !== undefined) return this.#fromBearer(c);
    throw new ServiceError('UNAUTHORIZED', 'Provide an X-API-Key header or an Authorization: Bearer token');
  }

  async #fromApiKey(c: Credentials): Promise<Scope> {
    const key = c.apiKey!.trim();
    if (!API_KEY_PATTERN.test(key)) throw new ServiceError('INVALID_API_KEY', 'API key is malformed');
    const { rows } = await this.#pool.query(
      `select k.id, k.organization_id, k.mode, k.role, k.revoked_at, k.last_used_at, o.plan, o.ip_allowlist
         from api_keys k join organizations o on o.id = k.organization_id
        where k.key_hash = $1`,
      [hashApiKey(this.#config.appSecret, key)],
    );
    const row = rows[0];
    if (!row) throw new ServiceError('INVALID_API_KEY', 'API key is unknown');
    const scope: Scope = {
      organizationId: row.organization_id, mode: row.mode as Mode, plan: row.plan as Plan, role: row.role as Role,
      actor: { type: 'api_key', id: row.id }, ip: c.ip, requestId: c.requestId,
    };
    if (row.revoked_at) {
      this.auditDenied(scope, 'auth.api_key_revoked_used', {});
      throw new ServiceError('INVALID_API_KEY', 'API key has been revoked');
    }
    this.#checkIpAllowlist(scope, row.ip_allowlist as string[]);
    const now = this.#clock.now();
    if (!row.last_used_at || now.getTime() - new Date(row.last_used_at).getTime() > LAST_USED_RESOLUTION_MS) {
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
      `select o.id as organization_id, o.plan, o.ip_allowlist, u.id as user_id, u.email, m.role
         from organizations o
         left join users u on (u.email = $2 or ($2::text is null and u.id = $3))
         left join team_members m on m.organization_id = o.id and m.user_id = u.id
        where o.id = $1`,
      [orgId, email ?? null, claims.sub ?? null],
    );
    const row = rows[0];
    if (!row) throw new ServiceError('TENANT_NOT_FOUND', 'The organization named by the token does not exist');
    const sessionId = typeof claims.sid === 'string' ? claims.sid : typeof claims.jti === 'string' ? claims.jti : undefined;
    const scope: Scope = {
      organizationId: row.organization_id, mode, plan: row.plan as Plan, role: (row.role ?? 'viewer') as Role,
      actor: { type: 'user', id: row.user_id ?? String(claims.sub ?? email), email: row.email ?? email ?? '', sessionId },
      ip: c.ip, requestId: c.requestId,
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
