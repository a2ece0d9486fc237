/**
 * The public face of flows for other modules: its event types and the ports it uses. The ports are
 * declared here (flows defines what it needs); contacts offers `flowContacts`, messaging offers
 * `flowMessages`, and agents may offer `flowAgents` (optional: agents may not be installed).
 */
import type { Scope } from '../../platform/auth/scope.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';

export const FLOW_EVENTS = [
  'flow.execution.step', 'flow.execution.completed', 'flow.execution.failed', 'flow.execution.cancelled', 'flow.custom_event',
] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { flows: (typeof FLOW_EVENTS)[number] }
}

/** Contact changes made by flow nodes (update_contact, add_tag, add_to_list); each call is idempotent. */
export type FlowContactsPort = {
  updateContact(scope: Scope, contactId: string, fields: { first_name?: string; last_name?: string; lifecycle_stage?: string; metadata?: Record<string, unknown> }): Promise<void>;
  addTags(scope: Scope, contactId: string, tags: string[]): Promise<void>;
  addToList(scope: Scope, listId: string, contactId: string): Promise<void>;
  /** Whether the list exists in the tenant (save-time validation of add_to_list). */
  listExists(tenant: TenantRef, listId: string): Promise<boolean>;
};

/** Inbound message content for inbound_message triggers and wait_for_reply (the event carries no body). */
export type FlowMessagesPort = {
  /**
   * `phi`: the message is PHI (HIPAA mode): its body may decide a trigger but is not stored with the
   * execution or its jobs (they see `body: null, body_redacted: true`).
   */
  inboundMessage(tenant: TenantRef, messageId: string): Promise<{ body: string | null; phi: boolean } | null>;
  /** Whether a message template exists in the tenant (save-time validation of send_message). */
  templateExists(tenant: TenantRef, templateId: string): Promise<boolean>;
};

/** Hands a conversation to an AI agent (offered by agents once installed). */
export type FlowAgentsPort = {
  agentExists(tenant: TenantRef, agentId: string): Promise<boolean>;
  /** `idempotencyKey` is stable per execution step: a retried step must not start a second conversation. */
  handOff(scope: Scope, input: { agentId: string; channel: string | null; address: string | null; message: string | null; context: Record<string, unknown>; idempotencyKey: string }): Promise<{ conversationId: string | null; output?: Record<string, unknown> }>;
};

declare module '../manifest.ts' {
  interface Ports {
    /** Contact updates from flow nodes (offered by contacts). */
    flowContacts: FlowContactsPort;
    /** Inbound message bodies and template lookups (offered by messaging). */
    flowMessages: FlowMessagesPort;
    /** Agent hand-off from flow nodes (offered by agents, when installed). */
    flowAgents: FlowAgentsPort;
  }
}
