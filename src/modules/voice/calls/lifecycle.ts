/**
 * A call's forward-only lifecycle, as the layers above drive it on a locked row: steps logged,
 * statuses moved (each with its `call.*` event, which also carries the call's webhook_url, so the
 * webhooks fan-out sends the signed status callback), timers set, prompts spoken, and the end
 * (timestamps, duration, recording, voice minutes, a voicemail being recorded kept, the conference
 * leg told, the credit reservation settled, a live call hung up at its gateway). Inside a locked
 * change (store/locked.ts) what it adds is written with the calls in one statement; elsewhere
 * through the caller's transaction. The IVR runner, the gateway side, placing, conferences and an
 * installed call script (CallControl, ScriptControl) act through it; conference legs and the
 * script are told of answers and ends through the hooks they install here (LegHooks, ScriptHooks).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import { emitEvent, type EventInput } from '../../../platform/events/events.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import { recordUsage } from '../../../platform/usage/usage.ts';
import type { CallOrder, Speech, VoiceGateway, VoiceGateways } from '../../../providers/voice/types.ts';
import type { RecordingLinks } from '../recordings/recordings.ts';
import { TIMER_SEQ, timerRow } from '../sandbox/timeline.ts';
import type { LockedCalls } from '../store/locked.ts';
import type { CallBilling } from '../voice.billing.ts';
import type { Call } from '../voice.entities.ts';
import type { AgentCall, AgentTurn, VoiceAgentsPort } from '../voice.ports.ts';
import { billedMinutes, canMove, eventFor, type CallStatus, type CallStep } from '../voice.states.ts';

/** Ends a live call at the gateway after we ended it here (max_duration, an IVR hangup): durable, so any instance can. */
export const GATEWAY_HANGUP_JOB = 'voice.gateway-hangup';
export type GatewayHangup = { callId: string; organizationId: string; mode: 'live' | 'test'; reference: string | null };
export const CALL_TIMER_JOB = 'voice.call-timer';
export const VOICE_MINUTES_KIND = 'voice.minutes';

export type CallTimer = { organizationId: string; mode: 'live' | 'test'; callId: string; kind: 'max_duration' | 'ivr_timeout' | 'voicemail_limit' | 'script' | 'dial_timeout'; prompt?: number };

/**
 * A call as read: its recording's signed URL, and (`get`, `list`) what the ledger charged for it
 * (`charge`: minor units and currency code; null until charged).
 */
export type CallView = Call & { recordingUrl: string | null; charge?: { amount: number; currency: string } | null };

/** The call as the API shows it: the row plus a fresh signed recording link. */
export function callView(call: Call, links: RecordingLinks, now: Date): CallView {
  const recordingUrl = call.recordingSeconds != null ? links.url(call, call.id, now) : null;
  return Object.assign(call, { recordingUrl });
}

/** The `call.*` event of the call's current status. */
export function callEvent(call: Call): EventInput {
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

/** The call as the agents port sees it. */
export function agentCall(call: Call): AgentCall {
  return { callId: call.id, from: call.from, to: call.to, agentId: call.agentId ?? '' };
}

/** Where a message a caller leaves goes: a voicemail box (voicemail/voicemail.service.ts), in the call's transaction. */
export type VoicemailDeposit = {
  /** `recording`: a live call's recorded message (its id), whose audio the gateway saved. */
  deposit(tx: EntityManager, call: Call, boxId: string, seconds: number, now: Date, recording?: string): Promise<unknown>;
};

/** Hooks for conference legs (the conferences service installs them). */
export type LegHooks = {
  answered(tx: EntityManager, call: Call, now: Date): Promise<void>;
  ended(tx: EntityManager, call: Call, now: Date): Promise<void>;
  /** A call to a dial-in number (IvrState.pin): it is asked for the PIN once answered, and each key goes here. */
  pinAsked?(tx: EntityManager, call: Call, now: Date): void;
  pinKey?(tx: EntityManager, call: Call, key: string, now: Date): Promise<void>;
};

/** Transfers (calls/transfers.ts, installed here): the second leg of a call transferred to `number`, stored, and where it goes. */
export type TransferHooks = {
  leg(call: Call, number: string): Promise<CallOrder>;
};

/**
 * Hooks for dialed legs (calls/dialing.ts installs them): a leg a call dialed (`metadata.dialed_by`)
 * was answered or ended; told in the leg's change, they tell the call that dialed it later (a job).
 */
export type DialHooks = {
  answered(tx: EntityManager, leg: Call, now: Date): Promise<void>;
  ended(tx: EntityManager, leg: Call, now: Date): Promise<void>;
};

/** A dialed leg as the call that dialed it is told of it (calls/dialing.ts). */
export type DialedLeg = { id: string; to: string; status: CallStatus; durationSeconds: number | null; answered: boolean; sipCode: number | null };

/**
 * A call script installed from outside voice (the Twilio surface's TwiML engine): told when a call
 * is answered, of each key pressed, and when one of its `script` timers fires, each time on the
 * call's locked row, with the control to step, end and time the call.
 */
export type ScriptHooks = {
  answered(tx: EntityManager, call: Call, now: Date): Promise<void>;
  key(tx: EntityManager, call: Call, key: string, now: Date): Promise<void>;
  timedOut(tx: EntityManager, call: Call, prompt: number, now: Date): Promise<void>;
  /** A recording the script made (its id is the script's), for the recordings' link: its length, or null. */
  recording?(tenant: TenantRef, id: string): Promise<{ seconds: number } | null>;
  /** The call (a scripted one) is ending: what it dialed and still rings or talks is hung up. */
  ended?(tx: EntityManager, call: Call, now: Date): Promise<void>;
  /**
   * The call's document is replaced (`script`: what the surface was given, e.g. `{ twiml }` or
   * `{ url }`): the verb under way is interrupted and the new document starts; a call not answered
   * yet starts with it when answered.
   */
  replace?(tx: EntityManager, call: Call, script: Record<string, string>, now: Date): Promise<void>;
  /** A leg the call dialed (ScriptControl.dial) was answered or ended, on the dialing call's locked row. */
  dialed?(tx: EntityManager, call: Call, leg: DialedLeg, event: 'answered' | 'ended', now: Date): Promise<void>;
};

/** What a script may do to calls: CallControl, and locked changes of its own (after a fetch). */
export type ScriptControl = CallControl & DialControl & {
  locked(tenant: TenantRef, id: string, change: (tx: EntityManager, call: Call, now: Date) => Promise<void>): Promise<Call | undefined>;
  /** A signed link to a recording of the script (`GET /v1/voice/recordings/{id}`, served by ScriptHooks.recording). */
  recordingUrl(tenant: TenantRef, id: string, now: Date): string;
};

/**
 * Dialing from a locked call (calls/dialing.ts): a second leg placed as every placed call is, a
 * conference joined by name, a leg hung up. `dial` and `join` answer a refusal (`code`: the reason)
 * instead of throwing, so the caller decides what the call does next.
 */
export type DialControl = {
  dial(tx: EntityManager, call: Call, order: DialOrder): Promise<{ leg: Call } | { refused: DialRefusal }>;
  hangupLeg(tx: EntityManager, call: Call, legId: string, reason: string): Promise<void>;
  join(tx: EntityManager, call: Call, room: JoinOrder, now: Date): Promise<{ conferenceId: string; created: boolean } | { refused: DialRefusal }>;
  /** The call, still up, leaves the conference it joined. */
  leave(tx: EntityManager, call: Call, now: Date): Promise<void>;
};
/** A second leg: to an E.164 number, shown from `callerId` (null: the dialing call's `from`), ringing at most `timeoutSeconds`. */
export type DialOrder = { to: string; callerId: string | null; timeoutSeconds: number; record: boolean; maxDuration: number | null };
/** A conference joined by name (created on the first join). */
export type JoinOrder = { name: string; muted: boolean; maxParticipants: number | null };
/** Why a dial or join did not happen: `caller_id` (not the account's), `opted_out`, `full`, `ended`. */
export type DialRefusal = { reason: 'caller_id' | 'opted_out' | 'full'; message: string };

/** What the IVR runner, conferences and a call script may do to a locked call. */
export type CallControl = {
  step(call: Call, type: string, now: Date, detail?: Record<string, unknown>): void;
  end(tx: EntityManager, call: Call, status: CallStatus, reason: string, now: Date): Promise<void>;
  timer(tx: EntityManager, timer: Omit<CallTimer, 'organizationId' | 'mode'>, call: Call, afterSeconds: number): Promise<void>;
  agents(): VoiceAgentsPort | undefined;
  /**
   * The call's agent (call.agentId) joins it: its first turn. On a live call whose audio this
   * process carries the turn runs once the change commits (a model's answer is not awaited under
   * the call's row lock) and the agent then talks with the caller through the gateway (converse).
   */
  agentJoined(tx: EntityManager, call: Call): Promise<void>;
  /**
   * Speaks prompts on a live call whose audio this process carries, once the change commits; true
   * when it will (the gateway then reports `prompted` when they were spoken), false otherwise
   * (test calls, no media here).
   */
  say(tx: EntityManager, call: Call, speech: Speech): boolean;
  /**
   * Transfers a live call whose audio this process carries to `number` once the change commits (a
   * second leg on the trunk, bridged when it answers: the gateway reports how each leg ends); true
   * when it will, false otherwise (test calls, no media here).
   */
  transfer(tx: EntityManager, call: Call, number: string): boolean;
  /** Mixes a live call's audio in the conference room `room` once the change commits; true when it will. */
  joinRoom(tx: EntityManager, call: Call, room: string, muted: boolean): boolean;
};

export class CallLifecycle implements CallControl {
  readonly #jobs: Pick<Jobs, 'enqueue'>;
  readonly #gateways: VoiceGateways;
  readonly #locks: LockedCalls<CallTimer>;
  readonly #timerRows: boolean;
  readonly #billing: CallBilling | undefined;
  readonly #voicemail: VoicemailDeposit;
  readonly #agents: () => VoiceAgentsPort | undefined;
  readonly #log: (message: string, detail: Record<string, unknown>) => void;
  #legs: LegHooks | undefined;
  #script: ScriptHooks | undefined;
  #transfers: TransferHooks | undefined;
  #dials: DialHooks | undefined;

  /**
   * `timerRows`: a call's max_duration timer is a row of the sandbox timeline (sandbox/timeline.ts),
   * else a job like the other timers; `billing`: live calls paid from credits (without it they are
   * not charged); `voicemail`: where a message being recorded goes when its call ends.
   */
  constructor(deps: {
    jobs: Pick<Jobs, 'enqueue'>; gateways: VoiceGateways; locks: LockedCalls<CallTimer>; timerRows: boolean; billing: CallBilling | undefined;
    voicemail: VoicemailDeposit; agents: () => VoiceAgentsPort | undefined; log?: (message: string, detail: Record<string, unknown>) => void;
  }) {
    this.#log = deps.log ?? (() => {});
    this.#jobs = deps.jobs;
    this.#gateways = deps.gateways;
    this.#locks = deps.locks;
    this.#timerRows = deps.timerRows;
    this.#billing = deps.billing;
    this.#voicemail = deps.voicemail;
    this.#agents = deps.agents;
  }

  installLegHooks(hooks: LegHooks): void {
    this.#legs = hooks;
  }

  installScriptHooks(hooks: ScriptHooks): void {
    this.#script = hooks;
  }

  installTransfers(hooks: TransferHooks): void {
    this.#transfers = hooks;
  }

  installDialHooks(hooks: DialHooks): void {
    this.#dials = hooks;
  }

  /** The dialed legs' hooks, if installed. */
  dials(): DialHooks | undefined {
    return this.#dials;
  }

  /** The conference legs' hooks, if installed. */
  legs(): LegHooks | undefined {
    return this.#legs;
  }

  /** The call script installed (TwiML), if any. */
  script(): ScriptHooks | undefined {
    return this.#script;
  }

  agents(): VoiceAgentsPort | undefined {
    return this.#agents();
  }

  step(call: Call, type: string, now: Date, detail?: Record<string, unknown>): void {
    const step: CallStep = { at: now.toISOString(), type, ...(detail ? { detail } : {}) };
    call.steps = [...call.steps, step];
    call.updatedAt = now;
  }

  /** Moves the call forward to `status` (logged); false when that would not be forward. */
  move(call: Call, status: CallStatus, now: Date): boolean {
    if (!canMove(call.status, status)) return false;
    call.status = status;
    call.sequence += 1;
    this.step(call, 'status', now, { status });
    return true;
  }

  /** The call's `call.*` event of its current status, with the change. */
  emit(tx: EntityManager, call: Call, now: Date): void {
    const writes = this.#locks.writes(tx);
    if (writes) writes.events.push({ call, input: callEvent(call), now });
    else emitEvent(tx, call, callEvent(call), now);
  }

  /** Ends an active call: timestamps, duration, recording, usage, conference leg, its event. */
  async end(tx: EntityManager, call: Call, status: CallStatus, reason: string, now: Date): Promise<void> {
    if (!this.move(call, status, now)) return;
    call.endedAt = now;
    call.endReason = reason;
    call.durationSeconds = call.answeredAt ? Math.max(0, Math.round((now.getTime() - call.answeredAt.getTime()) / 1000)) : 0;
    if (call.answeredAt) {
      // Its max_duration timer on the timeline goes with the end (timer(): absent when it was a job).
      if (this.#timerRows) this.#locks.writes(tx)?.consumed.push({ callId: call.id, seq: TIMER_SEQ });
      // A live call's recording reports its own length when its media closes (`recorded`), maybe before this.
      if (call.record && (call.mode !== 'live' || call.recordingSeconds == null)) call.recordingSeconds = call.durationSeconds;
      await this.#keepVoicemail(tx, call, now);
      const usage = { context: 'voice', kind: VOICE_MINUTES_KIND, quantity: billedMinutes(call.durationSeconds), resourceId: call.id, idempotencyKey: `${call.id}:minutes` };
      const writes = this.#locks.writes(tx);
      if (writes) writes.usage.push({ tenant: call, input: usage, now });
      else await recordUsage(tx, call, usage, now);
    }
    if (call.conferenceId) await this.#legs?.ended(tx, call, now);
    if (typeof call.metadata?.dialed_by === 'string') await this.#dials?.ended(tx, call, now);
    await this.#script?.ended?.(tx, call, now);
    // A paid call keeps the minutes it was billed and gives the rest of its reservation back.
    if ((call.creditReservationId || call.poolMinutes > 0) && this.#billing) {
      await this.#billing.settle(call, call, call.answeredAt ? billedMinutes(call.durationSeconds ?? 0) : 0, tx);
    }
    // Ended here while still up at a live gateway (max_duration, an IVR hangup): hang it up there.
    if (call.mode === 'live' && !['remote', 'hangup', 'gateway', 'media_timeout', 'voicemail', 'transfer_failed', 'transfer_ended'].includes(reason)) {
      const data: GatewayHangup = { callId: call.id, organizationId: call.organizationId, mode: call.mode, reference: call.gatewayReference ?? null };
      await this.#jobs.enqueue(GATEWAY_HANGUP_JOB, data, { em: tx });
    }
    this.emit(tx, call, now);
  }

  /** The call is ending: a voicemail being recorded into a box (an IVR's voicemail action) becomes a message. */
  async #keepVoicemail(tx: EntityManager, call: Call, now: Date): Promise<void> {
    const open = call.ivrState?.voicemail;
    // A live recording is reported by the gateway (speech); without that report the caller left nothing.
    if (!open || open.messageId) return;
    call.ivrState = { ...call.ivrState!, voicemail: null };
    const seconds = Math.round((now.getTime() - new Date(open.since).getTime()) / 1000);
    await this.#voicemail.deposit(tx, call, open.boxId, seconds, now);
  }

  async agentJoined(tx: EntityManager, call: Call): Promise<void> {
    const agents = this.#agents();
    if (!agents || !call.agentId) return;
    const gateway = call.mode === 'live' ? this.#gateways.forMode('live') : undefined;
    if (!gateway?.converse || !gateway.speaks?.(call.id) || !agents.reply) {
      await agents.callStarted(call, agentCall(call));
      return;
    }
    const tenant = { organizationId: call.organizationId, mode: call.mode };
    const who = agentCall(call);
    const converse = gateway.converse.bind(gateway);
    const run = () => void this.#talk(converse, agents, tenant, who);
    const writes = this.#locks.writes(tx);
    if (writes) writes.after.push(run);
    else run();
  }

  /** The agent's first turn (its greeting), then the agent talks on the call, each utterance a turn of the same conversation. */
  async #talk(converse: NonNullable<VoiceGateway['converse']>, agents: VoiceAgentsPort, tenant: TenantRef, who: AgentCall): Promise<void> {
    let first: AgentTurn | undefined;
    try {
      first = await agents.callStarted(tenant, who);
    } catch (e) {
      this.#log(`voice: the agent's first turn on call ${who.callId} failed: ${(e as Error).message}`, { call_id: who.callId, agent_id: who.agentId });
    }
    let conversationId = first?.conversationId;
    const talking = converse(who.callId, {
      language: 'en-US', ...(first?.text ? { greeting: first.text } : {}),
      reply: async (text) => {
        const turn = await agents.reply!(tenant, who, { text, conversationId });
        conversationId = turn.conversationId;
        return turn;
      },
    });
    if (!talking) this.#log(`voice: the agent cannot talk on call ${who.callId} (no media or speech to text here)`, { call_id: who.callId });
  }

  say(tx: EntityManager, call: Call, speech: Speech): boolean {
    if (call.mode !== 'live') return false;
    const gateway = this.#gateways.forMode('live');
    if (!gateway?.say || !gateway.speaks?.(call.id)) return false;
    const run = () => gateway.say!(call.id, speech);
    const writes = this.#locks.writes(tx);
    if (writes) writes.after.push(run);
    else run();
    return true;
  }

  transfer(tx: EntityManager, call: Call, number: string): boolean {
    const transfers = this.#transfers;
    if (call.mode !== 'live' || !transfers) return false;
    const gateway = this.#gateways.forMode('live');
    if (!gateway?.bridge || !gateway.speaks?.(call.id)) return false;
    const snapshot = { ...call };
    const run = () => {
      if (!gateway.bridge!(call.id, () => transfers.leg(snapshot, number))) return;
    };
    const writes = this.#locks.writes(tx);
    if (writes) writes.after.push(run);
    else run();
    return true;
  }

  joinRoom(tx: EntityManager, call: Call, room: string, muted: boolean): boolean {
    if (call.mode !== 'live') return false;
    const gateway = this.#gateways.forMode('live');
    if (!gateway?.join || !gateway.speaks?.(call.id)) return false;
    const run = () => void gateway.join!(call.id, room, muted);
    const writes = this.#locks.writes(tx);
    if (writes) writes.after.push(run);
    else run();
    return true;
  }

  async timer(tx: EntityManager, timer: Omit<CallTimer, 'organizationId' | 'mode'>, call: Call, afterSeconds: number): Promise<void> {
    const data: CallTimer = { ...timer, organizationId: call.organizationId, mode: call.mode };
    const startAfter = new Date(Date.now() + afterSeconds * 1000);
    // Inside a locked transaction the timers are inserted together before it commits: a call's
    // max_duration as its row of the timeline (no job to insert, fetch and complete), others as jobs.
    const writes = this.#locks.writes(tx);
    if (writes && timer.kind === 'max_duration' && this.#timerRows) writes.timeline.push(timerRow(call.id, startAfter));
    else if (writes) writes.timers.push({ data, startAfter });
    else await this.#jobs.enqueue(CALL_TIMER_JOB, data, { em: tx, startAfter });
  }
}
