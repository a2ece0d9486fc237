/** The request's Scope: who is calling, for which tenant and mode. Every service call takes one. */
import type { Mode } from '../db/tenant.ts';
import type { Plan, Role } from '../tenancy/tenancy.entities.ts';

/** The reason codes a developer may give for reading PHI (platform/phi.ts). */
export const PHI_REASONS = ['treatment', 'payment', 'operations', 'legal', 'support'] as const;
export type PhiReason = (typeof PHI_REASONS)[number];

export type Actor =
  | { type: 'api_key'; id: string }
  | { type: 'user'; id: string; email: string; sessionId: string | undefined }
  | { type: 'system'; id: string };

export type ActorType = Actor['type'];

export type Scope = {
  organizationId: string;
  mode: Mode;
  plan: Plan;
  role: Role;
  actor: Actor;
  ip: string | undefined;
  requestId: string;
  /** The reason code a developer gave for reading PHI (`X-PHI-Reason`); see platform/phi.ts. */
  phiReason?: PhiReason;
  /** The organization's `graphql_trusted_documents_only` setting (graphql/persisted.ts). */
  graphqlTrustedOnly?: boolean;
  /**
   * The W3C `traceparent` of the request (or job) span, when tracing is on: jobs and events this
   * scope enqueues or emits carry it, even when they are written by a batch another request started.
   */
  traceparent?: string;
  /**
   * Set while a flow execution acts (its nodes' sends and contact changes): how deep in a chain of
   * flow executions this is (the execution's depth + 1). Events emitted for this scope carry it as
   * `data.depth`, and what it creates keeps it (a message: `chain_depth`, on all its later events),
   * so a flow they trigger starts one level deeper and a chain stops at the flows' depth limit.
   */
  chainDepth?: number;
};

/** The identity rate limits are counted against: the API key, or the user within the organization. */
export function rateLimitIdentity(scope: Scope): string {
  return scope.actor.type === 'api_key' ? scope.actor.id : `${scope.organizationId}:${scope.actor.id}`;
}

/** A scope for jobs and the admin CLI, acting as the platform itself. */
export function systemScope(organizationId: string, mode: Mode, plan: Plan, requestId: string): Scope {
  return { organizationId, mode, plan, role: 'owner', actor: { type: 'system', id: 'system' }, ip: undefined, requestId };
}
