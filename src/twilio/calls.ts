/**
 * `Accounts/{AccountSid}/Calls.json`: create, list, fetch, update (end) a call over voice's
 * operations, with Twilio's call statuses. A StatusCallback is stored marked with the
 * StatusCallbackEvent values (callbacks.ts sends those events, form-encoded and signed); the
 * call's `Url` or `Twiml` is kept in its metadata (`twilio_url`, `twilio_twiml`); an update with
 * `Url` or `Twiml` replaces the document it runs (twiml/engine.ts `replace`).
 */
import { z } from 'zod';
import { operationsOf } from '../context.ts';
import { BUILDERS } from '../platform/auth/roles.ts';
import { createCallOp, getCallOp, hangupCallOp, listCallsOp, type VoiceServices } from '../modules/voice/voice.operations.ts';
import type { CallView } from '../modules/voice/calls/lifecycle.ts';
import type { CallStatus } from '../modules/voice/voice.states.ts';
import type { OutboxEvent, RelayTx } from '../platform/events/relay.ts';
import { twilioCallbackUrl, type TwilioRenderer } from './callbacks.ts';
import { notFound, TwilioError } from './errors.ts';
import { twilioRoute, type TwilioRequest } from './route.ts';
import { fromSid, toSid } from './sids.ts';
import { listPage, pageParams, rfc2822, twilioPrice } from './wire.ts';

const op = operationsOf<VoiceServices>('voice');
/**
 * A call's update with `Url` or `Twiml`: its TwiML replaced at once (calls.redirect, the installed
 * script's `replace`). TwiML is this surface's own, so this operation has no native route; it
 * shares the hangup's endpoint and rate-limit bucket (the same Twilio request ends a call).
 */
export const redirectCallOp = op({
  name: 'voice.redirectCall', endpoint: hangupCallOp.endpoint, roles: BUILDERS,
  input: z.object({ id: z.string().min(1).max(100), script: z.union([z.object({ twiml: z.string().max(64 * 1024) }).strict(), z.object({ url: z.string().url().max(2048) }).strict()]) }),
  run: (ctx, i, s) => s.calls.redirect(ctx.scope, i.id, i.script),
});

const API = '/2010-04-01';
const CALLS = `${API}/Accounts/{AccountSid}/Calls.json`;
const CALL = `${API}/Accounts/{AccountSid}/Calls/{Sid}.json`;

/** Native statuses in Twilio's words. */
const STATUS: Record<CallStatus, string> = {
  initiating: 'queued', ringing: 'ringing', in_progress: 'in-progress', completed: 'completed',
  failed: 'failed', busy: 'busy', no_answer: 'no-answer', cancelled: 'canceled',
};
const NATIVE_STATUS = Object.fromEntries(Object.entries(STATUS).map(([k, v]) => [v, k])) as Record<string, CallStatus>;

export const callStatus = (s: CallStatus) => STATUS[s];

/** StatusCallbackEvent values, and the native event each is sent on. */
export const CALL_EVENTS = ['initiated', 'ringing', 'answered', 'completed'] as const;
const EVENT_OF: Record<string, string> = {
  'call.initiated': 'initiated', 'call.ringing': 'ringing', 'call.answered': 'answered', 'call.completed': 'completed', 'call.failed': 'completed',
};

export function presentCall(c: CallView, accountSid: string) {
  const sid = toSid(c.id);
  const uri = `${API}/Accounts/${accountSid}/Calls/${sid}.json`;
  const sub = (name: string) => `${API}/Accounts/${accountSid}/Calls/${sid}/${name}.json`;
  // A leg a <Dial> placed is the dialing call's child, as Twilio shows it.
  const parent = typeof c.metadata?.dialed_by === 'string' ? toSid(c.metadata.dialed_by) : null;
  return {
    sid, account_sid: accountSid, api_version: '2010-04-01', parent_call_sid: parent, to: c.to, to_formatted: c.to, from: c.from, from_formatted: c.from,
    phone_number_sid: null, status: callStatus(c.status), start_time: rfc2822(c.answeredAt), end_time: rfc2822(c.endedAt),
    duration: c.durationSeconds === null ? null : String(c.durationSeconds), ...twilioPrice(c.charge), direction: parent ? 'outbound-dial' : 'outbound-api',
    answered_by: null, forwarded_from: null, group_sid: null, caller_name: null, queue_time: '0', trunk_sid: null,
    date_created: rfc2822(c.createdAt), date_updated: rfc2822(c.updatedAt), uri,
    subresource_uris: {
      notifications: sub('Notifications'), recordings: sub('Recordings'), payments: sub('Payments'), events: sub('Events'),
      siprec: sub('Siprec'), streams: sub('Streams'), user_defined_message_subscriptions: sub('UserDefinedMessageSubscriptions'),
      user_defined_messages: sub('UserDefinedMessages'),
    },
  };
}

/** The parameters Twilio posts to a call's StatusCallback for the events it asked for (completed by default). */
export const renderCall: TwilioRenderer = async (_tx: RelayTx, event: OutboxEvent, account, options) => {
  const callbackEvent = EVENT_OF[event.type];
  const wanted = (options.get('events') ?? 'completed').split(' ');
  if (!callbackEvent || !wanted.includes(callbackEvent)) return null;
  const d = event.data;
  const status = callStatus(d.status as CallStatus);
  return {
    AccountSid: account, ApiVersion: '2010-04-01', CallSid: toSid(event.resourceId), CallStatus: status, Direction: 'outbound-api',
    From: String(d.from ?? ''), To: String(d.to ?? ''), Called: String(d.to ?? ''), Caller: String(d.from ?? ''),
    CallbackSource: 'call-progress-events', SequenceNumber: String(event.sequence - 1), Timestamp: rfc2822(event.createdAt)!,
    ...(callbackEvent === 'completed' ? { CallDuration: String(d.duration_seconds ?? 0), Duration: String(Math.ceil(Number(d.duration_seconds ?? 0) / 60)) } : {}),
    ...(typeof d.sip_code === 'number' ? { SipResponseCode: String(d.sip_code) } : {}),
  };
};

const callId = (r: TwilioRequest) => {
  const id = fromSid(r.params.Sid!, 'call');
  if (!id) throw notFound(r.path);
  return id;
};

function bool(name: string, v: string | string[] | undefined): boolean | undefined {
  if (v === undefined) return undefined;
  if (v === 'true' || v === 'false') return v === 'true';
  throw new TwilioError(400, 20001, `${name} must be true or false`);
}

function integer(name: string, v: string | string[] | undefined, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new TwilioError(400, 20001, `${name} must be an integer from ${min} to ${max}`);
  return n;
}

function checkPost(r: TwilioRequest, ...names: string[]): void {
  for (const name of names) {
    const v = r.form[name];
    if (v !== undefined && String(v).toUpperCase() !== 'POST') throw new TwilioError(400, 20001, `${name} ${String(v)} is not supported; callbacks and documents are requested with POST`);
  }
}

/** Create's input for voice.createCall: the document, the callback marked with its events. */
function createInput(r: TwilioRequest) {
  checkPost(r, 'Method', 'StatusCallbackMethod');
  const url = r.form.Url as string | undefined;
  const twiml = r.form.Twiml as string | undefined;
  if (url === undefined && twiml === undefined) throw new TwilioError(400, 21205, 'Url or Twiml is required');
  if (url !== undefined && twiml !== undefined) throw new TwilioError(400, 20001, 'Give either Url or Twiml, not both');
  if (url !== undefined && !/^https?:\/\/[^\s]+$/.test(url)) throw new TwilioError(400, 21205, `Url is not a valid URL: ${url}`);
  const events = (r.form.StatusCallbackEvent as string[] | undefined) ?? [];
  for (const e of events) {
    if (!(CALL_EVENTS as readonly string[]).includes(e)) throw new TwilioError(400, 20001, `StatusCallbackEvent ${e} is not one of ${CALL_EVENTS.join(', ')}`);
  }
  // Timeout (how long to ring) is checked as Twilio checks it; the gateway decides when an unanswered call gives up.
  integer('Timeout', r.form.Timeout, 1, 600);
  const callback = r.form.StatusCallback as string | undefined;
  return {
    to: r.form.To, from: r.form.From, record: bool('Record', r.form.Record),
    max_duration: integer('TimeLimit', r.form.TimeLimit, 1, 14_400),
    webhook_url: callback === undefined ? undefined : twilioCallbackUrl(callback, events.length ? { events: events.join(' ') } : {}),
    metadata: url !== undefined ? { twilio_url: url } : { twilio_twiml: twiml },
  };
}

export const callRoutes = [
  twilioRoute({
    method: 'POST', path: CALLS, operation: createCallOp, status: 201,
    params: ['To', 'From', 'Url', 'Method', 'Twiml', 'StatusCallback', 'StatusCallbackMethod', 'Record', 'Timeout', 'TimeLimit'],
    repeated: ['StatusCallbackEvent'],
    fields: { to: 'To', from: 'From', webhook_url: 'StatusCallback', record: 'Record', max_duration: 'TimeLimit', metadata: 'Twiml' },
    input: createInput,
    output: (c: CallView, r) => presentCall(c, r.accountSid),
  }),
  twilioRoute({
    method: 'GET', path: CALLS, operation: listCallsOp,
    params: ['To', 'From', 'Status', 'PageSize', 'Page', 'PageToken'],
    fields: { to: 'To', from: 'From', status: 'Status', cursor: 'PageToken' },
    input: (r) => {
      const p = pageParams(r.form);
      const status = r.form.Status === undefined ? undefined : NATIVE_STATUS[r.form.Status as string];
      if (r.form.Status !== undefined && !status) throw new TwilioError(400, 20001, `Status must be one of ${Object.keys(NATIVE_STATUS).join(', ')}`);
      return { to: r.form.To, from: r.form.From, status, cursor: p.cursor, limit: Math.min(p.pageSize, 100) };
    },
    output: (page, r) => {
      const filters: Record<string, string> = {};
      for (const k of ['To', 'From', 'Status']) if (typeof r.form[k] === 'string') filters[k] = r.form[k] as string;
      return listPage('calls', r.path, filters, pageParams(r.form), page, (c: CallView) => presentCall(c, r.accountSid));
    },
  }),
  twilioRoute({
    method: 'GET', path: CALL, operation: getCallOp,
    input: (r) => ({ id: callId(r) }),
    output: (c: CallView, r) => presentCall(c, r.accountSid),
  }),
  twilioRoute({
    // Status=completed hangs up an answered call, Status=canceled one not answered yet (voice.hangupCall ends either as it is);
    // Url or Twiml replaces the document it runs (redirectCallOp).
    method: 'POST', path: CALL, operation: hangupCallOp,
    params: ['Status', 'Url', 'Method', 'Twiml'],
    fields: { script: 'Twiml' },
    operationFor: (r) => (r.form.Status === undefined ? redirectCallOp : hangupCallOp),
    input: (r) => {
      const id = callId(r);
      const url = r.form.Url as string | undefined;
      const twiml = r.form.Twiml as string | undefined;
      if (r.form.Status !== undefined) {
        if (url !== undefined || twiml !== undefined) throw new TwilioError(400, 20001, 'Give Status, or Url or Twiml, not both');
        if (r.form.Status !== 'completed' && r.form.Status !== 'canceled') throw new TwilioError(400, 20001, `Status ${String(r.form.Status)} is not one of completed, canceled`);
        return { id };
      }
      checkPost(r, 'Method');
      if (url === undefined && twiml === undefined) throw new TwilioError(400, 20001, 'Status, Url or Twiml is required');
      if (url !== undefined && twiml !== undefined) throw new TwilioError(400, 20001, 'Give either Url or Twiml, not both');
      if (url !== undefined && !/^https?:\/\/[^\s]+$/.test(url)) throw new TwilioError(400, 21205, `Url is not a valid URL: ${url}`);
      return { id, script: url !== undefined ? { url } : { twiml } };
    },
    output: (c: CallView, r) => presentCall(c, r.accountSid),
  }),
];
