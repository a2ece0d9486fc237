/**
 * Numbers context: searches a carrier's inventory, buys, configures and releases numbers, ports
 * numbers in, and bills each held number monthly. A number has one holder across the platform
 * (every organization and mode): the unique index `phone_numbers_holder_idx` over rows that hold
 * it (`porting` or `active`) decides concurrent purchases and ports, and releasing frees it.
 * Owned numbers become messaging senders through the numberSenders port (messaging's SenderDirectory), inside the same
 * transaction; changes emit `number.*` and `port.*` events through the outbox.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { LockMode, UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { validateLimit, type CursorCodec, type Page } from '../../platform/pagination.ts';
import { recordUsage } from '../../platform/usage/usage.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import { emitEvent, type EventType } from '../../platform/events/events.ts';
import { checkWebhookUrl, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Channel } from '../../providers/messaging/types.ts';
import type { NumberSendersPort } from '../messaging/messaging.ports.ts';
import type { AgentTurnsPort } from '../agents/agents.ports.ts';
import type { AvailableNumber, NumberCapability, NumbersProvider, NumbersProviders, PortOrder } from '../../providers/numbers/types.ts';
import { addBusinessDays, addMonths } from './numbers.calendar.ts';
import { HOLDING_STATUSES, PhoneNumber, PortRequest } from './numbers.entities.ts';
import type { BuyNumberInput, CreatePortInput, ListNumbersInput, ListPortsInput, SearchNumbersInput, UpdateNumberInput, VoiceRoute } from './numbers.schemas.ts';
import type { VoiceRouteTargetsPort } from '../voice/voice.ports.ts';

export const PORT_SUBMIT_JOB = 'numbers.port-submit';
export const PORT_CHECK_JOB = 'numbers.port-check';
export const RENEW_JOB = 'numbers.renew';

/** What a port request's `estimated_completion` promises: the spec's "typically 7-14 business days", midpoint. */
export const PORT_BUSINESS_DAYS = 10;

/** Usage kind of one month of a held number. */
export const MONTHLY_USAGE_KIND = 'number.monthly';

/** The numberSenders port's hooks (messaging's SenderDirectory), run inside our transaction. */

type NumberRecord = Omit<PhoneNumber, 'id' | 'organizationId' | 'mode'>;

export class NumbersService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #config: Config;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #providers: NumbersProviders;
  readonly #senders: NumberSendersPort;
  readonly #policy: UrlPolicy;
  readonly #pins: Sealer;
  readonly #agents: () => Pick<AgentTurnsPort, 'agentExists'> | undefined;
  readonly #routes: () => VoiceRouteTargetsPort | undefined;

  constructor(deps: {
    orm: MikroORM; clock: Clock; config: Config; cursors: CursorCodec; jobs: Pick<Jobs, 'enqueue'>; providers: NumbersProviders; senders: NumberSendersPort;
    /** The agents a number may answer with (port `agentTurns`; without the agents module, none). */
    agents: () => Pick<AgentTurnsPort, 'agentExists'> | undefined;
    /** The IVR flows and voicemail boxes a voice_route may name (port `voiceRouteTargets`; without the voice module, none). */
    routes?: () => VoiceRouteTargetsPort | undefined;
  }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#config = deps.config;
    this.#cursors = deps.cursors;
    this.#jobs = deps.jobs;
    this.#providers = deps.providers;
    this.#senders = deps.senders;
    this.#policy = { allowLoopback: deps.config.allowLoopback };
    this.#pins = new Sealer(deps.config.appSecret, 'numbers:port-pin');
    this.#agents = deps.agents;
    this.#routes = deps.routes ?? (() => undefined);
  }

  /**
   * `agent_id` names an agent of the caller's organization and mode (any status): else 404
   * NOT_FOUND (`details.field` `agent_id`), like any id the caller does not hold.
   */
  async #checkAgent(scope: Scope, agentId: string | null | undefined): Promise<void> {
    if (agentId == null) return;
    if (await this.#agents()?.agentExists(scope, agentId)) return;
    throw new ServiceError('NOT_FOUND', `Agent ${agentId} not found`, { field: 'agent_id', id: agentId });
  }

  /**
   * A `voice_route`'s IVR flow or voicemail box is one of the caller's organization and mode: else
   * 404 NOT_FOUND (`details.field` `voice_route`). Without the voice module, none exists.
   */
  async #checkRoute(scope: Scope, route: VoiceRoute | null | undefined): Promise<void> {
    if (route == null || route.type === 'forward') return;
    const [id, what] = route.type === 'ivr' ? [route.ivr_id, 'IVR flow'] : [route.voicemail_id, 'Voicemail box'];
    if (await this.#routes()?.routeTargetExists(scope, route.type, id)) return;
    throw new ServiceError('NOT_FOUND', `${what} ${id} not found`, { field: 'voice_route', id });
  }

  #provider(scope: TenantRef): NumbersProvider {
    const provider = this.#providers.forMode(scope.mode);
    if (!provider) {
      throw new ServiceError('CHANNEL_UNAVAILABLE', `No phone-number carrier is configured in ${scope.mode} mode; use a test-mode key for the sandbox inventory`, { service: 'numbers', mode: scope.mode });
    }
    return provider;
  }

  // ---- search ----

  async search(scope: Scope, input: SearchNumbersInput): Promise<AvailableNumber[]> {
    const limit = validateLimit(input.limit);
    const provider = this.#provider(scope);
    return provider.search(
      { country: input.country, type: input.type ?? undefined, capabilities: input.capabilities ?? undefined, areaCode: input.area_code ?? undefined, contains: input.contains ?? undefined, limit },
      (numbers) => this.#held(numbers),
    );
  }

  /** Numbers among these that someone holds (owned or being ported), across all tenants. */
  async #held(numbers: string[]): Promise<ReadonlySet<string>> {
    if (!numbers.length) return new Set();
    const rows = await this.#orm.em.fork().find(PhoneNumber, { number: { $in: numbers }, status: { $in: [...HOLDING_STATUSES] } }, { ...ALL_TENANTS, fields: ['number'] });
    return new Set(rows.map((r) => r.number));
  }

  // ---- buying ----

  async buy(scope: Scope, input: BuyNumberInput): Promise<PhoneNumber> {
    const provider = this.#provider(scope);
    const smsWebhookUrl = this.#url(input.sms_webhook_url, 'sms_webhook_url');
    const voiceWebhookUrl = this.#url(input.voice_webhook_url, 'voice_webhook_url');
    await this.#checkAgent(scope, input.agent_id);
    const listing = await provider.lookup(input.number);
    if (!listing) {
      throw new ServiceError('NUMBER_NOT_AVAILABLE', `${input.number} is not available from the ${provider.name} inventory; pick a number from GET /v1/numbers/available`, { field: 'number', number: input.number, reason: 'not_in_inventory' });
    }
    await this.#refuseIfHeld(scope, input.number, 'number');
    const now = this.#clock.now();
    try {
      return await tenantEm(this.#orm, scope).transactional(async (tx) => {
        const n = this.#newRow(tx, scope, listing, provider, now, {
          status: 'active', source: 'purchased', portRequestId: null, friendlyName: input.friendly_name ?? listing.friendlyName,
          smsWebhookUrl, voiceWebhookUrl, agentId: input.agent_id ?? null, voiceRoute: null,
        });
        // The unique index decides here: a concurrent purchase of the same number fails this flush.
        await tx.flush();
        // The carrier is asked inside the transaction: if it refuses, the claim rolls back with it.
        n.providerReference = (await provider.provision(n.number, n.id)).reference;
        await this.#activate(tx, scope, n, now);
        this.#emitNumber(tx, n, 'number.purchased', now);
        return n;
      });
    } catch (e) {
      if (isUniqueViolation(e)) {
        await this.#refuseIfHeld(scope, input.number, 'number');
        throw new ServiceError('NUMBER_NOT_AVAILABLE', `${input.number} was just claimed; search again`, { field: 'number', number: input.number });
      }
      throw e;
    }
  }

  /** A new row for a listing: `active` (a purchase; #activate bills it) or `porting` (held for a port request). */
  #newRow(tx: EntityManager, scope: TenantRef, listing: AvailableNumber, provider: NumbersProvider, now: Date,
    fields: Pick<NumberRecord, 'status' | 'source' | 'portRequestId' | 'friendlyName' | 'smsWebhookUrl' | 'voiceWebhookUrl' | 'agentId' | 'voiceRoute'>): PhoneNumber {
    return tx.create(PhoneNumber, {
      id: newId('num', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, number: listing.number, country: listing.country,
      type: listing.type, region: listing.region, capabilities: listing.capabilities, monthlyCost: listing.monthlyCost, currency: listing.currency,
      provider: provider.name, providerReference: null, billingAnchorAt: null, billingPeriodStart: null, billingPeriodEnd: null, billingCycles: 0,
      releasedAt: null, billingEndsAt: null, sequence: 1, createdAt: now, updatedAt: now, ...fields,
    });
  }

  /** A number joining the inventory: its first month is billed and it becomes a sender where it can message. */
  async #activate(tx: EntityManager, tenant: TenantRef, n: PhoneNumber, now: Date): Promise<void> {
    n.billingAnchorAt = now;
    n.billingPeriodStart = now;
    n.billingPeriodEnd = addMonths(now, 1);
    n.billingCycles = 1;
    await recordUsage(tx, tenant, { context: 'numbers', kind: MONTHLY_USAGE_KIND, quantity: 1, resourceId: n.id, idempotencyKey: monthlyKey(n.id, 1) }, now);
    const channels = senderChannels(n.capabilities);
    if (channels.length) await this.#senders.attachNumberSender(tx, tenant, n.number, channels);
  }

  /** Throws the right 409 when someone holds the number: this account (same or other mode), or another customer. */
  async #refuseIfHeld(scope: Scope, number: string, field: string): Promise<void> {
    const holder = await this.#orm.em.fork().findOne(PhoneNumber, { number, status: { $in: [...HOLDING_STATUSES] } }, ALL_TENANTS);
    if (!holder) return;
    if (holder.organizationId !== scope.organizationId) {
      throw new ServiceError('NUMBER_NOT_AVAILABLE', `${number} is held by another customer`, { field, number });
    }
    if (holder.status === 'porting') {
      throw new ServiceError('CONFLICT', `${number} is already being ported into this account`, { field, number, port_request_id: holder.portRequestId, mode: holder.mode });
    }
    throw new ServiceError('NUMBER_ALREADY_OWNED', holder.mode === scope.mode ? `${number} is already on this account` : `${number} is already on this account in ${holder.mode} mode`,
      { field, number, mode: holder.mode, ...(holder.mode === scope.mode ? { id: holder.id } : {}) });
  }

  #url(value: string | null | undefined, field: string): string | null {
    if (value === undefined || value === null) return null;
    const checked = checkWebhookUrl(value, this.#policy);
    if (!checked.ok) throw new ServiceError('INVALID_WEBHOOK_URL', `${field} is not allowed: ${checked.reason}`, { field, value, ...checked.details });
    return checked.url.toString();
  }

  // ---- owned numbers ----

  async list(scope: Scope, input: ListNumbersInput): Promise<Page<PhoneNumber>> {
    const filters = { country: input.country ?? null, capabilities: input.capabilities?.length ? input.capabilities : null };
    const where: Record<string, unknown> = { status: 'active' };
    if (filters.country) where.country = filters.country;
    if (filters.capabilities) where.capabilities = { $contains: filters.capabilities };
    return this.#cursors.findPage(tenantEm(this.#orm, scope), PhoneNumber, scope, { list: 'phone_numbers', filters }, input, where);
  }

  async get(scope: Scope, id: string): Promise<PhoneNumber> {
    const n = await tenantEm(this.#orm, scope).findOne(PhoneNumber, { id, status: 'active' });
    if (!n) throw notFound('Phone number', id);
    return n;
  }

  async update(scope: Scope, id: string, patch: UpdateNumberInput): Promise<PhoneNumber> {
    const sms = patch.sms_webhook_url === undefined ? undefined : this.#url(patch.sms_webhook_url, 'sms_webhook_url');
    const voice = patch.voice_webhook_url === undefined ? undefined : this.#url(patch.voice_webhook_url, 'voice_webhook_url');
    const now = this.#clock.now();
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      const n = await tx.findOne(PhoneNumber, { id, status: 'active' }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!n) throw notFound('Phone number', id);
      await this.#checkAgent(scope, patch.agent_id);
      await this.#checkRoute(scope, patch.voice_route);
      if (patch.friendly_name !== undefined) n.friendlyName = patch.friendly_name ?? defaultFriendlyName(n.number);
      if (sms !== undefined) n.smsWebhookUrl = sms;
      if (voice !== undefined) n.voiceWebhookUrl = voice;
      if (patch.agent_id !== undefined) n.agentId = patch.agent_id;
      if (patch.voice_route !== undefined) n.voiceRoute = patch.voice_route;
      n.sequence += 1;
      n.updatedAt = now;
      this.#emitNumber(tx, n, 'number.updated', now);
      return n;
    });
  }

  /** Releases at once (the number leaves the inventory and may be bought by anyone); billing runs to the end of the current cycle. */
  async release(scope: Scope, id: string): Promise<void> {
    const now = this.#clock.now();
    await tenantEm(this.#orm, scope).transactional(async (tx) => {
      const n = await tx.findOne(PhoneNumber, { id, status: 'active' }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!n) throw notFound('Phone number', id);
      await this.#providers.forMode(scope.mode)?.release(n.number, n.providerReference ?? null);
      n.status = 'released';
      n.releasedAt = now;
      n.billingEndsAt = n.billingPeriodEnd ?? now;
      n.sequence += 1;
      n.updatedAt = now;
      await this.#senders.detachNumberSender(tx, scope, n.number);
      this.#emitNumber(tx, n, 'number.released', now);
    });
  }

  /** Messaging's inbound hook: the sms_webhook_url of the active number receiving an SMS or WhatsApp message. */
  async inboundWebhookUrl(tenant: TenantRef, channel: Channel, to: string): Promise<string | null> {
    if (channel !== 'sms' && channel !== 'whatsapp') return null;
    const n = await tenantEm(this.#orm, tenant).findOne(PhoneNumber, { number: to, status: 'active' });
    return n?.smsWebhookUrl ?? null;
  }

  // ---- monthly billing ----

  /**
   * Records the next month of every active number whose cycle has ended (the scheduled renewal
   * job); catches up on missed cycles. Each cycle is one `number.monthly` usage entry keyed by
   * number and cycle, so a job that runs twice bills once. Released numbers are not renewed.
   */
  async renewDue(limit = 500): Promise<number> {
    const now = this.#clock.now();
    const due = await this.#orm.em.fork().find(PhoneNumber, { status: 'active', billingPeriodEnd: { $lte: now } }, { ...ALL_TENANTS, orderBy: { billingPeriodEnd: 'asc' }, limit });
    let renewed = 0;
    for (const candidate of due) {
      const tenant = { organizationId: candidate.organizationId, mode: candidate.mode };
      await tenantEm(this.#orm, tenant).transactional(async (tx) => {
        const n = await tx.findOne(PhoneNumber, { id: candidate.id, status: 'active' }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        if (!n || !n.billingAnchorAt || !n.billingPeriodEnd) return;
        while (n.billingPeriodEnd! <= now) {
          n.billingCycles += 1;
          n.billingPeriodStart = n.billingPeriodEnd;
          n.billingPeriodEnd = addMonths(n.billingAnchorAt, n.billingCycles);
          await recordUsage(tx, tenant, { context: 'numbers', kind: MONTHLY_USAGE_KIND, quantity: 1, resourceId: n.id, idempotencyKey: monthlyKey(n.id, n.billingCycles) }, now);
          renewed++;
        }
      });
    }
    return renewed;
  }

  // ---- porting ----

  async createPort(scope: Scope, input: CreatePortInput): Promise<PortRequest> {
    const provider = this.#provider(scope);
    const listings: AvailableNumber[] = [];
    for (const [i, number] of input.numbers.entries()) {
      const listing = await provider.portable(number);
      if (!listing) {
        throw new ServiceError('PORT_REQUEST_FAILED', `${number} cannot be ported in: it is not a local, mobile or toll-free number this carrier can host`, { field: `numbers.${i}`, number, reason: 'not_portable' });
      }
      listings.push(listing);
    }
    for (const [i, number] of input.numbers.entries()) await this.#refuseIfHeld(scope, number, `numbers.${i}`);
    const now = this.#clock.now();
    const portId = newId('port', now.getTime());
    try {
      return await tenantEm(this.#orm, scope).transactional(async (tx) => {
        const rows = listings.map((listing) => this.#newRow(tx, scope, listing, provider, now, {
          status: 'porting', source: 'ported', portRequestId: portId, friendlyName: listing.friendlyName, smsWebhookUrl: null, voiceWebhookUrl: null, agentId: null, voiceRoute: null,
        }));
        const port = tx.create(PortRequest, {
          id: portId, organizationId: scope.organizationId, mode: scope.mode, numbers: input.numbers, phoneNumberIds: rows.map((r) => r.id),
          status: 'pending', currentCarrier: input.current_carrier, authorizationName: input.authorization_name,
          accountNumber: input.account_number ?? null, pinSealed: input.pin ? this.#pins.seal(input.pin) : null, provider: provider.name,
          providerReference: null, estimatedCompletion: addBusinessDays(now, PORT_BUSINESS_DAYS), rejectionCode: null, rejectionReason: null,
          submittedAt: null, completedAt: null, rejectedAt: null, sequence: 1, createdAt: now, updatedAt: now,
        });
        // The unique index holds every number for this port, or the whole request fails.
        await tx.flush();
        this.#emitPort(tx, port, 'port.created', now);
        await this.#jobs.enqueue(PORT_SUBMIT_JOB, { portId }, { scope, em: tx, startAfter: later(this.#config.numbers.sandbox.portSubmitMs) });
        return port;
      });
    } catch (e) {
      if (isUniqueViolation(e)) {
        for (const [i, number] of input.numbers.entries()) await this.#refuseIfHeld(scope, number, `numbers.${i}`);
        throw new ServiceError('NUMBER_NOT_AVAILABLE', 'A number of this request was just claimed', { field: 'numbers' });
      }
      throw e;
    }
  }

  async listPorts(scope: Scope, input: ListPortsInput): Promise<Page<PortRequest>> {
    const key = { list: 'port_requests', filters: { status: input.status ?? null } };
    return this.#cursors.findPage(tenantEm(this.#orm, scope), PortRequest, scope, key, input, input.status ? { status: input.status } : {});
  }

  async getPort(scope: Scope, id: string): Promise<PortRequest> {
    const port = await tenantEm(this.#orm, scope).findOne(PortRequest, { id });
    if (!port) throw notFound('Port request', id);
    return port;
  }

  #order(port: PortRequest): PortOrder {
    return {
      id: port.id, numbers: port.numbers, currentCarrier: port.currentCarrier, authorizationName: port.authorizationName,
      accountNumber: port.accountNumber ?? null, pin: port.pinSealed ? this.#pins.open(port.pinSealed) : null,
    };
  }

  /** The submit job: hands a pending port to the losing carrier. Safe to run twice. */
  async submitPort(tenant: Scope, portId: string): Promise<void> {
    const port = await tenantEm(this.#orm, tenant).findOne(PortRequest, { id: portId });
    if (!port || port.status !== 'pending') return;
    const provider = this.#providers.forMode(tenant.mode);
    if (!provider) return this.#rejectPort(tenant, portId, 'carrier_unavailable', 'No carrier is configured to handle this port');
    const progress = await provider.submitPort(this.#order(port));
    if (progress.status === 'rejected') return this.#rejectPort(tenant, portId, progress.code, progress.reason);
    const now = this.#clock.now();
    await tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const p = await tx.findOne(PortRequest, { id: portId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!p || p.status !== 'pending') return;
      p.status = 'submitted';
      p.providerReference = progress.reference;
      p.submittedAt = now;
      p.sequence += 1;
      p.updatedAt = now;
      this.#emitPort(tx, p, 'port.submitted', now);
      await this.#jobs.enqueue(PORT_CHECK_JOB, { portId }, { scope: tenant, em: tx, startAfter: later(this.#config.numbers.sandbox.portCompleteMs) });
    });
  }

  /** The check job: asks the carrier how a submitted port is doing; completes, rejects, or checks again later. */
  async checkPort(tenant: Scope, portId: string): Promise<void> {
    const port = await tenantEm(this.#orm, tenant).findOne(PortRequest, { id: portId });
    if (!port || port.status !== 'submitted') return;
    const provider = this.#providers.forMode(tenant.mode);
    if (!provider) return this.#rejectPort(tenant, portId, 'carrier_unavailable', 'No carrier is configured to handle this port');
    const progress = await provider.checkPort(this.#order(port), port.providerReference ?? '');
    if (progress.status === 'rejected') return this.#rejectPort(tenant, portId, progress.code, progress.reason);
    if (progress.status === 'submitted') {
      await this.#jobs.enqueue(PORT_CHECK_JOB, { portId }, { scope: tenant, startAfter: later(this.#config.numbers.sandbox.portCompleteMs) });
      return;
    }
    await this.#completePort(tenant, portId);
  }

  /** The numbers join the inventory (active, billed, senders) and each emits `number.ported`, all in one transaction. */
  async #completePort(tenant: TenantRef, portId: string): Promise<void> {
    const now = this.#clock.now();
    await tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const port = await tx.findOne(PortRequest, { id: portId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!port || port.status !== 'submitted') return;
      const rows = await tx.find(PhoneNumber, { portRequestId: portId, status: 'porting' }, { orderBy: { id: 'asc' }, lockMode: LockMode.PESSIMISTIC_WRITE });
      for (const n of rows) {
        n.status = 'active';
        n.sequence += 1;
        n.updatedAt = now;
        await this.#activate(tx, tenant, n, now);
        this.#emitNumber(tx, n, 'number.ported', now);
      }
      port.status = 'completed';
      port.completedAt = now;
      port.sequence += 1;
      port.updatedAt = now;
      this.#emitPort(tx, port, 'port.completed', now);
    });
  }

  /** PORT_REQUEST_FAILED: the request records the carrier's reason and its numbers are free again. */
  async #rejectPort(tenant: TenantRef, portId: string, code: string, reason: string): Promise<void> {
    const now = this.#clock.now();
    await tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const port = await tx.findOne(PortRequest, { id: portId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!port || port.status === 'completed' || port.status === 'rejected') return;
      await tx.nativeUpdate(PhoneNumber, { portRequestId: portId, status: 'porting' }, { status: 'port_rejected', updatedAt: now });
      port.status = 'rejected';
      port.rejectionCode = code;
      port.rejectionReason = reason;
      port.rejectedAt = now;
      port.sequence += 1;
      port.updatedAt = now;
      this.#emitPort(tx, port, 'port.rejected', now);
    });
  }

  // ---- events ----

  #emitNumber(tx: EntityManager, n: PhoneNumber, type: EventType, now: Date): void {
    // No `webhook_url` key: the number's own URLs are for inbound traffic, not for its lifecycle events.
    emitEvent(tx, { organizationId: n.organizationId, mode: n.mode }, {
      type, resourceType: 'phone_number', resourceId: n.id, sequence: n.sequence,
      data: {
        id: n.id, phone_number_id: n.id, number: n.number, country: n.country, type: n.type, capabilities: n.capabilities,
        status: n.status, friendly_name: n.friendlyName, source: n.source,
        ...(n.portRequestId ? { port_request_id: n.portRequestId } : {}),
        ...(n.releasedAt ? { released_at: n.releasedAt.toISOString(), billing_ends_at: n.billingEndsAt?.toISOString() ?? null } : {}),
      },
    }, now);
  }

  #emitPort(tx: EntityManager, p: PortRequest, type: EventType, now: Date): void {
    emitEvent(tx, { organizationId: p.organizationId, mode: p.mode }, {
      type, resourceType: 'port_request', resourceId: p.id, sequence: p.sequence,
      data: {
        id: p.id, port_request_id: p.id, numbers: p.numbers, status: p.status, estimated_completion: p.estimatedCompletion.toISOString(),
        ...(p.status === 'completed' ? { phone_number_ids: p.phoneNumberIds } : {}),
        ...(p.status === 'rejected' ? { error_code: 'PORT_REQUEST_FAILED', rejection_code: p.rejectionCode, rejection_reason: p.rejectionReason } : {}),
      },
    }, now);
  }
}

/** A number's name until its owner gives it one: the national format, e.g. `(415) 555-0134`. */
export function defaultFriendlyName(number: string): string {
  return parsePhoneNumberFromString(number)?.formatNational() ?? number;
}

/** Messaging channels a number serves as a sender on. */
export function senderChannels(capabilities: readonly NumberCapability[]): Channel[] {
  const channels: Channel[] = [];
  if (capabilities.includes('sms')) channels.push('sms');
  if (capabilities.includes('whatsapp')) channels.push('whatsapp');
  return channels;
}

function monthlyKey(numberId: string, cycle: number): string {
  return `${numberId}:monthly:${cycle}`;
}

/** pg-boss schedules on the database's clock (real time), not the injectable one. */
function later(ms: number): Date {
  return new Date(Date.now() + ms);
}

function isUniqueViolation(e: unknown): boolean {
  return e instanceof UniqueConstraintViolationException || (e as { code?: string }).code === '23505';
}
