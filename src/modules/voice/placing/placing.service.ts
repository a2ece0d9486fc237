/**
 * Placing calls: POST /v1/voice/calls (`prepare` with its lookups while the rate-limit admission
 * is in flight, then `create`), the legs a conference dials (`placeInTx`, in the caller's
 * transaction) and inbound calls a live trunk offers (`inbound`). A new call is checked (route,
 * numbers, consent, quota, agent, IVR), its live minutes reserved, and group-committed with its
 * `call.initiated` event and its placement (a sandbox timeline row or script for a test call,
 * else a job: store/inserts.ts); a test call without agent or IVR is written by its lookups'
 * statement when they allow it (`prepare`).
 */
import type { Pool } from 'pg';
import type { Ports } from '../../manifest.ts';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../../platform/clock.ts';
import { ServiceError } from '../../../platform/errors.ts';
import { listConfigured } from '../../../platform/configured.ts';
import { newId } from '../../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../../platform/db/tenant.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import { eventRow } from '../../../platform/events/events.ts';
import type { AdmissionTake } from '../../../platform/operations.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import type { CallLookupReads, CallLookups } from './lookups.ts';
import { CallInserts, type GatedNewCall, type NewCall } from '../store/inserts.ts';
import type { LockedCalls } from '../store/locked.ts';
import type { CallBilling, CallCharge } from '../voice.billing.ts';
import { Call, IvrFlow } from '../voice.entities.ts';
import type { VoiceAgentsPort } from '../voice.ports.ts';
import type { CreateCallInput } from '../voice.schemas.ts';
import { CALL_MAX_DURATION } from '../voice.schemas.ts';
import { sealCallMetadata, type VoicePhi } from '../voice.phi.ts';
import type { RecordingLinks } from '../recordings/recordings.ts';
import { timelinePlacement, type SandboxTimeline } from '../sandbox/timeline.ts';
import { callEvent, callView, type CallLifecycle, type CallTimer, type CallView } from '../calls/lifecycle.ts';
import type { CallRoutes } from '../calls/routes.ts';

/** The job that hands a call to its gateway (calls/gateway.ts `place`), when no sandbox timeline row places it. */
export const PLACE_CALL_JOB = 'voice.place-call';

export type NewCallFields = Pick<Call, 'to' | 'from' | 'agentId' | 'ivrId' | 'conferenceId' | 'webhookUrl' | 'record' | 'maxDuration' | 'metadata'>;

/**
 * What the operation's `prepare` hands `create`: the call as placed (written with its lookups),
 * or the lookups, with the call they were read for when its write waits for the admission.
 */
export type PreparedCall = { placed: CallView } | { looked: CallLookups; pending?: GatedNewCall };

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
  readonly #calls: CallLifecycle;
  readonly #routes: CallRoutes;
  readonly #locks: LockedCalls<CallTimer>;
  readonly #links: RecordingLinks;
  /** New calls' group commits, gated or not (store/inserts.ts). */
  readonly #inserts: CallInserts;

  constructor(deps: {
    orm: MikroORM; clock: Clock; pool: Pool; jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>; timeline: SandboxTimeline | undefined;
    lookups: CallLookupReads; billing: CallBilling | undefined; quotas: () => Ports['planQuotas'] | undefined;
    agents: () => VoiceAgentsPort | undefined; phi: VoicePhi; lifecycle: CallLifecycle; routes: CallRoutes; locks: LockedCalls<CallTimer>; links: RecordingLinks;
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
    this.#calls = deps.lifecycle;
    this.#routes = deps.routes;
    this.#locks = deps.locks;
    this.#links = deps.links;
    // Placed calls are group-committed: the rows, `call.initiated` events and placements of
    // concurrent requests in one statement. With the sandbox timeline, a test call's placement is
    // rows there (sandbox/timeline.ts), not a job: the sandbox's script itself (the call is placed
    // as it commits), or a placement row when the gateway has no script.
    this.#inserts = new CallInserts({ orm: deps.orm, pool: deps.pool, jobs: deps.jobs, placeJob: PLACE_CALL_JOB, timeline: deps.timeline !== undefined, lookups: deps.lookups });
  }

  /** The reads a new call starts from, settled (placing/lookups.ts); create() raises their errors. */
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
    const gated = scope.mode === 'test' && !input.agent_id && !input.ivr_id && this.#inserts.gated();
    // A call that cannot even be built (a webhook_url refused, say) gets the lookups alone: create() raises its error in the documented order.
    const item = gated ? await this.#gatedItem(scope, input, admission).catch(() => undefined) : undefined;
    if (!item) return { looked: await this.#lookupsFor(scope, input) };
    const answer = await this.#inserts.writeGated(item);
    if (answer.written) return { placed: this.#placed(item) };
    return { looked: answer.lookups, pending: item };
  }

  /** A test call to send with its lookups: built as create() builds it, with its timeline rows and what the gate checks. */
  async #gatedItem(scope: Scope, input: CreateCallInput, admission: AdmissionTake | undefined): Promise<GatedNewCall> {
    const { call, metadata } = await this.#build(scope, input);
    const timeline = this.#placement(scope, call);
    if (!timeline) throw new Error('a gated call has sandbox timeline rows');
    const event = eventRow(scope, callEvent(call), call.createdAt);
    return { scope, call, event, timeline: timeline.rows, due: timeline.due, metadata, gate: { tenant: scope, to: input.to, from: input.from, admission } };
  }

  /** A gated call as written: its timeline expected, this instance's subscribers told, its view. */
  #placed(n: GatedNewCall): CallView {
    this.#timeline!.expect(n.due);
    return this.#committed(n.call, n.event, n.metadata);
  }

  /** A new call in `initiating` as create() builds it from the input (its webhook_url checked first), and the metadata the caller sent. */
  async #build(scope: Scope, input: CreateCallInput): Promise<{ call: Call; metadata: Record<string, unknown> }> {
    const webhookUrl = this.#routes.checkUrl(input.webhook_url, 'webhook_url');
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
    this.#locks.delivered([{ kind: 'event', id: event.id as string, organizationId: call.organizationId, mode: call.mode, type: event.type as string, resourceId: call.id }], [call]);
    const view = callView(call, this.#links, this.#clock.now());
    return view.phi ? { ...view, metadata, phi: null } : view;
  }

  async create(scope: Scope, input: CreateCallInput, prepared?: PreparedCall): Promise<CallView> {
    if (prepared && 'placed' in prepared) return prepared.placed;
    await this.#routes.route(scope);
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
      throw new ServiceError('VALIDATION_ERROR', `from must be one of this account's voice-capable numbers: ${listConfigured(owned)}`, { field: 'from', value: input.from, expected: 'an owned number with the voice capability', voice_numbers: owned });
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
      const again = await this.#inserts.writeGated(pending);
      return again.written ? this.#placed(pending) : this.create(scope, input);
    }
    const { call, metadata } = await this.#build(scope, input);
    // Live calls reserve their minutes first (402 and nothing stored when not one is covered).
    const charge = await this.#charge(scope, call);
    try {
      // The row, its `call.initiated` event and its placement job commit together, with other requests' calls.
      const timeline = this.#placement(scope, call);
      const event = eventRow(scope, callEvent(call), call.createdAt);
      await this.#inserts.write({ scope, call, event, ...(timeline ? { timeline: timeline.rows } : {}) });
      if (timeline) this.#timeline!.expect(timeline.due);
      return this.#committed(call, event, metadata);
    } catch (e) {
      if (charge) await this.#billing!.release(scope, charge).catch(() => {});
      throw e;
    }
  }

  /** A test call's rows of the sandbox timeline (none without it, or for a live call: a job places those). */
  #placement(scope: Scope, call: Call): { rows: Record<string, unknown>[]; due: number[] } | undefined {
    return this.#timeline && scope.mode === 'test' ? timelinePlacement(this.#routes.gateway(scope), scope, call) : undefined;
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
   * An inbound call (inbound/router.ts): stored in `initiating` with `direction: inbound`, its
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
   * A transfer's second leg (calls/transfers.ts): an outbound call stored in `initiating` with its
   * `call.initiated` event and its minutes reserved, in one transaction; no placement job (the
   * gateway holding the transferred call places it, so both legs' audio is in one process).
   */
  async transferLeg(scope: Scope, c: NewCallFields): Promise<Call> {
    const row = await this.#newCall(scope, c);
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
      durationSeconds: null, recordingSeconds: null, gateway: this.#routes.gateway(scope).name, gatewayReference: null, gatewaySeq: 0, errorCode: null, sipCode: null, creditReservationId: null, poolMinutes: 0, poolPeriod: null,
      endReason: null, ivrState: null, steps: [{ at: now.toISOString(), type: 'status', detail: { status: 'initiating' } }], sequence: 1,
      createdAt: now, updatedAt: now, ringingAt: null, answeredAt: null, endedAt: null, contentPurgedAt: null,
    };
  }
}
