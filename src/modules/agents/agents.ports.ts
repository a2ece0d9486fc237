/**
 * The public face of agents for other modules: its event types, the port it needs from numbers
 * (binding a deployed agent to a number) and the turn-taking surface a voice call (or any other
 * channel) uses to talk to an agent. Other modules import from here, never the services.
 */
import type { TenantRef } from '../../platform/db/tenant.ts';

export const AGENT_EVENTS = [
  'agent.created', 'agent.updated', 'agent.deployed', 'agent.paused', 'agent.resumed', 'agent.deleted', 'agent.error',
  'conversation.started', 'conversation.completed', 'conversation.abandoned', 'conversation.handoff', 'conversation.callback_due',
  'marketplace.listing_submitted', 'marketplace.listing_reviewed',
] as const;
export type AgentEvent = (typeof AGENT_EVENTS)[number];

declare module '../../platform/events/events.ts' {
  interface EventCatalog { agents: AgentEvent }
}

/** An owned phone number as agents see it. */
export type AgentNumber = { id: string; number: string };

/** Provided by numbers: find the number a deployed agent answers on, and record the binding. */
export type AgentNumbersPort = {
  /** `numberId` when given, else the number `phoneNumber` when given, else the organization's first active number. */
  findNumber(tenant: TenantRef, query: { numberId?: string | null; phoneNumber?: string | null }): Promise<AgentNumber | undefined>;
  /** Sets (or clears, agentId null) the agent of a number. */
  bindAgent(tenant: TenantRef, numberId: string, agentId: string | null): Promise<void>;
};

/** One turn of a conversation with an agent on a channel (a call, a message thread). */
export type AgentTurnInput = {
  agentId: string;
  /** Omit to start a conversation. */
  conversationId?: string | null;
  text: string;
  channel: 'voice' | 'sms' | 'whatsapp';
  /** The caller's or sender's address. */
  contactAddress?: string | null;
  context?: Record<string, unknown>;
  /** Stable across retries of this one turn (a flow step): a retried turn is paid and counted once. */
  retryKey?: string | null;
};
export type AgentTurn = {
  conversationId: string;
  messageId: string;
  /** What to say or send back (a guardrail's replacement when the answer was blocked). */
  text: string;
  /** The conversation is over (max_turns reached, deleted agent). */
  ended: boolean;
  /** A human should take over (escalation keyword or the human_handoff tool). */
  handoff: boolean;
  /** HIPAA mode: the turn is PHI, stored sealed; a channel must not store `text` in clear. */
  sealed: boolean;
};

/** Offered by agents to channels (voice wires it at merge). */
export type AgentTurnsPort = {
  /** Whether the agent exists in the tenant (any status). */
  agentExists(tenant: TenantRef, agentId: string): Promise<boolean>;
  /** Whether the agent can take new conversations (status active). */
  agentDeployed(tenant: TenantRef, agentId: string): Promise<boolean>;
  /**
   * One user turn and the agent's answer, stored in the conversation (AGENT_NOT_DEPLOYED when not
   * active). Live mode: paid from the credit balance at the organization's plan (pass a Scope to
   * use its plan; 402 INSUFFICIENT_CREDITS when the balance cannot pay it).
   */
  replyTurn(tenant: TenantRef, input: AgentTurnInput): Promise<AgentTurn>;
  /** Ends a conversation gracefully (the call hung up): status completed. */
  endConversation(tenant: TenantRef, conversationId: string, reason: string): Promise<void>;
  /** Ends the agent's active conversations on a voice call (context `call_id`): status completed. Returns how many it ended. */
  endCallConversations(tenant: TenantRef, agentId: string, callId: string, reason: string): Promise<number>;
};

/** Inbound message bodies (offered by messaging; opened when sealed), for agents answering on their bound number. */
export type AgentInboundPort = {
  inboundMessage(tenant: TenantRef, messageId: string): Promise<{ body: string | null; phi: boolean } | null>;
};

declare module '../manifest.ts' {
  interface Ports { agentNumbers: AgentNumbersPort; agentTurns: AgentTurnsPort; agentInbound: AgentInboundPort }
}
