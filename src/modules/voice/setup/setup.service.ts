/**
 * The voice setup of an organization: SIP trunks (credentials sealed at rest, never shown) and
 * IVR flows (menus validated by the schema; targets that must exist are checked in the tenant).
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../../config.ts';
import type { Clock } from '../../../platform/clock.ts';
import { ServiceError, notFound } from '../../../platform/errors.ts';
import { newId } from '../../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../../platform/db/tenant.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../../platform/pagination.ts';
import { Sealer } from '../../../platform/crypto/seal.ts';
import { normalizePhone } from '../../../platform/recipients.ts';
import { IvrFlow, SipTrunk, VoicemailBox } from '../voice.entities.ts';
import type { VoiceAgentsPort } from '../voice.ports.ts';
import { IVR_DEFAULTS, type CreateIvrInput, type CreateTrunkInput, type UpdateIvrInput, type UpdateTrunkInput } from '../voice.schemas.ts';
import type { IvrMenu, IvrOption } from '../voice.states.ts';
import type { TrunkOrder } from '../../../providers/voice/types.ts';
import { sipUriProblem } from '../../../providers/voice/sip/destinations.ts';
import { LOOPBACK_HINT, type UrlPolicy } from '../../../platform/http/safeHttp.ts';

export const DEFAULT_CODECS = ['PCMU', 'PCMA', 'OPUS'];

export class SetupService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #agents: () => VoiceAgentsPort | undefined;
  readonly #sealer: Sealer;
  /** Where a trunk may send calls: the webhooks' outbound address policy. */
  readonly #policy: UrlPolicy;

  constructor(deps: { orm: MikroORM; clock: Clock; config: Config; cursors: CursorCodec; agents: () => VoiceAgentsPort | undefined }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#agents = deps.agents;
    this.#sealer = new Sealer(deps.config.appSecret, 'voice:sip-trunk-password');
    this.#policy = { allowLoopback: deps.config.allowLoopback };
  }

  // ---- SIP trunks ----

  async createTrunk(scope: Scope, input: CreateTrunkInput): Promise<SipTrunk> {
    this.#checkTermination(input.termination_uri);
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(SipTrunk, {
      id: newId('trunk', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, name: input.name, terminationUri: input.termination_uri,
      originationUris: input.origination_uris ?? [], authUsername: input.auth_username ?? null,
      authPasswordSealed: input.auth_password ? this.#sealer.seal(input.auth_password) : null,
      codecs: input.codecs ?? DEFAULT_CODECS, encryption: input.encryption ?? 'tls_srtp', status: 'active', createdAt: now, updatedAt: now,
    }));
  }

  async getTrunk(scope: TenantRef, id: string): Promise<SipTrunk> {
    const trunk = await tenantEm(this.#orm, scope).findOne(SipTrunk, { id });
    if (!trunk) throw notFound('SIP trunk', id);
    return trunk;
  }

  listTrunks(scope: TenantRef, req: PageRequest): Promise<Page<SipTrunk>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), SipTrunk, scope, { list: 'sip_trunks' }, req);
  }

  /** PUT: fields sent replace the stored ones; `auth_password: null` removes the credentials' password. */
  async updateTrunk(scope: Scope, input: UpdateTrunkInput): Promise<SipTrunk> {
    if (input.termination_uri !== undefined) this.#checkTermination(input.termination_uri);
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const t = await tx.findOne(SipTrunk, { id: input.id });
      if (!t) throw notFound('SIP trunk', input.id);
      if (input.name !== undefined) t.name = input.name;
      if (input.termination_uri !== undefined) t.terminationUri = input.termination_uri;
      if (input.origination_uris !== undefined) t.originationUris = input.origination_uris ?? [];
      if (input.auth_username !== undefined) t.authUsername = input.auth_username;
      if (input.auth_password !== undefined) t.authPasswordSealed = input.auth_password ? this.#sealer.seal(input.auth_password) : null;
      if (input.codecs !== undefined) t.codecs = input.codecs ?? DEFAULT_CODECS;
      if (input.encryption !== undefined) t.encryption = input.encryption ?? 'tls_srtp';
      t.updatedAt = this.#clock.now();
      return t;
    });
  }

  async deleteTrunk(scope: Scope, id: string): Promise<void> {
    const removed = await tenantEm(this.#orm, scope).nativeDelete(SipTrunk, { id });
    if (!removed) throw notFound('SIP trunk', id);
  }

  /**
   * The gateway sends calls to the termination URI: its host must pass the outbound address policy
   * (a literal address that is loopback, private, link-local or reserved, or a local name, is
   * refused; a name is resolved and checked again when a call connects). 422 naming the field.
   */
  #checkTermination(uri: string): void {
    const problem = sipUriProblem(uri, this.#policy);
    if (!problem) return;
    const hint = problem.loopback && !this.#policy.allowLoopback ? { allow_loopback: LOOPBACK_HINT.allow_loopback } : {};
    throw new ServiceError('VALIDATION_ERROR', `termination_uri is not allowed: ${problem.reason}`, { field: 'termination_uri', value: uri, reason: problem.blocked ? 'blocked_address' : 'invalid_host', ...hint });
  }

  /**
   * The trunk live calls go out on: the organization's oldest one (the spec's call has no trunk
   * field; with several, the first one added carries the calls). Its password in clear, for the
   * gateway's digest answers only.
   */
  async callTrunk(scope: TenantRef): Promise<TrunkOrder | null> {
    const [trunk] = await tenantEm(this.#orm, scope).find(SipTrunk, {}, { orderBy: { id: 'asc' }, limit: 1 });
    if (!trunk) return null;
    return { uri: trunk.terminationUri, username: trunk.authUsername ?? null, password: this.trunkPassword(trunk), encryption: trunk.encryption, codecs: trunk.codecs };
  }

  /** The trunk's password in clear, for the SIP gateway's digest authentication only. */
  trunkPassword(trunk: SipTrunk): string | null {
    return trunk.authPasswordSealed ? this.#sealer.open(trunk.authPasswordSealed) : null;
  }

  // ---- IVR flows ----

  async createIvr(scope: Scope, input: CreateIvrInput): Promise<IvrFlow> {
    const menu = input.menu as IvrMenu;
    const fallbackAction = input.fallback_action ?? IVR_DEFAULTS.fallbackAction;
    await this.#checkTargets(scope, menu, fallbackAction, input.fallback_target ?? null);
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => tx.create(IvrFlow, {
      id: newId('ivr', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, name: input.name, greeting: input.greeting,
      language: input.language ?? IVR_DEFAULTS.language, menu, timeoutSeconds: input.timeout_seconds ?? IVR_DEFAULTS.timeoutSeconds,
      maxRetries: input.max_retries ?? IVR_DEFAULTS.maxRetries, fallbackAction, fallbackTarget: input.fallback_target ?? null,
      status: 'active', createdAt: now, updatedAt: now,
    }));
  }

  async getIvr(scope: TenantRef, id: string): Promise<IvrFlow> {
    const flow = await tenantEm(this.#orm, scope).findOne(IvrFlow, { id });
    if (!flow) throw notFound('IVR flow', id);
    return flow;
  }

  listIvr(scope: TenantRef, req: PageRequest): Promise<Page<IvrFlow>> {
    return this.#cursors.findPage(tenantEm(this.#orm, scope), IvrFlow, scope, { list: 'ivr_flows' }, req);
  }

  async updateIvr(scope: Scope, input: UpdateIvrInput): Promise<IvrFlow> {
    const current = await this.getIvr(scope, input.id);
    const menu = (input.menu ?? current.menu) as IvrMenu;
    const fallbackAction = input.fallback_action ?? current.fallbackAction;
    const fallbackTarget = input.fallback_target !== undefined ? input.fallback_target : current.fallbackTarget;
    await this.#checkTargets(scope, menu, fallbackAction, fallbackTarget ?? null);
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const f = await tx.findOne(IvrFlow, { id: input.id });
      if (!f) throw notFound('IVR flow', input.id);
      if (input.name) f.name = input.name;
      if (input.greeting) f.greeting = input.greeting;
      if (input.language !== undefined) f.language = input.language ?? IVR_DEFAULTS.language;
      f.menu = menu;
      if (input.timeout_seconds !== undefined) f.timeoutSeconds = input.timeout_seconds ?? IVR_DEFAULTS.timeoutSeconds;
      if (input.max_retries !== undefined) f.maxRetries = input.max_retries ?? IVR_DEFAULTS.maxRetries;
      f.fallbackAction = fallbackAction;
      f.fallbackTarget = fallbackTarget ?? null;
      f.updatedAt = this.#clock.now();
      return f;
    });
  }

  async deleteIvr(scope: Scope, id: string): Promise<void> {
    const removed = await tenantEm(this.#orm, scope).nativeDelete(IvrFlow, { id });
    if (!removed) throw notFound('IVR flow', id);
  }

  /**
   * Targets that must exist: voicemail boxes and agents in this tenant (404 naming the option),
   * numbers in E.164 (422). A voicemail fallback needs a box (its target, or a voicemail option's).
   */
  async #checkTargets(scope: TenantRef, menu: IvrMenu, fallbackAction: string, fallbackTarget: string | null): Promise<void> {
    const em = tenantEm(this.#orm, scope);
    const visit = async (m: IvrMenu, path: string): Promise<void> => {
      for (const [i, o] of m.options.entries()) {
        await this.#checkTarget(em, scope, o, `${path}options.${i}.target`);
        if (o.menu) await visit(o.menu, `${path}options.${i}.menu.`);
      }
    };
    await visit(menu, 'menu.');
    if (fallbackAction === 'transfer_number') {
      if (!fallbackTarget) throw new ServiceError('MISSING_REQUIRED_FIELD', 'fallback_action transfer_number needs fallback_target (E.164)', { field: 'fallback_target' });
      await this.#checkTarget(em, scope, { key: '', action: 'transfer_number', target: fallbackTarget }, 'fallback_target');
    } else if (fallbackAction === 'voicemail' && fallbackTarget) {
      await this.#checkTarget(em, scope, { key: '', action: 'voicemail', target: fallbackTarget }, 'fallback_target');
    } else if (fallbackAction === 'hangup' && fallbackTarget) {
      throw new ServiceError('VALIDATION_ERROR', 'fallback_action hangup takes no fallback_target', { field: 'fallback_target' });
    }
  }

  async #checkTarget(em: ReturnType<typeof tenantEm>, scope: TenantRef, o: IvrOption, field: string): Promise<void> {
    if (!o.target) return;
    if (o.action === 'voicemail' && !(await em.findOne(VoicemailBox, { id: o.target }, { fields: ['id'] }))) {
      throw new ServiceError('NOT_FOUND', `Voicemail box ${o.target} not found`, { field, id: o.target });
    }
    if (o.action === 'transfer_agent') {
      const agents = this.#agents();
      if (!agents || !(await agents.exists(scope, o.target))) throw new ServiceError('NOT_FOUND', `Agent ${o.target} not found`, { field, id: o.target });
    }
    if (o.action === 'transfer_number') {
      const e164 = normalizePhone(o.target);
      if (!e164) throw new ServiceError('INVALID_PHONE_NUMBER', `${o.target} is not a valid E.164 number`, { field, value: o.target });
      o.target = e164;
    }
  }
}
