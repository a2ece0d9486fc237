/**
 * Calls: placing them (from a voice-capable number the organization owns), their forward-only
 * lifecycle driven by gateway events, hangups, timers (max_duration, IVR waits, voicemail length)
 * and the reads. Every status change commits with its `call.*` event (which also carries the
 * call's webhook_url, so the webhooks fan-out sends the signed status callback) and completed
 * calls record their voice minutes. IVR steps run in calls.ivr.ts on the same locked row.
 */
import type { Ports } from '../manifest.ts';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Pool } from 'pg';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { recordUsage } from '../../platform/usage/usage.ts';
import { EVENT_COLUMNS, emitEvent, eventRow, type EventInput } from '../../platform/events/events.ts';
import { entityColumns, entityRow, GroupInsert } from '../../platform/db/groupInsert.ts';
import { Batcher } from '../../platform/db/batcher.ts';
import { checkWebhookUrl, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { CallBilling, CallCharge } from './voice.billing.ts';
import { GatewayError, type GatewayEvent, type TrunkOrder, type VoiceGateway, type VoiceGateways } from '../../providers/voice/types.ts';
import { Call, IvrFlow } from './voice.entities.ts';
import type { AgentCall, CallConsentPort, VoiceAgentsPort, VoiceNumbersPort } from './voice.ports.ts';
import type { CreateCallInput, ListCallsInput } from './voice.schemas.ts';
import { CALL_MAX_DURATION } from './voice.schemas.ts';
import { billedMinutes, canMove, eventFor, isFinal, type CallStatus, type CallStep } from './voice.states.ts';
import type { RecordingLinks } from './recordings.ts';
import { IvrRunner } from './calls.ivr.ts';
import type { VoicemailService } from './voicemail.service.ts';
import { sealCallMetadata, type VoicePhi } from './voice.phi.ts';
import { CallRows, type CallWrites } from './calls.rows.ts';

export const PLACE_CALL_JOB = 'voice.place-call';
export const GATEWAY_EVENT_JOB = 'voice.gateway-event';
/** Ends a live call at the gateway after we ended it here (max_duration, an IVR hangup): durable, so any instance can. */
export const GATEWAY_HANGUP_JOB = 'voice.gateway-hangup';
export type GatewayHangup = { callId: string; organizationId: string; mode: 'live' | 'test'; reference: string | null };
export const CALL_TIMER_JOB = 'voice.call-timer';
export const VOICE_MINUTES_KIND = 'voice.minutes';

export type CallTimer = { organizationId: string; mode: 'live' | 'test'; callId: string; kind: 'max_duration' | 'ivr_timeout' | 'voicemail_limit'; prompt?: number };
/** A call as the API shows it: the row plus a fresh signed recording link. */
export type CallView = Call & { recordingUrl: string | null };

/** A call accepted by POST /v1/voice/calls, waiting for its group commit. */
type NewCall = { scope: Scope; call: Call; event: EventInput };

/** Hooks for conference legs (the conferences service installs them). */
export type LegHooks = {
  answered(tx: EntityManager, call: Call, now: Date): Promise<void>;
  ended(tx: EntityManager, call: Call, now: Date): Promise<void>;
};

/** What the IVR runner and the conference service may do to a locked call. */
export type CallControl = {
  step(call: Call, type: string, now: Date, detail?: Record<string, unknown>): void;
  end(tx: EntityManager, call: Call, status: CallStatus, reason: string, now: Date): Promise<void>;
  timer(tx: EntityManager, timer: Omit<CallTimer, 'organizationId' | 'mode'>, call: Call, afterSeconds: number): Promise<void>;
  agents(): VoiceAgentsPort | undefined;
};

export class CallsService implements CallControl {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>;
  readonly #accepted: GroupInsert<NewCall>;
  readonly #pool: Pool;
  readonly #placements: Batcher<Placement, void>;
  readonly #gatewayEvents: Batcher<GatewayEvent, void>;
  readonly #rows: CallRows;
  /** What a locked transaction's change adds (events, usage, timers), written with its calls before it commits. */
  readonly #writes = new WeakMap<EntityManager, CallWrites<CallTimer>>();
  readonly #gateways: VoiceGateways;
  readonly #numbers: VoiceNumbersPort;
  readonly #agents: () => VoiceAgentsPort | undefined;
  readonly #links: RecordingLinks;
  readonly #policy: UrlPolicy;
  readonly #ivr: IvrRunner;
  readonly #phi: VoicePhi;
  readonly #quotas: () => Ports['planQuotas'] | undefined;
  readonly #trunk: (scope: TenantRef) => Promise<TrunkOrder | null>;
  readonly #billing: CallBilling | undefined;
  readonly #consent: () => CallConsentPort | undefined;
  #legs: LegHooks | undefined;

  constructor(deps: {
    orm: MikroORM; pool: Pool; clock: Clock; config: Config; cursors: CursorCodec; jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>; gateways: VoiceGateways;
    numbers: VoiceNumbersPort; agents: () => VoiceAgentsPort | undefined; links: RecordingLinks; voicemail: VoicemailService; phi: VoicePhi;
    /** Plan quotas (billing, optional): a starter plan past its included voice minutes is 429 QUOTA_EXCEEDED. */
    quotas?: () => Ports['planQuotas'] | undefined;
    /** The organization's SIP trunk for live calls (none: live calls are CHANNEL_UNAVAILABLE). */
    trunk: (scope: TenantRef) => Promise<TrunkOrder | null>;
    /** Live calls paid from credits (voice.billing.ts); without it calls are not charged. */
    billing?: CallBilling;
    /** Voice consent (contacts, optional): an opted-out number is not called (RECIPIENT_OPTED_OUT). */
    consent?: () => CallConsentPort | undefined;
  }) {
    this.#consent = deps.consent ?? (() => undefined);
    this.#billing = deps.billing;
    this.#phi = deps.phi;
    this.#trunk = deps.trunk;
    this.#quotas = deps.quotas ?? (() => undefined);
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#jobs = deps.jobs;
    this.#gateways = deps.gateways;
    this.#numbers = deps.numbers;
    this.#agents = deps.agents;
    this.#links = deps.links;
    this.#policy = { allowLoopback: deps.config.allowLoopback };
    this.#ivr = new IvrRunner(this, deps.voicemail);
    this.#pool = deps.pool;
    this.#rows = new CallRows({ orm: deps.orm, pool: deps.pool, jobs: deps.jobs, timerJob: CALL_TIMER_JOB });
    // The jobs' handlers run a fetched batch at once: they land in one batch here. Two at a time, as the queues' concurrency.
    this.#placements = new Batcher((items) => this.#placeMany(items), { maxInFlight: 2, isolate: true, maxBatch: 64 });
    this.#gatewayEvents = new Batcher((events) => this.#applyEvents(events), { maxInFlight: 2, isolate: true, maxBatch: 64 });
    const columns = entityColumns(deps.orm.getMetadata().get(Call).properties);
    // Placed calls are group-committed: the rows, `call.initiated` events and placement jobs of
    // concurrent requests in one statement (platform/db/groupInsert.ts).
    this.#accepted = new GroupInsert<NewCall>({
      pool: deps.pool, jobs: deps.jobs, name: 'voice_calls_accept',
      sets: [
        { table: 'calls', columns: columns.map((c) => c.column), row: (n) => entityRow(columns, n.call) },
        { table: 'events', columns: EVENT_COLUMNS, row: (n) => eventRow(n.scope, n.event, n.call.createdAt) },
      ],
      job: { name: PLACE_CALL_JOB, entry: (n) => ({ data: { callId: n.call.id }, scope: n.scope }) },
    });
  }

  installLegHooks(hooks: LegHooks): void {
    this.#legs = hooks;
  }

  agents(): VoiceAgentsPort | undefined {
    return this.#agents();
  }

  gateway(scope: TenantRef): VoiceGateway {
    const gateway = this.#gateways.forMode(scope.mode);
    if (!gateway) {
      throw new ServiceError('CHANNEL_UNAVAILABLE', `Voice is not available in ${scope.mode} mode: no SIP trunk gateway is configured; use a test-mode key for the sandbox gateway`, { channel: 'voice', mode: scope.mode });
    }
    return gateway;
  }

  /**
   * The gateway, and for live calls the trunk they go out on: CHANNEL_UNAVAILABLE (503) without
   * one (test mode needs none: the sandbox carries its calls).
   */
  async route(scope: TenantRef): Promise<TrunkOrder | null> {
    this.gateway(scope);
    if (scope.mode === 'test') return null;
    const trunk = await this.#trunk(scope);
    if (!trunk) {
      throw new ServiceError('CHANNEL_UNAVAILABLE', 'Live calls go out on a SIP trunk and this account has none: add one with POST /v1/voice/sip-trunks (or use a test-mode key for the sandbox)', { channel: 'voice', mode: scope.mode, reason: 'no_sip_trunk' });
    }
    return trunk;
  }

  checkUrl(value: string | null | undefined, field: string): string | null {
    if (value === undefined || value === null) return null;
    const checked = checkWebhookUrl(value, this.#policy);
    if (!checked.ok) throw new ServiceError('INVALID_WEBHOOK_URL', `${field} is not allowed: ${checked.reason}`, { field, value });
    return checked.url.toString();
  }

  /** RECIPIENT_OPTED_OUT (422) when the number's contact opted out of voice calls (TCPA: never dial them). */
  async assertMayCall(scope: TenantRef, to: string): Promise<void> {
    await this.#consent()?.assertCanCall(scope, to);
  }

  /** The organization's voice numbers; SENDER_NOT_CONFIGURED when it has none. */
  async voiceNumbers(scope: TenantRef, field: string): Promise<string[]> {
    const numbers = await this.#numbers.voiceNumbers(scope);
    if (!numbers.length) throw new ServiceError('SENDER_NOT_CONFIGURED', 'The account has no voice-capable phone number; buy one with POST /v1/numbers', { field, channel: 'voice' });
    return numbers;
  }

  // ---- placing ----

  async create(scope: Scope, input: CreateCallInput): Promise<CallView> {
    await this.route(scope);
    // A call needs at least one included minute left (live mode, blocking plans only).
    await this.#quotas()?.check(scope, 'voice_minutes', 1);
    await this.assertMayCall(scope, input.to);
    const owned = await this.voiceNumbers(scope, 'from');
    if (!owned.includes(input.from)) {
      throw new ServiceError('VALIDATION_ERROR', `from must be a voice-capable number of this account (${owned.length} available)`, { field: 'from', value: input.from, expected: 'an owned number with the voice capability' });
    }
    if (input.agent_id) {
      const agents = this.#agents();
      if (!agents || !(await agents.exists(scope, input.agent_id))) throw new ServiceError('NOT_FOUND', `Agent ${input.agent_id} not found`, { field: 'agent_id', id: input.agent_id });
    }
    if (input.ivr_id && !(await tenantEm(this.#orm, scope).findOne(IvrFlow, { id: input.ivr_id }, { fields: ['id'] }))) {
      throw new ServiceError('NOT_FOUND', `IVR flow ${input.ivr_id} not found`, { field: 'ivr_id', id: input.ivr_id });
    }
    const webhookUrl = this.checkUrl(input.webhook_url, 'webhook_url');
    const metadata = input.metadata ?? {};
    const call = await this.#newCall(scope, {
      to: input.to, from: input.from, agentId: input.agent_id ?? null, ivrId: input.ivr_id ?? null, conferenceId: null, webhookUrl,
      record: input.record ?? false, maxDuration: input.max_duration ?? CALL_MAX_DURATION.default, metadata,
    });
    // Live calls reserve their minutes first (402 and nothing stored when not one is covered).
    const charge = await this.#charge(scope, call);
    try {
      // The row, its `call.initiated` event and its placement job commit together, with other requests' calls.
      await this.#accepted.submit({ scope, call, event: this.#event(call) });
    } catch (e) {
      if (charge) await this.#billing!.release(scope, charge).catch(() => {});
      throw e;
    }
    const view = this.view(call);
    // The caller sees what it sent (like a send's echo), even when the PHI keys are stored sealed.
    return view.phi ? { ...view, metadata, phi: null } : view;
  }

  /** A new call in `initiating`, its event, and the placement job, in the caller's transaction (conference legs). */
  async placeInTx(tx: EntityManager, scope: Scope, c: NewCallFields): Promise<Call> {
    const row = await this.#newCall(scope, c);
    await this.#charge(scope, row, tx);
    const call = tx.create(Call, row);
    this.#emit(tx, call, call.createdAt);
    await this.#jobs.enqueue(PLACE_CALL_JOB, { callId: call.id }, { scope, em: tx });
    return call;
  }

  /**
   * Reserves a live call's minutes (voice.billing.ts) and notes the reservation on the row; when the
   * balance covers fewer minutes than max_duration, the call's max_duration is cut to them.
   */
  async #charge(scope: Scope, call: Call, em?: EntityManager): Promise<CallCharge | undefined> {
    const charge = await this.#billing?.reserve(scope, call.id, call.maxDuration, em);
    if (!charge) return undefined;
    call.creditReservationId = charge.reservationId;
    call.poolMinutes = charge.poolMinutes;
    call.poolPeriod = charge.poolPeriod;
    if (charge.minutes * 60 < call.maxDuration) {
      this.step(call, 'credit_limit', call.createdAt, { max_duration_requested: call.maxDuration, max_duration: charge.minutes * 60, minutes: charge.minutes, included_minutes: charge.poolMinutes });
      call.maxDuration = charge.minutes * 60;
    }
    return charge;
  }

  /** The row of a new call in `initiating` (a plain object). */
  async #newCall(scope: Scope, c: NewCallFields): Promise<Call> {
    const now = this.#clock.now();
    const id = newId('call', now.getTime());
    // HIPAA mode: the PHI metadata keys are stored sealed; the row and its events keep the clear ones.
    const codec = await this.#phi.writer(scope.organizationId);
    const stored = codec ? sealCallMetadata(id, c.metadata, codec) : { metadata: c.metadata, phi: null };
    return {
      id, organizationId: scope.organizationId, mode: scope.mode, direction: 'outbound', ...c, ...stored, status: 'initiating',
      durationSeconds: null, recordingSeconds: null, gateway: this.gateway(scope).name, gatewayReference: null, gatewaySeq: 0, errorCode: null, sipCode: null, creditReservationId: null, poolMinutes: 0, poolPeriod: null,
      endReason: null, ivrState: null, steps: [{ at: now.toISOString(), type: 'status', detail: { status: 'initiating' } }], sequence: 1,
      createdAt: now, updatedAt: now, ringingAt: null, answeredAt: null, endedAt: null, contentPurgedAt: null,
    };
  }

  // ---- placement and gateway events (jobs; concurrent jobs share their statements) ----

  /** The placement job: hands the call to the gateway once; a refusal fails the call with its SIP code. */
  placeCall(scope: Scope, callId: string): Promise<void> {
    return this.#placements.submit({ scope, callId });
  }

  /**
   * Placements of concurrent jobs: one read of their calls, the gateway orders, then one UPDATE of
   * the gateway references. A gateway refusal fails its call alone, under the row lock.
   */
  async #placeMany(items: Placement[]): Promise<(void | Error)[]> {
    const { rows } = await this.#pool.query<{ id: string; from: string; to: string; record: boolean }>({
      name: 'voice_placements_read',
      text: `select c.id, c."from", c."to", c.record from calls c
               join unnest($1::text[], $2::text[], $3::text[]) as r(id, org, mode) on c.id = r.id and c.organization_id = r.org and c.mode = r.mode
              where c.status = 'initiating' and c.gateway_reference is null`,
      values: [items.map((i) => i.callId), items.map((i) => i.scope.organizationId), items.map((i) => i.scope.mode)],
    });
    const byId = new Map(rows.map((r) => [r.id, r]));
    // Live calls go out on their organization's trunk (read once per organization of the batch).
    const trunks = new Map<string, Promise<TrunkOrder | null>>();
    const trunkOf = (scope: Scope) => {
      if (scope.mode === 'test') return Promise.resolve(null);
      let t = trunks.get(scope.organizationId);
      if (!t) trunks.set(scope.organizationId, t = this.#trunk(scope));
      return t;
    };
    const placed: { item: Placement; reference: string }[] = [];
    const results = await Promise.all(items.map(async (item): Promise<void | Error> => {
      const call = byId.get(item.callId);
      if (!call) return;
      try {
        const trunk = await trunkOf(item.scope);
        if (item.scope.mode === 'live' && !trunk) throw new GatewayError('the account has no SIP trunk any more');
        placed.push({ item, reference: (await this.gateway(item.scope).place({ callId: call.id, from: call.from, to: call.to, record: call.record, ...(trunk ? { trunk } : {}) })).reference });
      } catch (e) {
        if (!(e instanceof GatewayError)) return e instanceof Error ? e : new Error(String(e));
        try {
          await this.#locked(item.scope, item.callId, async (tx, c, now) => {
            c.errorCode = e.sipCode ? 'SIP_ERROR' : 'VOICE_GATEWAY_ERROR';
            c.sipCode = e.sipCode ?? null;
            this.step(c, 'gateway_error', now, { message: e.message, sip_code: e.sipCode ?? null });
            await this.end(tx, c, 'failed', 'gateway', now);
          });
        } catch (failed) {
          return failed instanceof Error ? failed : new Error(String(failed));
        }
      }
    }));
    if (placed.length > 0) {
      // The reference is kept once (a repeated placement answers the same one); a call ended meanwhile keeps it too.
      await this.#pool.query({
        name: 'voice_placements_write',
        text: `update calls c set gateway_reference = r.ref
                 from unnest($1::text[], $2::text[], $3::text[], $4::text[]) as r(id, org, mode, ref)
                where c.id = r.id and c.organization_id = r.org and c.mode = r.mode and c.gateway_reference is null`,
        values: [placed.map((p) => p.item.callId), placed.map((p) => p.item.scope.organizationId), placed.map((p) => p.item.scope.mode), placed.map((p) => p.reference)],
      });
    }
    return results;
  }

  /** Applies one gateway event under the call's row lock; events that would move a status backwards are ignored. */
  applyGatewayEvent(event: GatewayEvent): Promise<void> {
    return this.#gatewayEvents.submit(event);
  }

  /**
   * Gateway events of concurrent jobs: per tenant, one transaction that locks their calls (in id
   * order) and applies the events in call and sequence order, then commits every change, event
   * and timer at once. An event that overtook an earlier one fails alone (its job is retried);
   * any other failure fails the batch, which is then applied event by event.
   */
  async #applyEvents(events: GatewayEvent[]): Promise<(void | Error)[]> {
    const { rows } = await this.#pool.query<{ id: string; organization_id: string; mode: 'live' | 'test' }>({
      name: 'voice_gateway_event_tenants',
      text: 'select id, organization_id, mode from calls where id = any($1::text[])',
      values: [[...new Set(events.map((e) => e.callId))]],
    });
    const groups = new Map<string, { tenant: TenantRef; indexes: number[] }>();
    const tenantOf = new Map(rows.map((r) => [r.id, r]));
    events.forEach((event, i) => {
      const row = tenantOf.get(event.callId);
      if (!row) return; // an unknown call: nothing to apply
      const key = `${row.organization_id}:${row.mode}`;
      const group = groups.get(key) ?? { tenant: { organizationId: row.organization_id, mode: row.mode }, indexes: [] };
      group.indexes.push(i);
      groups.set(key, group);
    });
    const results: (void | Error)[] = events.map(() => undefined);
    for (const { tenant, indexes } of groups.values()) {
      indexes.sort((a, b) => (events[a]!.callId < events[b]!.callId ? -1 : events[a]!.callId > events[b]!.callId ? 1 : events[a]!.seq - events[b]!.seq));
      await this.#lockedMany(tenant, indexes.map((i) => events[i]!.callId), async (tx, calls, now) => {
        for (const i of indexes) {
          const call = calls.get(events[i]!.callId);
          if (!call) continue;
          try {
            await this.#applyEvent(tx, call, events[i]!, now);
          } catch (e) {
            if (!(e instanceof EventTooEarly)) throw e;
            results[i] = e;
          }
        }
      });
    }
    return results;
  }

  async #applyEvent(tx: EntityManager, call: Call, event: GatewayEvent, now: Date): Promise<void> {
    // An ended call ignores what is still in flight; a repeated event is applied once; an event
    // that overtook an earlier one waits for it (the job is retried), so steps keep their order.
    if (isFinal(call.status) || event.seq <= call.gatewaySeq) return;
    if (event.seq > call.gatewaySeq + 1) throw new EventTooEarly(event, call.gatewaySeq);
    call.gatewaySeq = event.seq;
    if (event.reference) call.gatewayReference = event.reference;
    switch (event.type) {
      case 'ringing':
        if (!this.#move(call, 'ringing', now)) return;
        call.ringingAt = now;
        return this.#emit(tx, call, now);
      case 'answered':
        return this.#answered(tx, call, now);
      case 'dtmf':
        if (call.status === 'in_progress') for (const key of event.digits ?? '') await this.#ivr.key(tx, call, key, now);
        return;
      case 'speech':
        if (call.status === 'in_progress') await this.#ivr.speech(tx, call, event.seconds ?? 0, now);
        return;
      case 'completed':
        return this.end(tx, call, 'completed', 'remote', now);
      case 'busy': case 'no_answer':
        return this.end(tx, call, event.type, 'remote', now);
      case 'failed':
        call.errorCode = 'SIP_ERROR';
        call.sipCode = event.sipCode ?? null;
        return this.end(tx, call, 'failed', 'remote', now);
    }
  }

  async #answered(tx: EntityManager, call: Call, now: Date): Promise<void> {
    if (!this.#move(call, 'in_progress', now)) return;
    call.answeredAt = now;
    this.#emit(tx, call, now);
    await this.timer(tx, { callId: call.id, kind: 'max_duration' }, call, call.maxDuration);
    if (call.agentId) await this.#agents()?.callStarted(call, agentCall(call));
    if (call.conferenceId) await this.#legs?.answered(tx, call, now);
    if (call.ivrId && !isFinal(call.status)) await this.#ivr.start(tx, call, now);
  }

  /** A timer job: max_duration ends the call; IVR waits and voicemail limits go to the runner. */
  async fireTimer(timer: CallTimer): Promise<void> {
    await this.#locked(timer, timer.callId, async (tx, call, now) => {
      if (isFinal(call.status)) return;
      if (timer.kind === 'max_duration') {
        this.step(call, 'max_duration_reached', now, { max_duration: call.maxDuration });
        return this.end(tx, call, 'completed', 'max_duration', now);
      }
      if (timer.kind === 'ivr_timeout') return this.#ivr.timedOut(tx, call, timer.prompt ?? 0, now);
      return this.#ivr.voicemailLimit(tx, call, now);
    });
  }

  // ---- hangup ----

  async hangup(scope: Scope, id: string): Promise<CallView> {
    const before = await this.#rows.byId(scope, id);
    if (!before) throw callNotFound(id);
    if (isFinal(before.status)) throw alreadyEnded(before);
    // The agent hears about it first, so it can say goodbye and close its conversation.
    if (before.agentId) await this.#agents()?.callEnding(scope, agentCall(before));
    await this.gateway(scope).hangup(id, before.gatewayReference ?? null);
    const ended = await this.#locked(scope, id, async (tx, call, now) => {
      if (isFinal(call.status)) throw alreadyEnded(call);
      await this.end(tx, call, call.status === 'in_progress' ? 'completed' : 'cancelled', 'hangup', now);
    });
    if (!ended) throw callNotFound(id);
    return this.view(ended);
  }

  // ---- CallControl ----

  step(call: Call, type: string, now: Date, detail?: Record<string, unknown>): void {
    const step: CallStep = { at: now.toISOString(), type, ...(detail ? { detail } : {}) };
    call.steps = [...call.steps, step];
    call.updatedAt = now;
  }

  /** Ends an active call: timestamps, duration, recording, usage, conference leg, its event. */
  async end(tx: EntityManager, call: Call, status: CallStatus, reason: string, now: Date): Promise<void> {
    if (!this.#move(call, status, now)) return;
    call.endedAt = now;
    call.endReason = reason;
    call.durationSeconds = call.answeredAt ? Math.max(0, Math.round((now.getTime() - call.answeredAt.getTime()) / 1000)) : 0;
    if (call.answeredAt) {
      if (call.record) call.recordingSeconds = call.durationSeconds;
      await this.#ivr.finish(tx, call, now);
      const usage = { context: 'voice', kind: VOICE_MINUTES_KIND, quantity: billedMinutes(call.durationSeconds), resourceId: call.id, idempotencyKey: `${call.id}:minutes` };
      const writes = this.#writes.get(tx);
      if (writes) writes.usage.push({ tenant: call, input: usage, now });
      else await recordUsage(tx, call, usage, now);
    }
    if (call.conferenceId) await this.#legs?.ended(tx, call, now);
    // A paid call keeps the minutes it was billed and gives the rest of its reservation back.
    if ((call.creditReservationId || call.poolMinutes > 0) && this.#billing) {
      await this.#billing.settle(call, call, call.answeredAt ? billedMinutes(call.durationSeconds ?? 0) : 0, tx);
    }
    // Ended here while still up at a live gateway (max_duration, an IVR hangup): hang it up there.
    if (call.mode === 'live' && !['remote', 'hangup', 'gateway'].includes(reason)) {
      const data: GatewayHangup = { callId: call.id, organizationId: call.organizationId, mode: call.mode, reference: call.gatewayReference ?? null };
      await this.#jobs.enqueue(GATEWAY_HANGUP_JOB, data, { em: tx });
    }
    this.#emit(tx, call, now);
  }

  /** The gateway-hangup job. */
  async hangupAtGateway(job: GatewayHangup): Promise<void> {
    await this.gateway(job).hangup(job.callId, job.reference);
  }

  async timer(tx: EntityManager, timer: Omit<CallTimer, 'organizationId' | 'mode'>, call: Call, afterSeconds: number): Promise<void> {
    const data: CallTimer = { ...timer, organizationId: call.organizationId, mode: call.mode };
    const startAfter = new Date(Date.now() + afterSeconds * 1000);
    // Inside a locked transaction the timers are inserted together before it commits.
    const writes = this.#writes.get(tx);
    if (writes) writes.timers.push({ data, startAfter });
    else await this.#jobs.enqueue(CALL_TIMER_JOB, data, { em: tx, startAfter });
  }

  #move(call: Call, status: CallStatus, now: Date): boolean {
    if (!canMove(call.status, status)) return false;
    call.status = status;
    call.sequence += 1;
    this.step(call, 'status', now, { status });
    return true;
  }

  #emit(tx: EntityManager, call: Call, now: Date): void {
    const writes = this.#writes.get(tx);
    if (writes) writes.events.push({ call, input: this.#event(call), now });
    else emitEvent(tx, call, this.#event(call), now);
  }

  /** The `call.*` event of the call's current status. */
  #event(call: Call): EventInput {
    return {
      type: eventFor(call.status), resourceType: 'call', resourceId: call.id, sequence: call.sequence,
      data: {
        id: call.id, call_id: call.id, direction: call.direction, from: call.from, to: call.to, status: call.status,
        agent_id: call.agentId, ivr_id: call.ivrId, conference_id: call.conferenceId, record: call.record,
        duration_seconds: call.durationSeconds, answered_at: call.answeredAt?.toISOString() ?? null, ended_at: call.endedAt?.toISOString() ?? null,
        end_reason: call.endReason, error_code: call.errorCode, sip_code: call.sipCode, has_recording: call.recordingSeconds != null,
        metadata: call.metadata, ...(call.webhookUrl ? { webhook_url: call.webhookUrl } : {}),
      },
    };
  }

  /** Runs `change` on the locked row in a transaction; returns the row (undefined when it does not exist). */
  async #locked(tenant: TenantRef, id: string, change: (tx: EntityManager, call: Call, now: Date) => Promise<void>): Promise<Call | undefined> {
    return this.#lockedMany(tenant, [id], async (tx, calls, now) => {
      const call = calls.get(id);
      if (call) await change(tx, call, now);
      return call;
    });
  }

  /**
   * Runs `change` on the tenant's calls `ids` (plain rows, locked in id order: calls.rows.ts) in one
   * transaction; the changed calls, their events, usage and timers are written in one statement.
   */
  async #lockedMany<R>(tenant: TenantRef, ids: readonly string[], change: (tx: EntityManager, calls: Map<string, Call>, now: Date) => Promise<R>): Promise<R> {
    return tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      const calls = await this.#rows.lock(trx, tenant, ids);
      const before = this.#rows.snapshot(calls);
      const writes: CallWrites<CallTimer> = { events: [], usage: [], timers: [] };
      this.#writes.set(tx, writes);
      let result: R;
      try {
        result = await change(tx, new Map(calls.map((c) => [c.id, c])), this.#clock.now());
      } finally {
        this.#writes.delete(tx);
      }
      await this.#rows.write(trx, calls, before, writes);
      return result;
    });
  }

  /** Test mode: keys pressed on the far end of an answered call (exercises IVRs end to end). */
  async sandboxDtmf(scope: Scope, id: string, digits: string): Promise<CallView> {
    const call = await this.#locked(scope, id, async (tx, c, now) => {
      if (scope.mode !== 'test') throw new ServiceError('FORBIDDEN', 'Calls can be scripted only in test mode, with a test-mode credential', { mode: scope.mode });
      if (isFinal(c.status)) throw alreadyEnded(c);
      if (c.status !== 'in_progress') throw new ServiceError('CONFLICT', `The call is ${c.status}: keys can be pressed once it is answered`, { status: c.status });
      for (const key of digits) await this.#ivr.key(tx, c, key, now);
    });
    if (!call) throw callNotFound(id);
    return (await this.#phi.calls(scope, [this.view(call)], 'voice.sandboxDtmf'))[0]!;
  }

  // ---- reads ----

  view(call: Call): CallView {
    const recordingUrl = call.recordingSeconds != null ? this.#links.url(call, call.id, this.#clock.now()) : null;
    return Object.assign(call, { recordingUrl });
  }

  async get(scope: Scope, id: string): Promise<CallView> {
    const call = await this.#rows.byId(scope, id);
    if (!call) throw callNotFound(id);
    return (await this.#phi.calls(scope, [this.view(call)], 'voice.getCall'))[0]!;
  }

  async list(scope: Scope, input: ListCallsInput): Promise<Page<CallView>> {
    const filters = { status: input.status ?? null, from: input.from ?? null, to: input.to ?? null };
    const where: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(filters)) if (v) where[k] = v;
    const page = await this.#cursors.findPage(tenantEm(this.#orm, scope), Call, scope, { list: 'calls', filters }, input, where);
    return { ...page, items: await this.#phi.calls(scope, page.items.map((c) => this.view(c)), 'voice.listCalls') };
  }

  async findCall(tenant: TenantRef, id: string): Promise<Call | null> {
    return this.#rows.byId(tenant, id);
  }
}

type Placement = { scope: Scope; callId: string };

type NewCallFields = Pick<Call, 'to' | 'from' | 'agentId' | 'ivrId' | 'conferenceId' | 'webhookUrl' | 'record' | 'maxDuration' | 'metadata'>;

/** A gateway event that arrived before an earlier one of the same call: retried (an expected retry, logged at debug). */
export class EventTooEarly extends Error {
  readonly expected = true;
  constructor(event: GatewayEvent, applied: number) {
    super(`gateway event ${event.seq} of ${event.callId} arrived before event ${applied + 1}`);
    this.name = 'EventTooEarly';
  }
}

export function agentCall(call: Call): AgentCall {
  return { callId: call.id, from: call.from, to: call.to, agentId: call.agentId ?? '' };
}

export function callNotFound(id: string): ServiceError {
  return new ServiceError('CALL_NOT_FOUND', `Call ${id} not found`, { id });
}

function alreadyEnded(call: Call): ServiceError {
  return new ServiceError('CALL_ALREADY_ENDED', `The call has already ended (${call.status})`, { id: call.id, status: call.status, ended_at: call.endedAt?.toISOString() ?? null });
}
