/**
 * Calls as the API reads and ends them: get, list (with what the ledger charged), the live
 * subscription's committed calls, hangup, and the sandbox's keys pressed on a test call; and the
 * call script a surface installs (the Twilio surface's TwiML). Placing calls is
 * placing/placing.service.ts; what the gateway reports, calls/gateway.ts; both change calls
 * through the lifecycle (calls/lifecycle.ts) under row locks (store/locked.ts), as this does.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../../platform/clock.ts';
import { ServiceError } from '../../../platform/errors.ts';
import { tenantEm, type TenantRef } from '../../../platform/db/tenant.ts';
import type { Scope } from '../../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../../platform/pagination.ts';
import type { CallBilling } from '../voice.billing.ts';
import { Call } from '../voice.entities.ts';
import type { ListCallsInput } from '../voice.schemas.ts';
import { isFinal } from '../voice.states.ts';
import type { RecordingLinks } from '../recordings/recordings.ts';
import type { IvrRunner } from '../ivr/runner.ts';
import type { VoicePhi } from '../voice.phi.ts';
import type { CallRows, LockedCalls } from '../store/locked.ts';
import { agentCall, callView, type CallLifecycle, type CallTimer, type CallView, type DialControl, type ScriptControl, type ScriptHooks } from './lifecycle.ts';
import type { CallRoutes } from './routes.ts';

export class CallsService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #rows: CallRows;
  readonly #locks: LockedCalls<CallTimer>;
  readonly #calls: CallLifecycle;
  readonly #routes: CallRoutes;
  readonly #ivr: IvrRunner;
  readonly #links: RecordingLinks;
  readonly #phi: VoicePhi;
  readonly #billing: CallBilling | undefined;

  constructor(deps: {
    orm: MikroORM; clock: Clock; cursors: CursorCodec; rows: CallRows; locks: LockedCalls<CallTimer>; lifecycle: CallLifecycle; routes: CallRoutes;
    ivr: IvrRunner; links: RecordingLinks; phi: VoicePhi; billing: CallBilling | undefined;
  }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#rows = deps.rows;
    this.#locks = deps.locks;
    this.#calls = deps.lifecycle;
    this.#routes = deps.routes;
    this.#ivr = deps.ivr;
    this.#links = deps.links;
    this.#phi = deps.phi;
    this.#billing = deps.billing;
  }

  /** Installs a call script (the Twilio surface's TwiML: twilio/twiml); answers what it may do to calls (`dialing`: calls/dialing.ts). */
  installScriptHooks(hooks: ScriptHooks, dialing: DialControl): ScriptControl {
    this.#calls.installScriptHooks(hooks);
    const calls = this.#calls;
    return {
      dial: (...a) => dialing.dial(...a), hangupLeg: (...a) => dialing.hangupLeg(...a), join: (...a) => dialing.join(...a), leave: (...a) => dialing.leave(...a),
      step: (...a) => calls.step(...a), end: (...a) => calls.end(...a), timer: (...a) => calls.timer(...a), agents: () => calls.agents(), agentJoined: (...a) => calls.agentJoined(...a), say: (...a) => calls.say(...a),
      transfer: (...a) => calls.transfer(...a), joinRoom: (...a) => calls.joinRoom(...a),
      locked: (tenant, id, change) => this.#locks.locked(tenant, id, change), recordingUrl: (tenant, id, now) => this.#links.url(tenant, id, now),
    };
  }

  /** A recording the installed script made (`<Record>`), by its id: its length, or null. */
  async scriptRecording(tenant: TenantRef, id: string): Promise<{ seconds: number } | null> {
    return (await this.#calls.script()?.recording?.(tenant, id)) ?? null;
  }

  /**
   * Replaces the document of the installed call script on a call not ended (`script` is the
   * script's: the Twilio surface's `{ twiml }` or `{ url }`): the verb under way is interrupted at
   * once and the new document runs (ScriptHooks.replace).
   */
  async redirect(scope: Scope, id: string, script: Record<string, string>): Promise<CallView> {
    const hooks = this.#calls.script();
    const call = await this.#locks.locked(scope, id, async (tx, c, now) => {
      if (isFinal(c.status)) throw alreadyEnded(c);
      if (!hooks?.replace) throw new ServiceError('CONFLICT', 'No call script is installed to run a new document', { id });
      await hooks.replace(tx, c, script, now);
    });
    if (!call) throw callNotFound(id);
    return (await this.#phi.calls(scope, [this.view(call)], 'voice.getCall'))[0]!;
  }

  async hangup(scope: Scope, id: string): Promise<CallView> {
    const before = await this.#rows.byId(scope, id);
    if (!before) throw callNotFound(id);
    if (isFinal(before.status)) throw alreadyEnded(before);
    // The agent hears about it first, so it can say goodbye and close its conversation.
    if (before.agentId) await this.#calls.agents()?.callEnding(scope, agentCall(before));
    await this.#routes.gateway(scope).hangup(id, before.gatewayReference ?? null);
    const ended = await this.#locks.locked(scope, id, async (tx, call, now) => {
      if (isFinal(call.status)) throw alreadyEnded(call);
      await this.#calls.end(tx, call, call.status === 'in_progress' ? 'completed' : 'cancelled', 'hangup', now);
    });
    if (!ended) throw callNotFound(id);
    return this.view(ended);
  }

  /** Test mode: keys pressed on the far end of an answered call (exercises IVRs end to end). */
  async sandboxDtmf(scope: Scope, id: string, digits: string): Promise<CallView> {
    const call = await this.#locks.locked(scope, id, async (tx, c, now) => {
      if (scope.mode !== 'test') throw new ServiceError('FORBIDDEN', 'Calls can be scripted only in test mode, with a test-mode credential', { mode: scope.mode });
      if (isFinal(c.status)) throw alreadyEnded(c);
      if (c.status !== 'in_progress') throw new ServiceError('CONFLICT', `The call is ${c.status}: keys can be pressed once it is answered`, { status: c.status });
      for (const key of digits) {
        await this.#ivr.key(tx, c, key, now);
        if (!isFinal(c.status)) await this.#calls.script()?.key(tx, c, key, now);
      }
    });
    if (!call) throw callNotFound(id);
    return (await this.#phi.calls(scope, [this.view(call)], 'voice.sandboxDtmf'))[0]!;
  }

  // ---- reads ----

  view(call: Call): CallView {
    return callView(call, this.#links, this.#clock.now());
  }

  /**
   * The call `id` as this instance committed it with event `eventId` (as get() shows it: PHI rules
   * applied), or undefined when this instance did not (the caller reads it: get()).
   */
  async committed(scope: Scope, id: string, eventId: string): Promise<CallView | undefined> {
    const call = this.#locks.committed.get(scope, id, eventId);
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
