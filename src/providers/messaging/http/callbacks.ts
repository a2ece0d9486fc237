/**
 * What a vendor's callback (status reports or inbound messages) says once its signature is
 * verified, in one shape for the HTTP carrier connectors. `key` identifies the signed request: the
 * same key twice is a replay (the messaging context remembers keys and answers the second 403).
 * Twilio, Telnyx and Vonage call back once per event; Meta's webhook may carry several.
 */
import type { ReportedStatus } from '../types.ts';

export type CarrierCallbackEvent =
  /** `status` null: a step the message's status does not show (queued at the vendor, sending). */
  | { kind: 'status'; providerMessageId: string; status: ReportedStatus | null; errorCode?: string; at?: Date }
  | { kind: 'inbound'; providerMessageId: string | null; from: string; to: string; body: string; mediaUrls: string[]; content?: Record<string, unknown> };

export type CarrierCallbackRequest = {
  /** The URL the vendor called, as it sees it (the public base URL, the path and the query). */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  rawBody: string;
  /** Which of the connector's callback URLs was called (WhatsApp's one webhook URL names none). */
  event: 'status' | 'inbound' | null;
};

export type VerifiedCallback = { key: string; events: CarrierCallbackEvent[] };

export function headerOf(headers: CarrierCallbackRequest['headers'], name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}
