/**
 * Fetching a TwiML document as Twilio does: a form POST of the request's parameters, signed with
 * `X-Twilio-Signature` under the account's auth token (as the status callbacks are), through the
 * webhooks' vetted HTTP client (the outbound address policy), one attempt, a bounded answer.
 */
import { safePost, type SafeResponse } from '../../platform/http/safeHttp.ts';
import type { TenantRef } from '../../platform/db/tenant.ts';
import { FORM_TYPE } from '../callbacks.ts';
import { twilioSignature } from '../signature.ts';
import type { TwilioTokens } from '../tokens.ts';

const FETCH_TIMEOUT_MS = 15_000;
const MAX_DOCUMENT_BYTES = 64 * 1024;

export async function postForTwiml(tokens: TwilioTokens, tenant: TenantRef, url: string, params: Record<string, string>, allowLoopback: boolean): Promise<SafeResponse> {
  const token = await tokens.signingToken(tenant);
  const headers: Record<string, string> = { Accept: 'application/xml, text/xml, */*', ...(token ? { 'X-Twilio-Signature': twilioSignature(token, url, params) } : {}) };
  return safePost(url, new URLSearchParams(params).toString(), headers, { policy: { allowLoopback }, timeoutMs: FETCH_TIMEOUT_MS, maxResponseBytes: MAX_DOCUMENT_BYTES, contentType: FORM_TYPE });
}
