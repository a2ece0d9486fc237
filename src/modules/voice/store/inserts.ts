/**
 * Test calls written in their lookups' statement. A POST /v1/voice/calls with a test key and
 * neither agent nor IVR is sent with its lookups (calls.lookups.ts `gate`): one statement reads the
 * consent of `to` and the organization's voice numbers, takes the request's rate-limit slots when
 * they are still queued, and writes the call (row, `call.initiated` event, sandbox timeline rows)
 * only when the take admitted it (or its admission came back already), the tenant holds `from`
 * and `to` did not opt out. The POST is then one round trip. A call the gate leaves out comes back
 * with its lookups: CallsService.create raises their errors in the documented order, or, once the
 * request is admitted, sends it through the gate again (`again`). Test mode only: a live call
 * holds its quota and credit first, which the gate does not.
 */
import type { Pool } from 'pg';
import { GroupInsert, type GroupInsertSet } from '../../../platform/db/groupInsert.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import { eventRow } from '../../../platform/events/events.ts';
import type { AdmissionTake } from '../../../platform/operations.ts';
import type { CallLookupReads, CallLookups, GatedAnswer, GatedCall } from '../placing/lookups.ts';
import { callEvent } from './locked.ts';
import type { SandboxTimeline } from '../sandbox/timeline.ts';
import type { CallView } from '../calls/lifecycle.ts';
import type { Call } from '../voice.entities.ts';
import type { CreateCallInput } from '../voice.schemas.ts';

/** A call accepted by POST /v1/voice/calls, waiting for its group commit (`event`: its `call.initiated` row). */
export type NewCall = { scope: Scope; call: Call; event: ReturnType<typeof eventRow>; timeline?: Record<string, unknown>[] };

/** A test call sent with its lookups, written by their statement when they allow it. */
export type GatedNewCall = NewCall & { timeline: Record<string, unknown>[]; due: number[]; gate: GatedCall; metadata: Record<string, unknown> };

/**
 * What the operation's `prepare` hands `create`: the call as placed (written with its lookups),
 * or the lookups, with the call they were read for when its write waits for the admission.
 */
export type PreparedCall = { placed: CallView } | { looked: CallLookups; pending?: GatedNewCall };

export class GatedPlacements {
  readonly #pool: Pool;
  readonly #lookups: CallLookupReads;
  readonly #sets: readonly GroupInsertSet<NewCall>[];
  readonly #timeline: SandboxTimeline;
  readonly #build: (scope: Scope, input: CreateCallInput) => Promise<{ call: Call; metadata: Record<string, unknown> }>;
  readonly #placement: (scope: Scope, call: Call) => { rows: Record<string, unknown>[]; due: number[] } | undefined;
  readonly #committed: (call: Call, event: NewCall['event'], metadata: Record<string, unknown>) => CallView;
  /** Made on first use (the consent port is resolved late); null: the lookups offer no gate. */
  #group: GroupInsert<GatedNewCall, GatedAnswer> | null | undefined;

  /**
   * `sets`: the rows of a new call, as the calls service's own group commit writes them; `build`:
   * a new call as create() builds it (its webhook_url checked); `placement`: its timeline rows;
   * `committed`: this instance's subscribers told, and the caller's view.
   */
  constructor(deps: {
    pool: Pool; lookups: CallLookupReads; sets: readonly GroupInsertSet<NewCall>[]; timeline: SandboxTimeline;
    build: (scope: Scope, input: CreateCallInput) => Promise<{ call: Call; metadata: Record<string, unknown> }>;
    placement: (scope: Scope, call: Call) => { rows: Record<string, unknown>[]; due: number[] } | undefined;
    committed: (call: Call, event: NewCall['event'], metadata: Record<string, unknown>) => CallView;
  }) {
    this.#pool = deps.pool;
    this.#lookups = deps.lookups;
    this.#sets = deps.sets;
    this.#timeline = deps.timeline;
    this.#build = deps.build;
    this.#placement = deps.placement;
    this.#committed = deps.committed;
  }

  /**
   * The call written with its lookups when it fits (test mode, no agent, no IVR) and the gate lets
   * it through; otherwise the lookups, with the call when only its admission was missing. A call
   * that cannot even be built (a webhook_url refused, say) gets the lookups alone: create() raises
   * its error in the documented order.
   */
  async prepare(scope: Scope, input: CreateCallInput, admission: AdmissionTake | undefined): Promise<PreparedCall> {
    const group = scope.mode === 'test' && !input.agent_id && !input.ivr_id ? this.#gatedGroup() : null;
    const item = group ? await this.#item(scope, input, admission).catch(() => undefined) : undefined;
    if (!group || !item) return { looked: await this.#lookups.lookups(scope, input.to) };
    const answer = await group.submit(item);
    if (answer.written) return { placed: this.#placed(item) };
    return { looked: answer.lookups, pending: item };
  }

  /**
   * A call the gate left out only for its admission, sent again once admitted; null when the gate
   * still leaves it out (what it saw changed since, a number released): the caller then goes the
   * whole way once more, from fresh reads.
   */
  async again(pending: GatedNewCall): Promise<CallView | null> {
    const answer = await this.#gatedGroup()!.submit(pending);
    return answer.written ? this.#placed(pending) : null;
  }

  #gatedGroup(): GroupInsert<GatedNewCall, GatedAnswer> | null {
    if (this.#group !== undefined) return this.#group;
    const gate = this.#lookups.gate<GatedNewCall>((n) => n.gate);
    this.#group = gate ? new GroupInsert<GatedNewCall, GatedAnswer>({ pool: this.#pool, name: 'voice_calls_gated', sets: this.#sets, gate }) : null;
    return this.#group;
  }

  async #item(scope: Scope, input: CreateCallInput, admission: AdmissionTake | undefined): Promise<GatedNewCall> {
    const { call, metadata } = await this.#build(scope, input);
    const timeline = this.#placement(scope, call);
    if (!timeline) throw new Error('a gated call has sandbox timeline rows');
    const event = eventRow(scope, callEvent(call), call.createdAt);
    return { scope, call, event, timeline: timeline.rows, due: timeline.due, metadata, gate: { tenant: scope, to: input.to, from: input.from, admission } };
  }

  /** A gated call as written: its timeline expected, this instance's subscribers told, its view. */
  #placed(n: GatedNewCall): CallView {
    this.#timeline.expect(n.due);
    return this.#committed(n.call, n.event, n.metadata);
  }
}
