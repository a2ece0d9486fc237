/**
 * The public face of voice for other modules: its event types and the ports it uses (numbers
 * offers `voiceNumbers`; the agents context, when installed, offers `voiceAgents`).
 */
import type { TenantRef } from '../../platform/db/tenant.ts';
import type { ReadPart } from '../../platform/db/pairedReads.ts';

export const VOICE_EVENTS = [
  'call.initiated', 'call.ringing', 'call.answered', 'call.completed', 'call.failed',
  'conference.started', 'conference.participant_joined', 'conference.participant_left', 'conference.ended',
  'voicemail.received',
] as const;

declare module '../../platform/events/events.ts' {
  interface EventCatalog { voice: (typeof VOICE_EVENTS)[number] }
}

/**
 * The organization's voice-capable numbers that it holds (active), in E.164; `voiceNumbersRead`,
 * the same read as a part of one statement with another owner's (platform/db/pairedReads.ts).
 */
export type VoiceNumbersPort = {
  voiceNumbers(tenant: TenantRef): Promise<string[]>;
  voiceNumbersRead?: VoiceNumbersRead;
  /** An active voice number of the tenant, with where its inbound calls go (inbound calls on a trunk). */
  inboundNumber?(tenant: TenantRef, number: string): Promise<InboundNumber | undefined>;
};

/** A number's inbound routing: its voice_route (REST shape), else its agent. */
export type InboundNumber = {
  voiceRoute: { type: 'ivr'; ivr_id: string } | { type: 'voicemail'; voicemail_id: string } | { type: 'forward'; to: string } | null;
  agentId: string | null;
};

/**
 * The numbers read as a part, and as a condition: `heldSql` is true when the part's rows (the
 * relation `rows`, its SELECT run as a CTE) hold `number` for the tenant (`org`, `mode`): SQL
 * expressions of the caller's statement. A placement writes the call in the same statement only
 * when it holds (placing/lookups.ts).
 */
export type VoiceNumbersRead = ReadPart<TenantRef, string[]> & { heldSql(rows: string, org: string, mode: string, number: string): string };

/**
 * The consent read as a part, and as a condition: `refusedSql` is true when the part's rows (the
 * relation `rows`) refuse item number `item` (1-based, in the order of the part's batch) with
 * RECIPIENT_OPTED_OUT.
 */
export type CallConsentRead = ReadPart<{ tenant: TenantRef; recipient: string }, void> & { refusedSql(rows: string, item: string): string };

/** A call as an agent sees it. */
export type AgentCall = { callId: string; from: string; to: string; agentId: string };

/** An agent's turn on a call: its conversation, what it answered, and whether the conversation ended with it. */
export type AgentTurn = { conversationId: string; text: string; ended: boolean };

/** What voice needs of the agents context (optional: without it every agent_id is unknown). */
export type VoiceAgentsPort = {
  exists(tenant: TenantRef, agentId: string): Promise<boolean>;
  /** The call was answered (or transferred by an IVR) with this agent on it: its first turn (undefined: the agent is not deployed). */
  callStarted(tenant: TenantRef, call: AgentCall): Promise<AgentTurn | undefined>;
  /** What the caller said on a live call (transcribed), answered by the agent in the call's conversation (a new one without `conversationId`). */
  reply?(tenant: TenantRef, call: AgentCall, input: { text: string; conversationId: string | undefined }): Promise<AgentTurn>;
  /** Graceful shutdown signal before the call is hung up. */
  callEnding(tenant: TenantRef, call: AgentCall): Promise<void>;
};

/**
 * Voice consent (offered by contacts when installed): RECIPIENT_OPTED_OUT (422) when the contact
 * with this number opted out of voice calls. Without contacts nobody has opted out.
 */
export type CallConsentPort = {
  assertCanCall(tenant: TenantRef, number: string): Promise<void>;
  /** The same check as a part of one statement with another owner's read (pairedReads.ts): RECIPIENT_OPTED_OUT or nothing. */
  callConsentRead?: CallConsentRead;
};

/** Whether a number's voice_route target exists in the tenant (offered by voice to numbers). */
export type VoiceRouteTargetsPort = {
  routeTargetExists(tenant: TenantRef, kind: 'ivr' | 'voicemail', id: string): Promise<boolean>;
};

declare module '../manifest.ts' {
  interface Ports {
    /** IVR flows and voicemail boxes a number's voice_route may name (offered by voice). */
    voiceRouteTargets: VoiceRouteTargetsPort;
    /** Whether a number may be called (offered by contacts). */
    callConsent: CallConsentPort;
    /** Voice-capable numbers the organization owns (offered by numbers). */
    voiceNumbers: VoiceNumbersPort;
    /** AI agents on calls (offered by agents when installed). */
    voiceAgents: VoiceAgentsPort;
  }
}
