/**
 * The Twilio-compatible route table's entries: like a REST route, data over one operation (the
 * same `invoke`, so roles, validation, rate-limit bucket and side effects are the native ones),
 * with the parameters it takes in Twilio's names and a presenter giving Twilio's shape.
 */
import type { RequestContext } from '../context.ts';
import type { Operation } from '../platform/operations.ts';
import type { FormValues } from './wire.ts';

export type TwilioRequest = {
  /** Path parameters (a SID already checked against its prefix by the route's `input`). */
  params: Record<string, string>;
  /** The body's parameters (POST) or the query string's (GET, DELETE). */
  form: FormValues;
  ctx: RequestContext;
  /** The caller's account SID (the path's, checked). */
  accountSid: string;
  /** The request path, without the query string. */
  path: string;
  /** Runs another operation first (a lookup the Twilio request implies), through the same `invoke`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  run<O>(op: Operation<RequestContext, any, O, any, any>, raw: unknown): Promise<O>;
};

export type TwilioRoute = {
  method: 'GET' | 'POST' | 'DELETE';
  /** `/2010-04-01/Accounts/{AccountSid}/Messages.json`, `/v2/Services/{ServiceSid}/Verifications` */
  path: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  operation: Operation<RequestContext, any, any, any, any>;
  /** Parameters taken once each; anything else is 400 20001. */
  params?: readonly string[];
  /** Parameters that may repeat (MediaUrl, StatusCallbackEvent). */
  repeated?: readonly string[];
  /** The operation's input field → the Twilio parameter it comes from (error messages and codes name it). */
  fields?: Readonly<Record<string, string>>;
  /**
   * The operation this request runs when not `operation` (one Twilio endpoint over two use cases:
   * a call's update ends it or replaces its TwiML). It must share `operation`'s endpoint: the
   * admission is taken on that bucket before the body is read.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  operationFor?(req: TwilioRequest): Operation<RequestContext, any, any, any, any>;
  input(req: TwilioRequest): unknown;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  output?(result: any, req: TwilioRequest): unknown;
  status?: 200 | 201 | 204;
};

export function twilioRoute(r: TwilioRoute): TwilioRoute {
  return r;
}
