/**
 * Requests per minute per API key per endpoint, by plan (the specification's table), and burst
 * limits per second. An endpoint's row is declared with its operation (`limits`, registered when
 * the operation is declared: `context.ts operationsOf`); the platform names no endpoint. The spec
 * leaves the Business plan and endpoints outside the table open; the choices here are documented
 * in the README: Business sits between Growth and Enterprise, other reads get the GET /v1/messages
 * row and other writes the POST /v1/contacts row.
 */
import type { Plan } from '../tenancy/tenancy.entities.ts';

/** Requests per minute, by plan. */
export type PlanLimits = Readonly<Record<Plan, number>>;
export const limitsRow = (starter: number, growth: number, business: number, enterprise: number): PlanLimits => ({ starter, growth, business, enterprise });

/** The table's rows several endpoints share. */
export const LIMITS = {
  send: limitsRow(30, 300, 1000, 3000),
  email: limitsRow(60, 600, 2000, 6000),
  /** GET /v1/messages: every read without a row of its own. */
  read: limitsRow(120, 600, 1500, 3000),
  fewWrites: limitsRow(10, 30, 60, 120),
  /** POST /v1/contacts: every write without a row of its own. */
  write: limitsRow(60, 300, 1000, 3000),
} as const;

/** Endpoint (as `METHOD /v1/path/{param}`) → its declared row. */
const DECLARED = new Map<string, PlanLimits>();

/** Declares an endpoint's row (its operation does); a second operation on the endpoint must agree. */
export function declareEndpointLimits(endpoint: string, limits: PlanLimits): void {
  const known = DECLARED.get(endpoint);
  if (known && (Object.keys(limits) as Plan[]).some((p) => known[p] !== limits[p])) throw new Error(`rate limits of ${endpoint} are declared twice, differently`);
  DECLARED.set(endpoint, limits);
}

export const BURST_PER_SECOND: PlanLimits = limitsRow(5, 25, 50, 100);
/** How long a request over the burst limit may wait for a slot before BURST_LIMIT_EXCEEDED. */
export const BURST_QUEUE_MS = 5000;
export const WINDOW_SECONDS = 60;

export function endpointLimit(plan: Plan, endpoint: string): number {
  const declared = DECLARED.get(endpoint);
  if (declared) return declared[plan];
  return endpoint.startsWith('GET ') ? LIMITS.read[plan] : LIMITS.write[plan];
}
