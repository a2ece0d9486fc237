/**
 * Calls: placing them (from a voice-capable number the organization owns), their forward-only
 * lifecycle driven by gateway events, hangups, timers (max_duration, IVR waits, voicemail length)
 * and the reads. Every status change commits with its `call.*` event (which also carries the
 * call's webhook_url, so the webhooks fan-out sends the signed status callback) and completed
 * calls record their voice minutes. IVR steps run in calls.ivr.ts on the same locked row; locked
 * changes themselves (the row locks, the one write statement sent with the COMMIT, the hand-over
 * to this instance's subscribers) are calls.locked.ts.
 */
import type { Ports } from '../manifest.ts';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { recordUsage } from '../../platform/usage/usage.ts';
import { EVENT_COLUMNS, emitEvent, eventRow } from '../../platform/events/events.ts';
import { entityColumns, GroupInsert, type GroupInsertSet } from '../../platform/db/groupInsert.ts';
import { CallLookupReads, type CallLookups } from './calls.lookups.ts';
import { GatedPlacements, type NewCall, type PreparedCall } from './calls.gated.ts';
import type { AdmissionTake } from '../../platform/operations.ts';
import { checkWebhookUrl, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { CallBilling, CallCharge } from './voice.billing.ts';
import type { GatewayEvent, TrunkOrder, VoiceGateway, VoiceGateways } from '../../providers/voice/types.ts';
import { Call, IvrFlow } from './voice.entities.ts';
import type { CallConsentPort, VoiceAgentsPort } from './voice.ports.ts';
import type { CreateCallInput, ListCallsInput } from './voice.schemas.ts';
import { CALL_MAX_DURATION } from './voice.schemas.ts';
import { billedMinutes, canMove, isFinal, type CallStatus, type CallStep } from './voice.states.ts';
import type { RecordingLinks } from './recordings.ts';
import { IvrRunner } from './calls.ivr.ts';
import { sealCallMetadata, type VoicePhi } from './voice.phi.ts';
import { callEvent, CallRows } from './calls.rows.ts';
import { agentCall, CallGateway } from './calls.gateway.ts';
import { LockedCalls } from './calls.locked.ts';
import { timelinePlacement, timerRow, TIMELINE_COLUMNS, TIMELINE_TABLE, TIMER_SEQ, type SandboxTimeline, type TimelineTarget } from './calls.timeline.ts';

import { CALL_TIMER_JOB, GATEWAY_HANGUP_JOB, PLACE_CALL_JOB, VOICE_MINUTES_KIND, type CallControl, type CallsDeps, type CallTimer, type CallView, type GatewayHangup, type LegHooks } from './calls.types.ts';

export { EventTooEarly } from './calls.gateway.ts';

export { CALL_TIMER_JOB, GATEWAY_EVENT_JOB, GATEWAY_HANGUP_JOB, PLACE_CALL_JOB, VOICE_MINUTES_KIND, type CallControl, type CallTimer, type CallView, type GatewayHangup, type LegHooks } from './calls.types.ts';

export type { CallLookups } from './calls.lookups.ts';

export type { PreparedCall } from './calls.gated.ts';

export class CallsService implements CallControl {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>;
  readonly #accepted: GroupInsert<NewCall>;
  /** The rows of a new call: the call, its `call.initiated` event, its sandbox timeline rows. */
  readonly #acceptedSets: GroupInsertSet<NewCall>[];
  readonly #gatewaySide: CallGateway;
  readonly #timeline: SandboxTimeline | undefined;
  readonly #rows: CallRows;
  /** Locked call changes and what they write (calls.locked.ts). */
  readonly #locking: LockedCalls;
  readonly #gateways: VoiceGateways;
  readonly #agents: () => VoiceAgentsPort | undefined;
  readonly #links: RecordingLinks;
  readonly #policy: UrlPolicy;
  readonly #ivr: IvrRunner;
  readonly #phi: VoicePhi;
  readonly #quotas: () => Ports['planQuotas'] | undefined;
  readonly #trunk: (scope: TenantRef) => Promise<TrunkOrder | null>;
  readonly #billing: CallBilling | undefined;
  readonly #consent: () => CallConsentPort | undefined;
  readonly #lookups: CallLookupReads;
  /** Test calls written in their lookups' statement (calls.gated.ts; none without the sandbox timeline). */
  readonly #gated: GatedPlacements | undefined;
  #legs: LegHooks | undefined;

  constructor(deps: CallsDeps) {
    this.#consent = deps.consent ?? (() => undefined);
    this.#lookups = new CallLookupReads({ pool: deps.pool, numbers: deps.numbers, consent: this.#consent, ...(deps.takes ? { takes: deps.takes } : {}) });
    this.#billing = deps.billing;
    this.#phi = deps.phi;
    this.#trunk = deps.trunk;
    this.#quotas = deps.quotas ?? (() => undefined);
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#jobs = deps.jobs;
    this.#gateways = deps.gateways;
    this.#agents = deps.agents;
    this.#links = deps.links;
    this.#policy = { allowLoopback: deps.config.allowLoopback };
    this.#ivr = new IvrRunner(this, deps.voicemail);
    this.#rows = new CallRows({ orm: deps.orm, pool: deps.pool, jobs: deps.jobs, timerJob: CALL_TIMER_JOB });
    this.#locking = new LockedCalls({
      orm: deps.orm, clock: deps.clock, rows: this.#rows, timeline: deps.timeline,
      live: deps.live, watched: deps.watched ?? (() => deps.live !== undefined),
    });
    this.#gatewaySide = new CallGateway({
      pool: deps.pool, ivr: this.#ivr, trunk: deps.trunk,
      calls: {
        gateway: (scope) => this.gateway(scope), step: (...a) => this.step(...a), end: (...a) => this.end(...a), timer: (...a) => this.timer(...a), agents: () => this.#agents(),
        locked: (tenant, id, change) => this.#locking.locked(tenant, id, change), lockedMany: (tenant, ids, change) => this.#locking.lockedMany(tenant, ids, change),
        move: (...a) => this.#move(...a), emit: (...a) => this.#emit(...a), legs: () => this.#legs,
        consume: (tx, callId, seq) => this.#locking.writes(tx)?.consumed.push({ callId, seq }),
        chain: (tx, row) => this.#locking.writes(tx)?.timeline.push(row),
      },
    });
    const columns = entityColumns(deps.orm.getMetadata().get(Call).properties);
    // Placed calls are group-committed: the rows, `call.initiated` events and placements of
    // concurrent requests in one statement (platform/db/groupInsert.ts). With the sandbox timeline,
    // a test call's placement is rows there (calls.timeline.ts), not a job: the sandbox's script
    // itself (the call is placed as it commits), or a placement row when the gateway has no script.
    const timeline = deps.timeline;
    this.#timeline = timeline;
    this.#acceptedSets = [
      // The call itself is the row: its properties hold the columns' values (no object per call).
      { table: 'calls', columns: columns.map((c) => c.column), properties: columns.map((c) => c.property), row: (n) => n.call },
      { table: 'events', columns: EVENT_COLUMNS, row: (n) => n.event },
      ...(timeline ? [{ table: TIMELINE_TABLE, columns: TIMELINE_COLUMNS, rows: (n: NewCall) => n.timeline ?? [] }] : []),
    ];
    this.#gated = timeline ? new GatedPlacements({
      pool: deps.pool, lookups: this.#lookups, sets: this.#acceptedSets, timeline,
      build: (scope, input) => this.#build(scope, input), placement: (scope, call) => this.#placement(scope, call),
      committed: (call, event, metadata) => this.#committed(call, event, metadata),
    }) : undefined;
    this.#accepted = new GroupInsert<NewCall>({
      pool: deps.pool, jobs: deps.jobs, name: 'voice_calls_accept',
      sets: this.#acceptedSets,
      job: { name: PLACE_CALL_JOB, entry: (n) => (n.timeline ? null : { data: { callId: n.call.id }, scope: n.scope }) },
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

  /** RECIPIENT_OPTED_OUT (422) when the number's contact opted out of voice calls (calls.lookups.ts). */
  assertMayCall(scope: TenantRef, to: string): Promise<void> {
    return this.#lookups.assertMayCall(scope, to);
  }

  /** The organization's voice numbers; SENDER_NOT_CONFIGURED when it has none. */
  voiceNumbers(scope: TenantRef, field: string): Promise<string[]> {
    return this.#lookups.voiceNumbers(scope, field);
  }

  // ---- placing ----

  /** The reads a new call starts from, settled (calls.lookups.ts); create() raises their errors. */
  lookups(scope: TenantRef, input: Pick<CreateCallInput, 'to'>): Promise<CallLookups> {
    return this.#lookups.lookups(scope, input.to);
  }

  /**
   * The operation's `prepare`, run while the request's rate-limit admission may still be in flight.
   * A test call with neither agent nor IVR is sent with its lookups: their statement writes it when
   * the request's take (in the same statement, or come back already) admitted it, the tenant holds
   * `from` and `to` did not opt out: the POST is then one round trip. Otherwise (and for every
   * other call) the lookups alone; create() raises their errors in order, or writes the call once
   * admitted. Test mode has no quota or credit reservation to hold first (both are live-only).
   */
  async prepare(scope: Scope, input: CreateCallInput, admission: AdmissionTake | undefined): Promise<PreparedCall> {
    return this.#gated ? this.#gated.prepare(scope, input, admission) : { looked: await this.lookups(scope, input) };
  }

  /** A new call in `initiating` as create() builds it from the input (its webhook_url checked first), and the metadata the caller sent. */
  async #build(scope: Scope, input: CreateCallInput): Promise<{ call: Call; metadata: Record<string, unknown> }> {
    const webhookUrl = this.checkUrl(input.webhook_url, 'webhook_url');
    const metadata = input.metadata ?? {};
    const call = await this.#newCall(scope, {
      to: input.to, from: input.from, agentId: input.agent_id ?? null, ivrId: input.ivr_id ?? null, conferenceId: null, webhookUrl,
      record: input.record ?? false, maxDuration: input.max_duration ?? CALL_MAX_DURATION.default, metadata,
    });
    return { call, metadata };
  }

  /**
   * A committed new call: this instance's subscribers (and a callUpdated subscription started on
   * this answer) have the call as committed; the relay's later notice of `call.initiated` is
   * skipped here instead of making each subscriber read the call again. The caller sees what it
   * sent (like a send's echo), even when the PHI keys are stored sealed.
   */
  #committed(call: Call, event: NewCall['event'], metadata: Record<string, unknown>): CallView {
    this.#locking.delivered([{ kind: 'event', id: event.id as string, organizationId: call.organizationId, mode: call.mode, type: event.type as string, resourceId: call.id }], [call]);
    const view = this.view(call);
    return view.phi ? { ...view, metadata, phi: null } : view;
  }

  async create(scope: Scope, input: CreateCallInput, prepared?: PreparedCall): Promise<CallView> {
    if (prepared && 'placed' in prepared) return prepared.placed;
    await this.route(scope);
    // The quota (at least one included minute left: live mode, blocking plans only), the consent and
    // the numbers (looked up already when the operation prepared them) at once; their errors still
    // come in this order.
    const [quota, { consent, numbers }] = await Promise.all([
      Promise.allSettled([this.#quotas()?.check(scope, 'voice_minutes', 1)]).then((r) => r[0]),
      prepared?.looked ?? this.lookups(scope, input),
    ]);
    for (const r of [quota, consent, numbers]) if (r.status === 'rejected') throw r.reason;
    const owned = (numbers as PromiseFulfilledResult<string[]>).value;
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
    const pending = prepared?.pending;
    if (pending) {
      // Read, checked and built, not written: its take had not come back when the statement went.
      // Now admitted, it goes again; when the gate still leaves it out (a number released since),
      // the whole path once more, from fresh reads.
      return (await this.#gated!.again(pending)) ?? this.create(scope, input);
    }
    const { call, metadata } = await this.#build(scope, input);
    // Live calls reserve their minutes first (402 and nothing stored when not one is covered).
    const charge = await this.#charge(scope, call);
    try {
      // The row, its `call.initiated` event and its placement job commit together, with other requests' calls.
      const timeline = this.#placement(scope, call);
      const event = eventRow(scope, callEvent(call), call.createdAt);
      await this.#accepted.submit({ scope, call, event, ...(timeline ? { timeline: timeline.rows } : {}) });
      if (timeline) this.#timeline!.expect(timeline.due);
      return this.#committed(call, event, metadata);
    } catch (e) {
      if (charge) await this.#billing!.release(scope, charge).catch(() => {});
      throw e;
    }
  }

  /** A test call's rows of the sandbox timeline (none without it, or for a live call: a job places those). */
  #placement(scope: Scope, call: Call): { rows: Record<string, unknown>[]; due: number[] } | undefined {
    return this.#timeline && scope.mode === 'test' ? timelinePlacement(this.gateway(scope), scope, call) : undefined;
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

  // ---- placement and gateway events (calls.gateway.ts) ----

  /** What the sandbox timeline places and applies (calls.timeline.ts). */
  timelineTarget(): TimelineTarget {
    return {
      placeBatch: (items) => this.#gatewaySide.placeBatch(items),
      applyBatch: (events, consumed, tenants) => this.#gatewaySide.applyBatch(events, consumed, tenants),
      fireTimers: (callIds, consumed, tenants) => this.#gatewaySide.fireTimers(callIds, consumed, tenants),
    };
  }

  /** The placement job: hands the call to the gateway once; a refusal fails the call with its SIP code. */
  placeCall(scope: Scope, callId: string): Promise<void> {
    return this.#gatewaySide.place(scope, callId);
  }

  /** Applies one gateway event under the call's row lock; events that would move a status backwards are ignored. */
  applyGatewayEvent(event: GatewayEvent): Promise<void> {
    return this.#gatewaySide.apply(event);
  }

  /** A timer job: max_duration ends the call; IVR waits and voicemail limits go to the runner. */
  async fireTimer(timer: CallTimer): Promise<void> {
    await this.#locking.locked(timer, timer.callId, async (tx, call, now) => {
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
    const ended = await this.#locking.locked(scope, id, async (tx, call, now) => {
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
      // Its max_duration timer on the timeline goes with the end (timer(): absent when it was a job).
      if (this.#timeline) this.#locking.writes(tx)?.consumed.push({ callId: call.id, seq: TIMER_SEQ });
      if (call.record) call.recordingSeconds = call.durationSeconds;
      await this.#ivr.finish(tx, call, now);
      const usage = { context: 'voice', kind: VOICE_MINUTES_KIND, quantity: billedMinutes(call.durationSeconds), resourceId: call.id, idempotencyKey: `${call.id}:minutes` };
      const writes = this.#locking.writes(tx);
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
    // Inside a locked transaction the timers are inserted together before it commits: a call's
    // max_duration as its row of the timeline (no job to insert, fetch and complete), others as jobs.
    const writes = this.#locking.writes(tx);
    if (writes && timer.kind === 'max_duration' && this.#timeline) writes.timeline.push(timerRow(call.id, startAfter));
    else if (writes) writes.timers.push({ data, startAfter });
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
    const writes = this.#locking.writes(tx);
    if (writes) writes.events.push({ call, input: callEvent(call), now });
    else emitEvent(tx, call, callEvent(call), now);
  }

  /** Test mode: keys pressed on the far end of an answered call (exercises IVRs end to end). */
  async sandboxDtmf(scope: Scope, id: string, digits: string): Promise<CallView> {
    const call = await this.#locking.locked(scope, id, async (tx, c, now) => {
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

  /**
   * The call `id` as this instance committed it with event `eventId` (as get() shows it: PHI rules
   * applied), or undefined when this instance did not (the caller reads it: get()).
   */
  async committed(scope: Scope, id: string, eventId: string): Promise<CallView | undefined> {
    const call = this.#locking.committed.get(scope, id, eventId);
    return call ? (await this.#phi.calls(scope, [this.view(call)], 'voice.getCall'))[0]! : undefined;
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

type NewCallFields = Pick<Call, 'to' | 'from' | 'agentId' | 'ivrId' | 'conferenceId' | 'webhookUrl' | 'record' | 'maxDuration' | 'metadata'>;

export function callNotFound(id: string): ServiceError {
  return new ServiceError('CALL_NOT_FOUND', `Call ${id} not found`, { id });
}

function alreadyEnded(call: Call): ServiceError {
  return new ServiceError('CALL_ALREADY_ENDED', `The call has already ended (${call.status})`, { id: call.id, status: call.status, ended_at: call.endedAt?.toISOString() ?? null });
}
