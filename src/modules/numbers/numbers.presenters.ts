/** REST shapes (snake_case) of search results, phone numbers and port requests. */
import type { AvailableNumber } from '../../providers/numbers/types.ts';
import type { PhoneNumber, PortRequest } from './numbers.entities.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function presentAvailableNumber(n: AvailableNumber) {
  return {
    number: n.number, friendly_name: n.friendlyName, country: n.country, type: n.type, region: n.region,
    capabilities: n.capabilities, monthly_cost: n.monthlyCost, currency: n.currency,
  };
}

export function presentPhoneNumber(n: PhoneNumber) {
  return {
    id: n.id, number: n.number, country: n.country, type: n.type, region: n.region, friendly_name: n.friendlyName,
    capabilities: n.capabilities, status: n.status, sms_webhook_url: n.smsWebhookUrl, voice_webhook_url: n.voiceWebhookUrl,
    agent_id: n.agentId, voice_route: n.voiceRoute ?? null, monthly_cost: moneyString(n.monthlyCost), currency: n.currency, source: n.source,
    port_request_id: n.portRequestId, billing_period_start: iso(n.billingPeriodStart), billing_period_end: iso(n.billingPeriodEnd),
    created_at: iso(n.createdAt), updated_at: iso(n.updatedAt),
  };
}

export function presentPortRequest(p: PortRequest) {
  return {
    id: p.id, numbers: p.numbers, status: p.status, current_carrier: p.currentCarrier, authorization_name: p.authorizationName,
    // The account number is shown masked; the PIN never.
    account_number: p.accountNumber ? maskAccount(p.accountNumber) : null, estimated_completion: iso(p.estimatedCompletion),
    phone_number_ids: p.status === 'completed' ? p.phoneNumberIds : null,
    error_code: p.status === 'rejected' ? 'PORT_REQUEST_FAILED' : null, rejection_code: p.rejectionCode, rejection_reason: p.rejectionReason,
    submitted_at: iso(p.submittedAt), completed_at: iso(p.completedAt), rejected_at: iso(p.rejectedAt),
    created_at: iso(p.createdAt), updated_at: iso(p.updatedAt),
  };
}

/** `1.15`, `2.00`: PostgreSQL numeric(10,2) arrives as a string already; a number (never expected) is formatted. */
export function moneyString(value: string | number): string {
  return typeof value === 'number' ? value.toFixed(2) : value;
}

function maskAccount(account: string): string {
  return account.length <= 4 ? '*'.repeat(account.length) : `${'*'.repeat(account.length - 4)}${account.slice(-4)}`;
}
