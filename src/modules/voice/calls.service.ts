/**
 * Calls: their forward-only lifecycle driven by gateway events, hangups, timers (max_duration,
 * IVR waits, voicemail length) and the reads; placing them (from a voice-capable number the
 * organization owns) is calls.placing.ts, behind create/prepare/placeInTx here. Every status change commits with its `call.*` event (which also carries the
 * call's webhook_url, so the webhooks fan-out sends the signed status callback) and completed
 * calls record their voice minutes. IVR steps run in calls.ivr.ts on the same locked row; locked
 * changes themselves (the row locks, the one write statement sent with the COMMIT, the hand-over
 * to this instance's subscribers) are calls.locked.ts.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { recordUsage } from '../../platform/usage/usage.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { CallLookupReads } from './calls.lookups.ts';
import type { PreparedCall } from './calls.gated.ts';
import { CallPlacing, type NewCallFields } from './calls.placing.ts';
import type { AdmissionTake } from '../../platform/operations.ts';
import { checkWebhookUrl, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { CallBilling } from './voice.billing.ts';
import type { GatewayEvent, Speech, TrunkOrder, VoiceGateway, VoiceGateways } from '../../providers/voice/types.ts';
import { Call } from './voice.entities.ts';
import type { CallConsentPort, VoiceAgentsPort } from './voice.ports.ts';
import type { CreateCallInput, ListCallsInput } from './voice.schemas.ts';
import { billedMinutes, canMove, isFinal, type CallStatus, type CallStep } from './voice.states.ts';
import type { RecordingLinks } from './recordings.ts';
import { IvrRunner } from './calls.ivr.ts';
import type { VoicePhi } from './voice.phi.ts';
import { callEvent, CallRows } from './calls.rows.ts';
import { agentCall, CallGateway } from './calls.gateway.ts';
import { LockedCalls } from './calls.locked.ts';
import { InboundCalls } from './calls.inbound.ts';
import type { InboundDecision, InboundOffer } from '../../providers/voice/types.ts';
import { timerRow, TIMER_SEQ, type SandboxTimeline, type TimelineTarget } from './calls.timeline.ts';

import { CALL_TIMER_JOB, GATEWAY_HANGUP_JOB, VOICE_MINUTES_KIND, type CallControl, type CallsDeps, type CallTimer, type CallView, type GatewayHangup, type LegHooks, type ScriptControl, type ScriptHooks } from './calls.types.ts';

export { EventTooEarly } from './calls.gateway.ts';

export { CALL_TIMER_JOB, GATEWAY_EVENT_JOB, GATEWAY_HANGUP_JOB, PLACE_CALL_JOB, VOICE_MINUTES_KIND, type CallControl, type CallTimer, type CallView, type GatewayHangup, type LegHooks, type ScriptControl, type ScriptHooks } from './calls.types.ts';

export class CallsService implements CallControl {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>;
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
  readonly #trunk: (scope: TenantRef) => Promise<TrunkOrder | null>;
  readonly #billing: CallBilling | undefined;
  readonly #consent: () => CallConsentPort | undefined;
  readonly #lookups: CallLookupReads;
  /** Placing calls (calls.placing.ts). */
  readonly #placing: CallPlacing;
  #legs: LegHooks | undefined;
  /** Inbound calls on live trunks (calls.inbound.ts). */
  readonly #inbound: InboundCalls;
  #script: ScriptHooks | undefined;

  constructor(deps: CallsDeps) {
    this.#consent = deps.consent ?? (() => undefined);
    this.#lookups = new CallLookupReads({ pool: deps.pool, numbers: deps.numbers, consent: this.#consent, ...(deps.takes ? { takes: deps.takes } : {}) });
    this.#billing = deps.billing;
    this.#phi = deps.phi;
    this.#trunk = deps.trunk;
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
        say: (...a) => this.say(...a),
        locked: (tenant, id, change) => this.#locking.locked(tenant, id, change), lockedMany: (tenant, ids, change) => this.#locking.lockedMany(tenant, ids, change),
        move: (...a) => this.#move(...a), emit: (...a) => this.#emit(...a), legs: () => this.#legs, script: () => this.#script,
        consume: (tx, callId, seq) => this.#locking.writes(tx)?.consumed.push({ callId, seq }),
        chain: (tx, row) => this.#locking.writes(tx)?.timeline.push(row),
      },
    });
    this.#timeline = deps.timeline;
    this.#placing = new CallPlacing({
      orm: deps.orm, clock: deps.clock, pool: deps.pool, jobs: deps.jobs, timeline: deps.timeline, lookups: this.#lookups,
      billing: deps.billing, quotas: deps.quotas ?? (() => undefined), agents: deps.agents, phi: deps.phi,
      calls: {
        gateway: (scope) => this.gateway(scope), route: (scope) => this.route(scope), checkUrl: (v, f) => this.checkUrl(v, f),
        step: (...a) => this.step(...a), emit: (...a) => this.#emit(...a), view: (call) => this.view(call),
        delivered: (notices, calls) => this.#locking.delivered(notices, calls),
      },
    });
    this.#inbound = new InboundCalls({ pool: deps.pool, placing: this.#placing, numbers: deps.numbers, log: deps.log ?? (() => {}) });
  }

  /** Routes an INVITE a live trunk sent (the SIP gateway's inbound router): a refusal, or the call it became. */
  routeInbound(offer: InboundOffer): Promise<InboundDecision> {
    return this.#inbound.route(offer);
  }

  installLegHooks(hooks: LegHooks): void {
    this.#legs = hooks;
  }

  /** Installs a call script (the Twilio surface's TwiML: twilio/twiml); answers what it may do to calls. */
  installScriptHooks(hooks: ScriptHooks): ScriptControl {
    this.#script = hooks;
    return {
      step: (...a) => this.step(...a), end: (...a) => this.end(...a), timer: (...a) => this.timer(...a), agents: () => this.#agents(), say: (...a) => this.say(...a),
      locked: (tenant, id, change) => this.#locking.locked(tenant, id, change), recordingUrl: (tenant, id, now) => this.#links.url(tenant, id, now),
    };
  }

  /** A recording the installed script made (`<Record>`), by its id: its length, or null. */
  async scriptRecording(tenant: TenantRef, id: string): Promise<{ seconds: number } | null> {
    return (await this.#script?.recording?.(tenant, id)) ?? null;
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

  // ---- placing (calls.placing.ts) ----

  /** The operation's `prepare`: the lookups, or the test call written with them (CallPlacing.prepare). */
  prepare(scope: Scope, input: CreateCallInput, admission: AdmissionTake | undefined): Promise<PreparedCall> {
    return this.#placing.prepare(scope, input, admission);
  }

  create(scope: Scope, input: CreateCallInput, prepared?: PreparedCall): Promise<CallView> {
    return this.#placing.create(scope, input, prepared);
  }

  /** A new call in `initiating`, its event, and the placement job, in the caller's transaction (conference legs). */
  placeInTx(tx: EntityManager, scope: Scope, c: NewCallFields): Promise<Call> {
    return this.#placing.placeInTx(tx, scope, c);
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
      if (timer.kind === 'script') return this.#script?.timedOut(tx, call, timer.prompt ?? 0, now);
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
      // A live call's recording reports its own length when its media closes (`recorded`), maybe before this.
      if (call.record && (call.mode !== 'live' || call.recordingSeconds == null)) call.recordingSeconds = call.durationSeconds;
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
    if (call.mode === 'live' && !['remote', 'hangup', 'gateway', 'media_timeout', 'voicemail'].includes(reason)) {
      const data: GatewayHangup = { callId: call.id, organizationId: call.organizationId, mode: call.mode, reference: call.gatewayReference ?? null };
      await this.#jobs.enqueue(GATEWAY_HANGUP_JOB, data, { em: tx });
    }
    this.#emit(tx, call, now);
  }

  say(tx: EntityManager, call: Call, speech: Speech): boolean {
    if (call.mode !== 'live') return false;
    const gateway = this.#gateways.forMode('live');
    if (!gateway?.say || !gateway.speaks?.(call.id)) return false;
    const run = () => gateway.say!(call.id, speech);
    const writes = this.#locking.writes(tx);
    if (writes) writes.after.push(run);
    else run();
    return true;
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
      for (const key of digits) {
        await this.#ivr.key(tx, c, key, now);
        if (!isFinal(c.status)) await this.#script?.key(tx, c, key, now);
      }
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
    return (await this.#priced(scope, await this.#phi.calls(scope, [this.view(call)], 'voice.getCall')))[0]!;
  }

  /** The calls with what the ledger charged for each (`charge`, null until charged). */
  async #priced(scope: Scope, calls: CallView[]): Promise<CallView[]> {
    const charges = this.#billing ? await this.#billing.chargesOf(scope, calls.map((c) => c.id)) : new Map<string, never>();
    return calls.map((c) => Object.assign(c, { charge: charges.get(c.id) ?? null }));
  }

  async list(scope: Scope, input: ListCallsInput): Promise<Page<CallView>> {
    const filters = { status: input.status ?? null, from: input.from ?? null, to: input.to ?? null };
    const where: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(filters)) if (v) where[k] = v;
    const page = await this.#cursors.findPage(tenantEm(this.#orm, scope), Call, scope, { list: 'calls', filters }, input, where);
    return { ...page, items: await this.#priced(scope, await this.#phi.calls(scope, page.items.map((c) => this.view(c)), 'voice.listCalls')) };
  }

  async findCall(tenant: TenantRef, id: string): Promise<Call | null> {
    return this.#rows.byId(tenant, id);
  }
}

export function callNotFound(id: string): ServiceError {
  return new ServiceError('CALL_NOT_FOUND', `Call ${id} not found`, { id });
}

function alreadyEnded(call: Call): ServiceError {
  return new ServiceError('CALL_ALREADY_ENDED', `The call has already ended (${call.status})`, { id: call.id, status: call.status, ended_at: call.endedAt?.toISOString() ?? null });
}
