/**
 * Placing calls: POST /v1/voice/calls (`prepare` with its lookups while the rate-limit admission
 * is in flight, then `create`) and the legs a conference dials (`placeInTx`, in the caller's
 * transaction). A new call is checked (route, numbers, consent, quota, agent, IVR), its live
 * minutes reserved, and group-committed with its `call.initiated` event and its placement (a
 * sandbox timeline row or script for a test call, else a job); a test call without agent or IVR
 * is written by its lookups' statement (calls.gated.ts). Split out of calls.service.ts, which keeps
 * the lifecycle, hangups, timers and reads, and hands this class what it needs of them (`calls`).
 */
import type { Pool } from 'pg';
import type { Ports } from '../manifest.ts';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { EVENT_COLUMNS, eventRow } from '../../platform/events/events.ts';
import type { LiveNotice } from '../../platform/events/bus.ts';
import { entityColumns, GroupInsert, type GroupInsertSet } from '../../platform/db/groupInsert.ts';
import type { AdmissionTake } from '../../platform/operations.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { TrunkOrder, VoiceGateway } from '../../providers/voice/types.ts';
import type { CallLookupReads, CallLookups } from './calls.lookups.ts';
import { GatedPlacements, type NewCall, type PreparedCall } from './calls.gated.ts';
import type { CallBilling, CallCharge } from './voice.billing.ts';
import { Call, IvrFlow } from './voice.entities.ts';
import type { VoiceAgentsPort } from './voice.ports.ts';
import type { CreateCallInput } from './voice.schemas.ts';
import { CALL_MAX_DURATION } from './voice.schemas.ts';
import { sealCallMetadata, type VoicePhi } from './voice.phi.ts';
import { callEvent } from './calls.rows.ts';
import { timelinePlacement, TIMELINE_COLUMNS, TIMELINE_TABLE, type SandboxTimeline } from './calls.timeline.ts';
import { PLACE_CALL_JOB, type CallView } from './calls.types.ts';

export type NewCallFields = Pick<Call, 'to' | 'from' | 'agentId' | 'ivrId' | 'conferenceId' | 'webhookUrl' | 'record' | 'maxDuration' | 'metadata'>;

/** What placing needs of the calls service. */
export type PlacingCalls = {
  gateway(scope: TenantRef): VoiceGateway;
  route(scope: TenantRef): Promise<TrunkOrder | null>;
  checkUrl(value: string | null | undefined, field: string): string | null;
  step(call: Call, type: string, now: Date, detail?: Record<string, unknown>): void;
  emit(tx: EntityManager, call: Call, now: Date): void;
  view(call: Call): CallView;
  /** This instance's subscribers have these changes as committed (calls.locked.ts). */
  delivered(notices: readonly LiveNotice[], calls: readonly Call[]): void;
};

export class CallPlacing {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>;
  readonly #timeline: SandboxTimeline | undefined;
  readonly #lookups: CallLookupReads;
  readonly #billing: CallBilling | undefined;
  readonly #quotas: () => Ports['planQuotas'] | undefined;
  readonly #agents: () => VoiceAgentsPort | undefined;
  readonly #phi: VoicePhi;
  readonly #calls: PlacingCalls;
  readonly #accepted: GroupInsert<NewCall>;
  /** Test calls written in their lookups' statement (calls.gated.ts; none without the sandbox timeline). */
  readonly #gated: GatedPlacements | undefined;

  constructor(deps: {
    orm: MikroORM; clock: Clock; pool: Pool; jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>; timeline: SandboxTimeline | undefined;
    lookups: CallLookupReads; billing: CallBilling | undefined; quotas: () => Ports['planQuotas'] | undefined;
    agents: () => VoiceAgentsPort | undefined; phi: VoicePhi; calls: PlacingCalls;
  }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#jobs = deps.jobs;
    this.#timeline = deps.timeline;
    this.#lookups = deps.lookups;
    this.#billing = deps.billing;
    this.#quotas = deps.quotas;
    this.#agents = deps.agents;
    this.#phi = deps.phi;
    this.#calls = deps.calls;
    const columns = entityColumns(deps.orm.getMetadata().get(Call).properties);
    // Placed calls are group-committed: the rows, `call.initiated` events and placements of
    // concurrent requests in one statement (platform/db/groupInsert.ts). With the sandbox timeline,
    // a test call's placement is rows there (calls.timeline.ts), not a job: the sandbox's script
    // itself (the call is placed as it commits), or a placement row when the gateway has no script.
    const timeline = deps.timeline;
    /** The rows of a new call: the call, its `call.initiated` event, its sandbox timeline rows. */
    const sets: GroupInsertSet<NewCall>[] = [
      // The call itself is the row: its properties hold the columns' values (no object per call).
      { table: 'calls', columns: columns.map((c) => c.column), properties: columns.map((c) => c.property), row: (n) => n.call },
      { table: 'events', columns: EVENT_COLUMNS, row: (n) => n.event },
      ...(timeline ? [{ table: TIMELINE_TABLE, columns: TIMELINE_COLUMNS, rows: (n: NewCall) => n.timeline ?? [] }] : []),
    ];
    this.#gated = timeline ? new GatedPlacements({
      pool: deps.pool, lookups: this.#lookups, sets, timeline,
      build: (scope, input) => this.#build(scope, input), placement: (scope, call) => this.#placement(scope, call),
      committed: (call, event, metadata) => this.#committed(call, event, metadata),
    }) : undefined;
    this.#accepted = new GroupInsert<NewCall>({
      pool: deps.pool, jobs: deps.jobs, name: 'voice_calls_accept',
      sets,
      job: { name: PLACE_CALL_JOB, entry: (n) => (n.timeline ? null : { data: { callId: n.call.id }, scope: n.scope }) },
    });
  }

  /** The reads a new call starts from, settled (calls.lookups.ts); create() raises their errors. */
  #lookupsFor(scope: TenantRef, input: Pick<CreateCallInput, 'to'>): Promise<CallLookups> {
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
    return this.#gated ? this.#gated.prepare(scope, input, admission) : { looked: await this.#lookupsFor(scope, input) };
  }

  /** A new call in `initiating` as create() builds it from the input (its webhook_url checked first), and the metadata the caller sent. */
  async #build(scope: Scope, input: CreateCallInput): Promise<{ call: Call; metadata: Record<string, unknown> }> {
    const webhookUrl = this.#calls.checkUrl(input.webhook_url, 'webhook_url');
    const metadata = input.metadata ?? {};
    const call = await this.#newCall(scope, {
      to: input.to, from: input.from, agentId: input.agent_id ?? null, ivrId: input.ivr_id ?? null, conferenceId: null, webhookUrl,
      record: input.record ?? false, maxDuration: input.max_duration ?? CALL_MAX_DURATION.default, metadata,
    });
    return { call, metadata };
  }

  /**
   * A committed new call: this instance's subscribers (and a callUpdated subscription started on
   * this answer) have the call as committed; the commit's NOTIFY of `call.initiated` is
   * skipped here instead of making each subscriber read the call again. The caller sees what it
   * sent (like a send's echo), even when the PHI keys are stored sealed.
   */
  #committed(call: Call, event: NewCall['event'], metadata: Record<string, unknown>): CallView {
    this.#calls.delivered([{ kind: 'event', id: event.id as string, organizationId: call.organizationId, mode: call.mode, type: event.type as string, resourceId: call.id }], [call]);
    const view = this.#calls.view(call);
    return view.phi ? { ...view, metadata, phi: null } : view;
  }

  async create(scope: Scope, input: CreateCallInput, prepared?: PreparedCall): Promise<CallView> {
    if (prepared && 'placed' in prepared) return prepared.placed;
    await this.#calls.route(scope);
    // The quota (at least one included minute left: live mode, blocking plans only), the consent and
    // the numbers (looked up already when the operation prepared them) at once; their errors still
    // come in this order.
    const [quota, { consent, numbers }] = await Promise.all([
      Promise.allSettled([this.#quotas()?.check(scope, 'voice_minutes', 1)]).then((r) => r[0]),
      prepared?.looked ?? this.#lookupsFor(scope, input),
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
    return this.#timeline && scope.mode === 'test' ? timelinePlacement(this.#calls.gateway(scope), scope, call) : undefined;
  }

  /** A new call in `initiating`, its event, and the placement job, in the caller's transaction (conference legs). */
  async placeInTx(tx: EntityManager, scope: Scope, c: NewCallFields): Promise<Call> {
    const row = await this.#newCall(scope, c);
    await this.#charge(scope, row, tx);
    const call = tx.create(Call, row);
    this.#calls.emit(tx, call, call.createdAt);
    await this.#jobs.enqueue(PLACE_CALL_JOB, { callId: call.id }, { scope, em: tx });
    return call;
  }

  /**
   * An inbound call (calls.inbound.ts): stored in `initiating` with `direction: inbound`, its
   * `call.initiated` event and its minutes reserved, in one transaction; nothing is placed (the
   * gateway answers it and reports `answered`). `prepare` sets what the route needs on the row (a voicemail's state, its step).
   */
  async inbound(scope: Scope, c: NewCallFields, prepare?: (row: Call, step: (type: string, detail: Record<string, unknown>) => void) => void): Promise<Call> {
    const row = await this.#newCall(scope, c);
    row.direction = 'inbound';
    prepare?.(row, (type, detail) => this.#calls.step(row, type, row.createdAt, detail));
    return tenantEm(this.#orm, scope).transactional(async (tx) => {
      await this.#charge(scope, row, tx);
      const call = tx.create(Call, row);
      this.#calls.emit(tx, call, call.createdAt);
      return call;
    });
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
      this.#calls.step(call, 'credit_limit', call.createdAt, { max_duration_requested: call.maxDuration, max_duration: charge.minutes * 60, minutes: charge.minutes, included_minutes: charge.poolMinutes });
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
      durationSeconds: null, recordingSeconds: null, gateway: this.#calls.gateway(scope).name, gatewayReference: null, gatewaySeq: 0, errorCode: null, sipCode: null, creditReservationId: null, poolMinutes: 0, poolPeriod: null,
      endReason: null, ivrState: null, steps: [{ at: now.toISOString(), type: 'status', detail: { status: 'initiating' } }], sequence: 1,
      createdAt: now, updatedAt: now, ringingAt: null, answeredAt: null, endedAt: null, contentPurgedAt: null,
    };
  }
}
