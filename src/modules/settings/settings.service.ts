/**
 * Settings context: the organization, its team, API keys, IP allowlist and audit log. Other
 * contexts and both API surfaces reach these only through this service.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import { Batcher } from '../../platform/db/batcher.ts';
import { LockMode } from '@mikro-orm/core';
import type { Clock } from '../../platform/clock.ts';
import type { Config } from '../../config.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm, type Mode } from '../../platform/db/tenant.ts';
import { ApiKey, Organization, planOf, TeamMember, User, type Plan, type Role } from '../../platform/tenancy/tenancy.entities.ts';
import { AuditLogEntry } from '../../platform/audit/audit.entities.ts';
import { AUDIT_RETENTION_DAYS, recordAudit } from '../../platform/audit/audit.ts';
import { generateApiKey, hashApiKey, keyPrefix } from '../../platform/auth/apiKeys.ts';
import { notifyAuthChanged } from '../../platform/auth/authenticate.ts';
import { canGrant } from '../../platform/auth/roles.ts';
import { systemScope, type Scope } from '../../platform/auth/scope.ts';
import { parseCidr } from '../../platform/auth/ip.ts';
import { keysetOrder, keysetWhere, type CursorCodec, type Page, type PageRequest } from '../../platform/pagination.ts';
import type { AuditExportInput, CreateApiKeyInput } from './settings.schemas.ts';

export type TeamMemberView = TeamMember & { email: string; name: string | null };
export type CreatedApiKey = { apiKey: ApiKey; key: string };

export class SettingsService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #cursors: CursorCodec;

  /** Drops this instance's credential cache at once; other instances hear the NOTIFY at commit. */
  readonly #onAuthChanged: () => void;

  /** Organization reads of concurrent requests share one statement (every viewer read makes one). */
  readonly #organizations: Batcher<string, Organization | null> | undefined;

  constructor(deps: { orm: MikroORM; pool?: Pool; clock: Clock; config: Config; cursors: CursorCodec; onAuthChanged?: () => void }) {
    const pool = deps.pool;
    this.#organizations = pool && new Batcher((ids) => readOrganizations(pool, ids));
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#cursors = deps.cursors;
    this.#onAuthChanged = deps.onAuthChanged ?? (() => {});
  }

  /** Runs a change to credentials (key, allowlist, role) and invalidates cached credentials everywhere. */
  async #changingAuth<T>(em: EntityManager, work: (tx: EntityManager) => Promise<T>): Promise<T> {
    try {
      return await em.transactional(async (tx) => {
        const result = await work(tx);
        await notifyAuthChanged(tx);
        return result;
      });
    } finally {
      this.#onAuthChanged();
    }
  }

  async getOrganization(scope: Scope): Promise<Organization> {
    const org = await this.#orm.em.fork().findOne(Organization, { id: scope.organizationId });
    if (!org) throw new ServiceError('TENANT_NOT_FOUND');
    return org;
  }

  async listTeam(scope: Scope, page: PageRequest): Promise<Page<TeamMemberView>> {
    const em = tenantEm(this.#orm, scope);
    return this.#cursors.list(scope, { list: 'team' }, page, async (keyset) => {
      const rows = await em.find(TeamMember, keysetWhere(keyset), { orderBy: keysetOrder(keyset), limit: keyset.take });
      const users = await em.find(User, { id: { $in: rows.map((r) => r.userId) } });
      const byId = new Map(users.map((u) => [u.id, u]));
      return rows.map((r) => Object.assign(r, { email: byId.get(r.userId)?.email ?? '', name: byId.get(r.userId)?.name ?? null }));
    });
  }

  async listApiKeys(scope: Scope, page: PageRequest & { mode?: Mode | null }): Promise<Page<ApiKey>> {
    const key = { list: 'api_keys', filters: { mode: page.mode ?? null } };
    return this.#cursors.findPage(tenantEm(this.#orm, scope), ApiKey, scope, key, page, page.mode ? { mode: page.mode } : {});
  }

  /**
   * Creates a key. Nobody grants a role above their own, and a test-mode API key cannot mint live
   * keys (a leaked test key must not become a live one): that takes a live credential or a user.
   */
  async createApiKey(scope: Scope, input: CreateApiKeyInput): Promise<CreatedApiKey> {
    const mode = input.mode ?? scope.mode;
    if (!canGrant(scope.role, input.role)) {
      throw new ServiceError('INSUFFICIENT_PERMISSIONS', `Role ${scope.role} may not create ${input.role} keys`, { field: 'role' });
    }
    if (mode === 'live' && scope.mode === 'test' && scope.actor.type === 'api_key') {
      throw new ServiceError('FORBIDDEN', 'A test-mode API key cannot create live-mode keys', { field: 'mode' });
    }
    const em = tenantEm(this.#orm, scope);
    return em.transactional(async (tx) => {
      const created = this.#newKey(tx, scope.organizationId, mode, input.role, input.name ?? null, scope.actor.id);
      recordAudit(tx, scope, { action: 'api_key.created', resourceType: 'api_key', resourceId: created.apiKey.id, details: { role: input.role, mode } }, this.#clock.now());
      return created;
    });
  }

  async revokeApiKey(scope: Scope, id: string): Promise<ApiKey> {
    const em = tenantEm(this.#orm, scope);
    return this.#changingAuth(em, async (tx) => {
      const key = await tx.findOne(ApiKey, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!key) throw notFound('API key', id);
      if (key.mode === 'live' && scope.mode === 'test' && scope.actor.type === 'api_key') {
        throw new ServiceError('FORBIDDEN', 'A test-mode API key cannot revoke live-mode keys');
      }
      if (!canGrant(scope.role, key.role)) {
        throw new ServiceError('INSUFFICIENT_PERMISSIONS', `Role ${scope.role} may not revoke ${key.role} keys`);
      }
      if (!key.revokedAt) {
        key.revokedAt = this.#clock.now();
        recordAudit(tx, scope, { action: 'api_key.revoked', resourceType: 'api_key', resourceId: key.id }, this.#clock.now());
      }
      return key;
    });
  }

  async getApiKey(scope: Scope, id: string): Promise<ApiKey> {
    return (await tenantEm(this.#orm, scope).findOne(ApiKey, { id })) ?? (() => { throw notFound('API key', id); })();
  }

  async getTeamMember(scope: Scope, id: string): Promise<TeamMemberView> {
    const em = tenantEm(this.#orm, scope);
    const member = await em.findOne(TeamMember, { id });
    if (!member) throw notFound('Team member', id);
    const user = await em.findOne(User, { id: member.userId });
    return Object.assign(member, { email: user?.email ?? '', name: user?.name ?? null });
  }

  async getAuditLogEntry(scope: Scope, id: string): Promise<AuditLogEntry> {
    return (await tenantEm(this.#orm, scope).findOne(AuditLogEntry, { id })) ?? (() => { throw notFound('Audit log entry', id); })();
  }

  /** The caller's organization (a plain record, read with concurrent requests' in one statement). */
  /** The caller's organization, its `plan` the one of the caller's mode (test keys act on the test plan). */
  async currentOrganization(scope: Scope): Promise<Organization> {
    const org = this.#organizations ? await this.#organizations.submit(scope.organizationId) : await this.#orm.em.fork().findOne(Organization, { id: scope.organizationId });
    if (!org) throw notFound('Organization', scope.organizationId);
    return { ...org, plan: planOf(org, scope.mode) };
  }

  async getIpAllowlist(scope: Scope): Promise<string[]> {
    return (await this.getOrganization(scope)).ipAllowlist;
  }

  async setIpAllowlist(scope: Scope, entries: string[]): Promise<string[]> {
    const normalized = [...new Set(entries.map((e) => {
      const c = parseCidr(e);
      if (!c) throw new ServiceError('VALIDATION_ERROR', `${e} is not an IP address or CIDR range`, { field: 'entries', value: e });
      return e.includes('/') ? `${c.address}/${c.prefix}` : c.address;
    }))];
    const em = tenantEm(this.#orm, scope);
    return this.#changingAuth(em, async (tx) => {
      const org = await tx.findOneOrFail(Organization, { id: scope.organizationId });
      const before = org.ipAllowlist;
      org.ipAllowlist = normalized;
      org.updatedAt = this.#clock.now();
      recordAudit(tx, scope, { action: 'settings.ip_allowlist_updated', resourceType: 'organization', resourceId: org.id, details: { before, after: normalized } }, this.#clock.now());
      return normalized;
    });
  }

  /** Sets `graphql_trusted_documents_only`: the credentials' cache carries it, so this is an auth change. */
  async setGraphqlTrustedDocumentsOnly(scope: Scope, enabled: boolean): Promise<Organization> {
    const em = tenantEm(this.#orm, scope);
    const org = await this.#changingAuth(em, async (tx) => {
      const o = await tx.findOneOrFail(Organization, { id: scope.organizationId });
      const before = o.graphqlTrustedDocumentsOnly;
      o.graphqlTrustedDocumentsOnly = enabled;
      o.updatedAt = this.#clock.now();
      recordAudit(tx, scope, { action: 'settings.graphql_trusted_documents_only_updated', resourceType: 'organization', resourceId: o.id, details: { before, after: enabled } }, this.#clock.now());
      return o;
    });
    return { ...org, plan: planOf(org, scope.mode) };
  }

  async listAuditLogs(scope: Scope, page: PageRequest): Promise<Page<AuditLogEntry>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), AuditLogEntry, scope, { list: 'audit_logs' }, page);
  }

  async exportAuditLogs(scope: Scope, input: AuditExportInput): Promise<AuditLogEntry[]> {
    const days = Number(input.dateRange.slice(0, -1));
    const since = new Date(this.#clock.now().getTime() - days * 86_400_000);
    const em = tenantEm(this.#orm, scope);
    const rows = await em.find(AuditLogEntry, { createdAt: { $gte: since } }, { orderBy: { id: 'desc' }, limit: 50_000 });
    const tx = this.#orm.em.fork();
    recordAudit(tx, scope, { action: 'audit_log.exported', details: { format: input.format, date_range: input.dateRange, rows: rows.length } }, this.#clock.now());
    await tx.flush();
    return rows;
  }

  /** Scheduled: removes audit entries older than the retention period, across all tenants. */
  async pruneAuditLogs(): Promise<number> {
    const cutoff = new Date(this.#clock.now().getTime() - AUDIT_RETENTION_DAYS * 86_400_000);
    return this.#orm.em.fork().nativeDelete(AuditLogEntry, { createdAt: { $lt: cutoff } }, ALL_TENANTS);
  }

  // ---- platform administration (admin CLI and first-start bootstrap; no request scope) ----

  async createOrganization(input: { name: string; plan: Plan; ownerEmail?: string }): Promise<{ organization: Organization; owner: User; testKey: string; liveKey: string }> {
    const em = this.#orm.em.fork();
    return em.transactional(async (tx) => {
      const now = this.#clock.now();
      const organization = tx.create(Organization, { id: newId('org', now.getTime()), name: input.name, plan: input.plan, ipAllowlist: [], createdAt: now, updatedAt: now });
      const email = (input.ownerEmail ?? `owner+${organization.id}@example.invalid`).toLowerCase();
      const owner = (await tx.findOne(User, { email })) ?? tx.create(User, { id: newId('usr', now.getTime()), email, name: null, createdAt: now });
      tx.create(TeamMember, { id: newId('mem', now.getTime()), organizationId: organization.id, userId: owner.id, role: 'owner', createdAt: now, updatedAt: now });
      const test = this.#newKey(tx, organization.id, 'test', 'owner', 'Default test key', 'system');
      const live = this.#newKey(tx, organization.id, 'live', 'owner', 'Default live key', 'system');
      const scope = systemScope(organization.id, 'live', input.plan, newId('req', now.getTime()));
      recordAudit(tx, scope, { action: 'organization.created', resourceType: 'organization', resourceId: organization.id }, now);
      return { organization, owner, testKey: test.key, liveKey: live.key };
    });
  }

  /** `material`: the key's material from its id (the Twilio surface's derived auth tokens), else random. */
  async adminCreateApiKey(organizationId: string, mode: Mode, role: Role, name: string | null, material?: (id: string) => string): Promise<CreatedApiKey> {
    const em = this.#orm.em.fork();
    return em.transactional(async (tx) => {
      const org = await tx.findOne(Organization, { id: organizationId });
      if (!org) throw new ServiceError('TENANT_NOT_FOUND', `Organization ${organizationId} does not exist`);
      const created = this.#newKey(tx, org.id, mode, role, name, 'system', material);
      recordAudit(tx, systemScope(org.id, mode, org.plan, newId('req')), { action: 'api_key.created', resourceType: 'api_key', resourceId: created.apiKey.id, details: { role, mode } }, this.#clock.now());
      return created;
    });
  }

  /** Creates the user if needed and sets their role in the organization (audited when it changes). */
  async adminUpsertMember(organizationId: string, email: string, role: Role): Promise<{ user: User; member: TeamMember; organization: Organization }> {
    const em = this.#orm.em.fork();
    return this.#changingAuth(em, async (tx) => {
      const now = this.#clock.now();
      const organization = await tx.findOne(Organization, { id: organizationId });
      if (!organization) throw new ServiceError('TENANT_NOT_FOUND', `Organization ${organizationId} does not exist`);
      const normalized = email.toLowerCase();
      const user = (await tx.findOne(User, { email: normalized })) ?? tx.create(User, { id: newId('usr', now.getTime()), email: normalized, name: null, createdAt: now });
      let member = await tx.findOne(TeamMember, { organizationId, userId: user.id }, ALL_TENANTS);
      const scope = systemScope(organizationId, 'live', organization.plan, newId('req'));
      if (!member) {
        member = tx.create(TeamMember, { id: newId('mem', now.getTime()), organizationId, userId: user.id, role, createdAt: now, updatedAt: now });
        recordAudit(tx, scope, { action: 'team.member_added', resourceType: 'team_member', resourceId: member.id, details: { role } }, now);
      } else if (member.role !== role) {
        recordAudit(tx, scope, { action: 'team.role_changed', resourceType: 'team_member', resourceId: member.id, details: { from: member.role, to: role } }, now);
        member.role = role;
        member.updatedAt = now;
      }
      return { user, member, organization };
    });
  }

  async countOrganizations(): Promise<number> {
    return this.#orm.em.fork().count(Organization, {});
  }

  #newKey(em: EntityManager, organizationId: string, mode: Mode, role: Role, name: string | null, createdBy: string, material?: (id: string) => string): CreatedApiKey {
    const now = this.#clock.now();
    const id = newId('key', now.getTime());
    const key = material ? material(id) : generateApiKey(mode);
    const apiKey = em.create(ApiKey, {
      id, organizationId, mode, role, name, prefix: keyPrefix(mode), last4: key.slice(-4),
      keyHash: hashApiKey(this.#config.appSecret, key), createdBy, createdAt: now, lastUsedAt: null, revokedAt: null,
    });
    return { apiKey, key };
  }
}

async function readOrganizations(pool: Pool, ids: string[]): Promise<(Organization | null)[]> {
  const { rows } = await pool.query<{ id: string; name: string; plan: Plan; test_plan: Plan; ip_allowlist: string[]; graphql_trusted_documents_only: boolean; created_ms: string; updated_ms: string }>({
    name: 'settings.organizations',
    text: `select id, name, plan, test_plan, ip_allowlist, graphql_trusted_documents_only, (extract(epoch from created_at) * 1000)::bigint as created_ms,
             (extract(epoch from updated_at) * 1000)::bigint as updated_ms
           from organizations where id = any($1::text[])`,
    values: [[...new Set(ids)]],
  });
  const byId = new Map(rows.map((r) => [r.id, {
    id: r.id, name: r.name, plan: r.plan, testPlan: r.test_plan, ipAllowlist: r.ip_allowlist, graphqlTrustedDocumentsOnly: r.graphql_trusted_documents_only, createdAt: new Date(Number(r.created_ms)), updatedAt: new Date(Number(r.updated_ms)),
  } as Organization]));
  return ids.map((id) => byId.get(id) ?? null);
}
