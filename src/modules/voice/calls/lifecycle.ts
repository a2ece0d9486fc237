/** The calls service's constants and the types its collaborators share (calls.service.ts re-exports them). */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import type { Ports } from '../../manifest.ts';
import type { Config } from '../../../config.ts';
import type { Clock } from '../../../platform/clock.ts';
import type { TenantRef } from '../../../platform/db/tenant.ts';
import type { CursorCodec } from '../../../platform/pagination.ts';
import type { LiveNotice } from '../../../platform/events/bus.ts';
import type { Jobs } from '../../../platform/jobs/jobs.ts';
import type { Speech, TrunkOrder, VoiceGateways } from '../../../providers/voice/types.ts';
import type { CallBilling } from '../voice.billing.ts';
import type { Call } from '../voice.entities.ts';
import type { CallConsentPort, VoiceAgentsPort, VoiceNumbersPort } from '../voice.ports.ts';
import type { CallStatus } from '../voice.states.ts';
import type { RecordingLinks } from '../recordings/recordings.ts';
import type { VoicemailService } from '../voicemail/voicemail.service.ts';
import type { VoicePhi } from '../voice.phi.ts';
import type { SandboxTimeline } from '../sandbox/timeline.ts';
import type { Rider } from '../../../platform/db/pairedReads.ts';
import type { CounterTake, CounterTaken } from '../../../platform/ratelimit/limiter.ts';

export const PLACE_CALL_JOB = 'voice.place-call';
export const GATEWAY_EVENT_JOB = 'voice.gateway-event';
/** Ends a live call at the gateway after we ended it here (max_duration, an IVR hangup): durable, so any instance can. */
export const GATEWAY_HANGUP_JOB = 'voice.gateway-hangup';
export type GatewayHangup = { callId: string; organizationId: string; mode: 'live' | 'test'; reference: string | null };
export const CALL_TIMER_JOB = 'voice.call-timer';
export const VOICE_MINUTES_KIND = 'voice.minutes';

export type CallTimer = { organizationId: string; mode: 'live' | 'test'; callId: string; kind: 'max_duration' | 'ivr_timeout' | 'voicemail_limit' | 'script'; prompt?: number };
/** A call as the API shows it: the row plus a fresh signed recording link. */
/**
 * A call as read: its recording's signed URL, and (`get`, `list`) what the ledger charged for it
 * (`charge`: minor units and currency code; null until charged).
 */
export type CallView = Call & { recordingUrl: string | null; charge?: { amount: number; currency: string } | null };

/** Hooks for conference legs (the conferences service installs them). */
export type LegHooks = {
  answered(tx: EntityManager, call: Call, now: Date): Promise<void>;
  ended(tx: EntityManager, call: Call, now: Date): Promise<void>;
};

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
};

/** What a script may do to calls: CallControl, and locked changes of its own (after a fetch). */
export type ScriptControl = CallControl & {
  locked(tenant: TenantRef, id: string, change: (tx: EntityManager, call: Call, now: Date) => Promise<void>): Promise<Call | undefined>;
  /** A signed link to a recording of the script (`GET /v1/voice/recordings/{id}`, served by ScriptHooks.recording). */
  recordingUrl(tenant: TenantRef, id: string, now: Date): string;
};

/** What the IVR runner and the conference service may do to a locked call. */
export type CallControl = {
  step(call: Call, type: string, now: Date, detail?: Record<string, unknown>): void;
  end(tx: EntityManager, call: Call, status: CallStatus, reason: string, now: Date): Promise<void>;
  timer(tx: EntityManager, timer: Omit<CallTimer, 'organizationId' | 'mode'>, call: Call, afterSeconds: number): Promise<void>;
  agents(): VoiceAgentsPort | undefined;
  /**
   * Speaks prompts on a live call whose audio this process carries, once the change commits; true
   * when it will (the gateway then reports `prompted` when they were spoken), false otherwise
   * (test calls, no media here).
   */
  say(tx: EntityManager, call: Call, speech: Speech): boolean;
};

/** What the calls service is built from. */
export type CallsDeps = {
  orm: MikroORM; pool: Pool; clock: Clock; config: Config; cursors: CursorCodec; jobs: Pick<Jobs, 'enqueue' | 'insertStatement'>; gateways: VoiceGateways;
  /** Warnings (inbound calls refused). */
  log?: (message: string, detail: Record<string, unknown>) => void;
  numbers: VoiceNumbersPort; agents: () => VoiceAgentsPort | undefined; links: RecordingLinks; voicemail: VoicemailService; phi: VoicePhi;
  /** Plan quotas (billing, optional): a starter plan past its included voice minutes is 429 QUOTA_EXCEEDED. */
  quotas?: () => Ports['planQuotas'] | undefined;
  /** The organization's SIP trunk for live calls (none: live calls are CHANNEL_UNAVAILABLE). */
  trunk: (scope: TenantRef) => Promise<TrunkOrder | null>;
  /** Live calls paid from credits (voice.billing.ts); without it calls are not charged. */
  billing?: CallBilling;
  /** Voice consent (contacts, optional): an opted-out number is not called (RECIPIENT_OPTED_OUT). */
  consent?: () => CallConsentPort | undefined;
  /** The sandbox gateway's timeline: test calls are placed from it (else by the placement job). */
  timeline?: SandboxTimeline;
  /** This instance's live subscribers, told of committed call changes at once (EventBus.deliverLocal). */
  live?: (notices: readonly LiveNotice[]) => void;
  /** Whether a live subscriber of this instance watches the call now (else its committed state is not kept for one). */
  watched?: (callId: string) => boolean;
  /** The rate limiter's takes, carried by the lookups' statement (calls.lookups.ts); absent: they go alone. */
  takes?: Rider<CounterTake, CounterTaken>;
};
