/**
 * Requests per minute per API key per endpoint, by plan (the specification's table), and burst
 * limits per second. The spec leaves the Business plan and endpoints outside the table open; the
 * choices here are documented in the README: Business sits between Growth and Enterprise, other
 * reads get the GET /v1/messages row and other writes the POST /v1/contacts row.
 */
import type { Plan } from '../tenancy/tenancy.entities.ts';

type Row = Record<Plan, number>;
const row = (starter: number, growth: number, business: number, enterprise: number): Row => ({ starter, growth, business, enterprise });

const SEND = row(30, 300, 1000, 3000);
const EMAIL = row(60, 600, 2000, 6000);
const READ = row(120, 600, 1500, 3000);
const FEW_WRITES = row(10, 30, 60, 120);
const WRITE = row(60, 300, 1000, 3000);

/** Endpoint (as `METHOD /v1/path/{param}`) → limits. */
export const ENDPOINT_LIMITS: Record<string, Row> = {
  'POST /v1/messages/sms': SEND,
  'POST /v1/messages/whatsapp': SEND,
  'POST /v1/messages/rcs': SEND,
  'POST /v1/messages/viber': SEND,
  'POST /v1/messages/email': EMAIL,
  'GET /v1/messages': READ,
  'GET /v1/messages/{id}': READ,
  'POST /v1/voice/calls': row(10, 60, 200, 600),
  'GET /v1/voice/calls': READ,
  'POST /v1/voice/calls/{id}/hangup': SEND,
  'POST /v1/agents/{id}/chat': row(20, 120, 400, 1200),
  'POST /v1/agents': FEW_WRITES,
  'GET /v1/agents': READ,
  'GET /v1/numbers/available': row(30, 120, 300, 600),
  'POST /v1/numbers': FEW_WRITES,
  'GET /v1/numbers': READ,
  'POST /v1/contacts': row(60, 300, 1000, 3000),
  'GET /v1/contacts': READ,
  'POST /v1/campaigns': FEW_WRITES,
  'POST /v1/webhooks': FEW_WRITES,
  'GET /v1/webhooks': READ,
};

/** `GET /v1/billing/*` shares one row; the spec lists it with a wildcard. */
const BILLING_READ = row(60, 60, 90, 120);

export const BURST_PER_SECOND: Row = row(5, 25, 50, 100);
/** How long a request over the burst limit may wait for a slot before BURST_LIMIT_EXCEEDED. */
export const BURST_QUEUE_MS = 5000;
export const WINDOW_SECONDS = 60;

export function endpointLimit(plan: Plan, endpoint: string): number {
  const exact = ENDPOINT_LIMITS[endpoint];
  if (exact) return exact[plan];
  if (endpoint.startsWith('GET /v1/billing/')) return BILLING_READ[plan];
  return endpoint.startsWith('GET ') ? READ[plan] : WRITE[plan];
}
