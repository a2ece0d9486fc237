/**
 * HIPAA mode: the organization's settings (mode, BAA, retention, compliance officer, PHI metadata
 * keys), who may see PHI, the PHI access log, and the key ring. Offers the `phi` port the storing
 * contexts seal, open, redact, purge and backfill their PHI through (see platform/phi.ts).
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Pool } from 'pg';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { recordAudit } from '../../platform/audit/audit.ts';
import type { CursorCodec, Page, PageRequest } from '../../platform/pagination.ts';
import type { PhiAccess, PhiPort } from '../../platform/phi.ts';
import { HipaaSettings, PhiAccessLogEntry, type BaaStatus, type ComplianceOfficer } from './hipaa.entities.ts';
import type { KeyRing } from './hipaa.keys.ts';

export const DEFAULT_RETENTION_DAYS = 365;
/** Plans HIPAA mode is offered on. */
export const HIPAA_PLANS = ['business', 'enterprise'] as const;

export type HipaaUpdate = {
  enabled?: boolean | null;
  retention_days?: number | null;
  compliance_officer?: ComplianceOfficer | null;
  phi_metadata_fields?: string[] | null;
};
export type BaaUpdate = { status: BaaStatus; signed_date?: string | null; document_url?: string | null };

/** What an instance knows of an organization's HIPAA mode (cached `modeCacheMs`). */
type ModeView = { enabled: boolean; phiKeys: readonly string[]; retentionDays: number };
const OFF: ModeView = { enabled: false, phiKeys: ['*'], retentionDays: DEFAULT_RETENTION_DAYS };

const phiKeyTest = (keys: readonly string[]) => (key: string) => keys.includes('*') || keys.includes(key);

export class HipaaService {
  readonly #orm: MikroORM;
  readonly #pool: Pool;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #keys: KeyRing;
  readonly #cacheMs: number;
  readonly #modes = new Map<string, { at: number; view: Promise<ModeView> }>();

  constructor(deps: { orm: MikroORM; pool: Pool; clock: Clock; cursors: CursorCodec; keys: KeyRing; modeCacheMs: number }) {
    this.#orm = deps.orm;
    this.#pool = deps.pool;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#keys = deps.keys;
    this.#cacheMs = deps.modeCacheMs;
  }

  // ---- settings ----

  async get(scope: Scope): Promise<HipaaSettings> {
    return (await tenantEm(this.#orm, scope).findOne(HipaaSettings, { organizationId: scope.organizationId })) ?? this.#defaults(scope.organizationId);
  }

  /**
   * Enables or disables HIPAA mode and sets retention, the compliance officer and the PHI metadata
   * keys. Enabling needs a signed BAA (403 FORBIDDEN), a Business or Enterprise plan (403 FORBIDDEN)
   * and a compliance officer (422 VALIDATION_ERROR). Only a credential that may govern live data
   * (see {@link assertGovernsLive}). Audited with the credential.
   */
  async update(scope: Scope, input: HipaaUpdate): Promise<HipaaSettings> {
    assertGovernsLive(scope);
    const now = this.#clock.now();
    const saved = await tenantEm(this.#orm, scope).transactional(async (tx) => {
      await this.#ensureRow(tx.getConnection(), tx.getTransactionContext(), scope.organizationId);
      const s = await tx.findOneOrFail(HipaaSettings, { organizationId: scope.organizationId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      const before = snapshot(s);
      if (input.retention_days != null) s.retentionDays = input.retention_days;
      if (input.compliance_officer !== undefined) s.complianceOfficer = input.compliance_officer;
      if (input.phi_metadata_fields != null) s.phiMetadataFields = [...new Set(input.phi_metadata_fields)];
      if (input.enabled === true && !s.enabled) {
        if (s.baaStatus !== 'signed') {
          throw new ServiceError('FORBIDDEN', 'HIPAA mode needs a signed Business Associate Agreement (PUT /v1/settings/hipaa/baa)', { reason: 'baa_not_signed' });
        }
        if (!(HIPAA_PLANS as readonly string[]).includes(scope.plan)) {
          throw new ServiceError('FORBIDDEN', 'HIPAA mode is available on the Business and Enterprise plans', { reason: 'plan', plan: scope.plan, required_plans: HIPAA_PLANS });
        }
        if (!s.complianceOfficer) {
          throw new ServiceError('VALIDATION_ERROR', 'HIPAA mode needs a designated compliance officer', { field: 'compliance_officer' });
        }
        s.enabled = true;
        s.enabledAt = now;
      } else if (input.enabled === false && s.enabled) {
        s.enabled = false;
      }
      s.updatedAt = now;
      const after = snapshot(s);
      const action = before.enabled !== after.enabled ? (after.enabled ? 'hipaa.enabled' : 'hipaa.disabled') : 'hipaa.updated';
      recordAudit(tx, scope, { action, resourceType: 'organization', resourceId: scope.organizationId, details: { before, after, credential: credentialOf(scope) } }, now);
      return s;
    });
    this.#forget(scope.organizationId);
    return saved;
  }

  /** Records the BAA's status, signed date and document. Only a credential that may govern live data. Audited with the credential. */
  async updateBaa(scope: Scope, input: BaaUpdate): Promise<HipaaSettings> {
    assertGovernsLive(scope);
    const now = this.#clock.now();
    const saved = await tenantEm(this.#orm, scope).transactional(async (tx) => {
      await this.#ensureRow(tx.getConnection(), tx.getTransactionContext(), scope.organizationId);
      const s = await tx.findOneOrFail(HipaaSettings, { organizationId: scope.organizationId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      const before = { status: s.baaStatus, signed_date: s.baaSignedAt?.toISOString() ?? null, document_url: s.baaDocumentUrl };
      if (input.status === 'signed' && !input.signed_date && !s.baaSignedAt) {
        throw new ServiceError('MISSING_REQUIRED_FIELD', 'signed_date is required when the BAA is signed', { field: 'signed_date' });
      }
      if (input.status === 'not_signed' && s.enabled) {
        throw new ServiceError('CONFLICT', 'Disable HIPAA mode before marking the BAA not signed', { field: 'status' });
      }
      s.baaStatus = input.status;
      if (input.status === 'signed') {
        if (input.signed_date) s.baaSignedAt = new Date(input.signed_date);
      } else {
        s.baaSignedAt = null;
      }
      if (input.document_url !== undefined) s.baaDocumentUrl = input.document_url;
      s.updatedAt = now;
      const after = { status: s.baaStatus, signed_date: s.baaSignedAt?.toISOString() ?? null, document_url: s.baaDocumentUrl };
      recordAudit(tx, scope, { action: 'hipaa.baa_updated', resourceType: 'organization', resourceId: scope.organizationId, details: { before, after, credential: credentialOf(scope) } }, now);
      return s;
    });
    this.#forget(scope.organizationId);
    return saved;
  }

  async listAccessLog(scope: Scope, page: PageRequest): Promise<Page<PhiAccessLogEntry>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), PhiAccessLogEntry, scope, { list: 'phi_access_log' }, page);
  }

  // ---- the phi port ----

  port(): PhiPort {
    return {
      writer: async (organizationId) => {
        const view = await this.#mode(organizationId);
        if (!view.enabled) return null;
        return (await this.#keys.keysFor(organizationId)).codec(phiKeyTest(view.phiKeys));
      },
      codec: async (organizationId, sealed = []) => {
        const [view, keys] = await Promise.all([this.#mode(organizationId), this.#keys.keysFor(organizationId, sealed)]);
        return keys.codec(phiKeyTest(view.phiKeys));
      },
      access: (scope) => this.#access(scope),
      retention: async () => {
        const { rows } = await this.#pool.query<{ organization_id: string; retention_days: number }>(
          'select organization_id, retention_days from hipaa_settings where enabled');
        const now = this.#clock.now().getTime();
        return rows.map((r) => ({ organizationId: r.organization_id, cutoff: new Date(now - r.retention_days * 86_400_000) }));
      },
      backfillPending: async (table) => {
        // Rows written before an instance saw the mode change (its cache) are covered by a margin.
        const { rows } = await this.#pool.query<{ organization_id: string; until: Date }>(
          `select organization_id, enabled_at + make_interval(secs => $2::float8 / 1000 + 60) as until from hipaa_settings
            where enabled and coalesce((backfilled->>$1)::timestamptz, '-infinity') < enabled_at`, [table, this.#cacheMs]);
        return rows.map((r) => ({ organizationId: r.organization_id, until: r.until }));
      },
      backfillDone: async (organizationId, table, until) => {
        await this.#pool.query(
          `update hipaa_settings set backfilled = backfilled || jsonb_build_object($2::text, $3::timestamptz) where organization_id = $1`,
          [organizationId, table, until]);
      },
    };
  }

  async #access(scope: Scope): Promise<PhiAccess> {
    const view = await this.#mode(scope.organizationId);
    const isPhiKey = phiKeyTest(view.phiKeys);
    const system = scope.actor.type === 'system';
    const granted = !view.enabled || system || scope.role === 'owner' || scope.role === 'admin' || (scope.role === 'developer' && scope.phiReason !== undefined);
    return {
      hipaa: view.enabled,
      granted,
      isPhiKey,
      record: async (entry) => {
        if (!view.enabled || system || !granted || entry.resourceIds.length === 0) return;
        await this.#pool.query(
          `insert into phi_access_log (id, organization_id, mode, actor_type, actor_id, role, reason, resource_type, resource_ids, fields, operation, ip, request_id, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
          [newId('phi', this.#clock.now().getTime()), scope.organizationId, scope.mode, scope.actor.type, scope.actor.id, scope.role, scope.phiReason ?? null,
            entry.resourceType, JSON.stringify(entry.resourceIds), JSON.stringify(entry.fields), entry.operation, scope.ip ?? null, scope.requestId, this.#clock.now()]);
      },
    };
  }

  /** The organization's mode as this instance sees it (at most `modeCacheMs` old). */
  #mode(organizationId: string): Promise<ModeView> {
    const now = Date.now();
    const hit = this.#modes.get(organizationId);
    if (hit && now - hit.at <= this.#cacheMs) return hit.view;
    const view = this.#pool.query<{ enabled: boolean; phi_metadata_fields: string[]; retention_days: number }>(
      'select enabled, phi_metadata_fields, retention_days from hipaa_settings where organization_id = $1', [organizationId],
    ).then(({ rows }) => (rows[0] ? { enabled: rows[0].enabled, phiKeys: rows[0].phi_metadata_fields, retentionDays: rows[0].retention_days } : OFF));
    view.catch(() => this.#modes.delete(organizationId));
    if (this.#cacheMs > 0) this.#modes.set(organizationId, { at: now, view });
    return view;
  }

  #forget(organizationId: string): void {
    this.#modes.delete(organizationId);
  }

  async #ensureRow(conn: { execute: (sql: string, params: unknown[], method: 'run', ctx?: unknown) => Promise<unknown> }, ctx: unknown, organizationId: string): Promise<void> {
    const now = this.#clock.now();
    await conn.execute(
      `insert into hipaa_settings (organization_id, enabled, baa_status, retention_days, phi_metadata_fields, created_at, updated_at)
       values (?, false, 'not_signed', ?, '["*"]', ?, ?) on conflict do nothing`,
      [organizationId, DEFAULT_RETENTION_DAYS, now, now], 'run', ctx);
  }

  #defaults(organizationId: string): HipaaSettings {
    const now = this.#clock.now();
    return {
      organizationId, enabled: false, baaStatus: 'not_signed', baaSignedAt: null, baaDocumentUrl: null, retentionDays: DEFAULT_RETENTION_DAYS,
      complianceOfficer: null, phiMetadataFields: ['*'], enabledAt: null, createdAt: now, updatedAt: now,
    };
  }
}

/**
 * The HIPAA settings are the organization's, one row for both modes, and govern its live data: a
 * test-mode API key (made for trying the API out, often shared with test tooling) may not change
 * them (403 FORBIDDEN, `details.reason` `test_mode_key`). A live-mode key, a dashboard user's bearer
 * token (the role check already asked for an owner) and the platform itself may.
 */
function assertGovernsLive(scope: Scope): void {
  if (scope.actor.type === 'api_key' && scope.mode !== 'live') {
    throw new ServiceError('FORBIDDEN', 'HIPAA settings govern live data: change them with a live-mode API key or a dashboard user\'s bearer token',
      { reason: 'test_mode_key', mode: scope.mode });
  }
}

/** Who made a change, for its audit entry: the API key's id or the user's id (and their session), and the credential's mode. */
function credentialOf(scope: Scope): Record<string, unknown> {
  const a = scope.actor;
  return { type: a.type, id: a.id, mode: scope.mode, ...(a.type === 'user' ? { email: a.email, session_id: a.sessionId ?? null } : {}) };
}

function snapshot(s: HipaaSettings): Record<string, unknown> {
  return {
    enabled: s.enabled, retention_days: s.retentionDays, compliance_officer: s.complianceOfficer, phi_metadata_fields: s.phiMetadataFields,
  };
}
