/**
 * Twilio's error answer, `{ code, message, more_info, status }`, and the Twilio code of each of
 * this service's errors where one maps (an invalid To is 21211, an opted-out recipient 21610, an
 * unknown SID 20404…). Validation failures are HTTP 400, as Twilio answers them.
 */
import type { ErrorCode } from '../platform/errors.ts';
import { isServiceError } from '../platform/errors.ts';

export class TwilioError extends Error {
  readonly status: number;
  readonly code: number;
  readonly headers: Record<string, string>;
  constructor(status: number, code: number, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'TwilioError';
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

export const notFound = (what: string) => new TwilioError(404, 20404, `The requested resource ${what} was not found`);
export const authenticationError = () => new TwilioError(401, 20003, 'Authentication Error - invalid username', { 'WWW-Authenticate': 'Basic realm="Twilio API"' });

/** Twilio codes by this service's code, and by the request parameter at fault where it matters. */
const BY_CODE: Partial<Record<ErrorCode, { status: number; code: number }>> = {
  UNAUTHORIZED: { status: 401, code: 20003 },
  INVALID_API_KEY: { status: 401, code: 20003 },
  EXPIRED_TOKEN: { status: 401, code: 20003 },
  INSUFFICIENT_PERMISSIONS: { status: 403, code: 20403 },
  FORBIDDEN: { status: 403, code: 20403 },
  NOT_FOUND: { status: 404, code: 20404 },
  CALL_NOT_FOUND: { status: 404, code: 20404 },
  TENANT_NOT_FOUND: { status: 404, code: 20404 },
  RATE_LIMIT_EXCEEDED: { status: 429, code: 20429 },
  BURST_LIMIT_EXCEEDED: { status: 429, code: 20429 },
  QUOTA_EXCEEDED: { status: 429, code: 20429 },
  RECIPIENT_OPTED_OUT: { status: 400, code: 21610 },
  INVALID_RECIPIENT: { status: 400, code: 21614 },
  SENDER_NOT_CONFIGURED: { status: 400, code: 21606 },
  MESSAGE_TOO_LONG: { status: 400, code: 21617 },
  MEDIA_TOO_LARGE: { status: 400, code: 21620 },
  INVALID_WEBHOOK_URL: { status: 400, code: 21609 },
  CALL_ALREADY_ENDED: { status: 400, code: 21220 },
  NUMBER_NOT_AVAILABLE: { status: 400, code: 21422 },
  NUMBER_ALREADY_OWNED: { status: 400, code: 21422 },
  CHANNEL_UNAVAILABLE: { status: 503, code: 20503 },
  SERVICE_UNAVAILABLE: { status: 503, code: 20503 },
  MAINTENANCE_MODE: { status: 503, code: 20503 },
  PAYMENT_REQUIRED: { status: 402, code: 20005 },
  INSUFFICIENT_CREDITS: { status: 402, code: 20005 },
  SUBSCRIPTION_INACTIVE: { status: 403, code: 20005 },
};

/** Codes for a parameter that is missing or invalid: [missing, invalid]. */
const BY_PARAM: Record<string, [number, number]> = {
  To: [21604, 21211],
  From: [21603, 21212],
  Body: [21602, 21602],
  StatusCallback: [21609, 21609],
  Url: [21205, 21205],
};

/**
 * A thrown error as Twilio's answer. `fields` names the Twilio parameter of each of the
 * operation's input fields (`to` → `To`), so a field error names what the client sent.
 */
export function toTwilioError(e: unknown, fields: Readonly<Record<string, string>> = {}): TwilioError | undefined {
  if (e instanceof TwilioError) return e;
  if (!isServiceError(e)) return undefined;
  const field = typeof e.details.field === 'string' ? e.details.field : undefined;
  const param = field !== undefined ? fields[field] ?? fields[field.split('.')[0]!] : undefined;
  const message = param && field ? e.message.replace(field, param) : e.message;
  const mapped = BY_CODE[e.code];
  if (mapped) return new TwilioError(mapped.status, mapped.code, message, e.headers);
  if (e.status === 400 || e.status === 422) {
    const byParam = param ? BY_PARAM[param] : undefined;
    const code = byParam ? byParam[e.code === 'MISSING_REQUIRED_FIELD' ? 0 : 1] : 20001;
    return new TwilioError(400, code, message, e.headers);
  }
  return new TwilioError(e.status, e.status >= 500 ? 20500 : 20001, message, e.headers);
}

export function errorBody(e: TwilioError): string {
  return JSON.stringify({ code: e.code, message: e.message, more_info: `https://www.twilio.com/docs/errors/${e.code}`, status: e.status });
}
