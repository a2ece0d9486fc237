/** `Accounts/{AccountSid}/Messages.json`: send an SMS, list, fetch — over messaging's operations. */
import type { Message } from '../modules/messaging/messaging.entities.ts';
import { getMessageOp, listMessagesOp, sendSmsOp } from '../modules/messaging/messaging.operations.ts';
import { twilioCallbackUrl, type TwilioRenderer } from './callbacks.ts';
import { notFound } from './errors.ts';
import { twilioRoute, type TwilioRequest } from './route.ts';
import { fromSid, toSid } from './sids.ts';
import { listPage, pageParams, rfc2822, twilioPrice } from './wire.ts';

const API = '/2010-04-01';
const MESSAGES = `${API}/Accounts/{AccountSid}/Messages.json`;
const MESSAGE = `${API}/Accounts/{AccountSid}/Messages/{Sid}.json`;

/** The native statuses in Twilio's vocabulary (an inbound message is `received`). */
export function messageStatus(m: Pick<Message, 'status' | 'direction'>): string {
  if (m.direction === 'inbound') return 'received';
  return m.status;
}

/** Native error codes are Twilio-style numbers where the provider gave one; anything else is 30008 (unknown error). */
function errorCode(m: Message): number | null {
  if (!m.errorCode) return m.status === 'failed' ? 30008 : null;
  return /^\d{5}$/.test(m.errorCode) ? Number(m.errorCode) : 30008;
}

export function presentMessage(m: Message & { charge?: { amount: number; currency: string } | null }, accountSid: string) {
  const sid = toSid(m.id);
  const uri = `${API}/Accounts/${accountSid}/Messages/${sid}.json`;
  return {
    account_sid: accountSid,
    api_version: '2010-04-01',
    body: m.body ?? '',
    date_created: rfc2822(m.createdAt),
    date_sent: rfc2822(m.sentAt),
    date_updated: rfc2822(m.updatedAt),
    direction: m.direction === 'inbound' ? 'inbound' : 'outbound-api',
    error_code: errorCode(m),
    error_message: m.errorMessage,
    from: m.from,
    messaging_service_sid: null,
    num_media: '0',
    num_segments: String(m.segments ?? 1),
    ...twilioPrice(m.charge),
    sid,
    status: messageStatus(m),
    subresource_uris: { media: `${API}/Accounts/${accountSid}/Messages/${sid}/Media.json` },
    to: m.to,
    uri,
  };
}

const messageId = (r: TwilioRequest) => {
  const id = fromSid(r.params.Sid!, 'msg');
  if (!id) throw notFound(r.path);
  return { id };
};

export const messageRoutes = [
  twilioRoute({
    method: 'POST', path: MESSAGES, operation: sendSmsOp, status: 201,
    params: ['To', 'From', 'Body', 'StatusCallback'],
    fields: { to: 'To', from: 'From', body: 'Body', webhook_url: 'StatusCallback' },
    input: (r) => ({ to: r.form.To, from: r.form.From, body: r.form.Body, webhook_url: typeof r.form.StatusCallback === 'string' ? twilioCallbackUrl(r.form.StatusCallback) : undefined }),
    output: (m: Message, r) => presentMessage(m, r.accountSid),
  }),
  twilioRoute({
    method: 'GET', path: MESSAGES, operation: listMessagesOp,
    params: ['To', 'PageSize', 'Page', 'PageToken'],
    fields: { to: 'To', cursor: 'PageToken' },
    input: (r) => {
      const p = pageParams(r.form);
      return { channel: 'sms', to: r.form.To, cursor: p.cursor, limit: Math.min(p.pageSize, 100) };
    },
    output: (page, r) => listPage('messages', r.path, r.form.To ? { To: r.form.To as string } : {}, pageParams(r.form), page, (m: Message) => presentMessage(m, r.accountSid)),
  }),
  twilioRoute({
    method: 'GET', path: MESSAGE, operation: getMessageOp,
    input: messageId,
    output: (m: Message, r) => presentMessage(m, r.accountSid),
  }),
];

/** Twilio's message statuses for the native status events that call back. */
const MESSAGE_STATUS: Record<string, string> = {
  'message.queued': 'queued', 'message.sent': 'sent', 'message.delivered': 'delivered', 'message.failed': 'failed', 'message.read': 'read',
};

function messageErrorCode(code: unknown): string {
  return typeof code === 'string' && /^\d{5}$/.test(code) ? code : '30008';
}

/** The parameters Twilio posts to a message's StatusCallback, or to the number's SmsUrl for an inbound one. */
export const renderMessage: TwilioRenderer = async (tx, event, account) => {
  const d = event.data;
  const sid = toSid(event.resourceId);
  const base = { AccountSid: account, ApiVersion: '2010-04-01', MessageSid: sid, SmsSid: sid, From: String(d.from ?? ''), To: String(d.to ?? '') };
  if (event.type === 'message.received') {
    // The number's SmsUrl: the inbound message itself, as Twilio posts it.
    const rows = await tx.query<{ body: string | null; segments: number | null }>('select body, segments from messages where id = $1', [event.resourceId]);
    return {
      ...base, SmsMessageSid: sid, Body: rows[0]?.body ?? '', NumMedia: '0', NumSegments: String(rows[0]?.segments ?? 1),
      SmsStatus: 'received', MessagingServiceSid: '',
    };
  }
  const status = MESSAGE_STATUS[event.type];
  if (!status) return null;
  return { ...base, MessageStatus: status, SmsStatus: status, ...(status === 'failed' ? { ErrorCode: messageErrorCode(d.error_code) } : {}) };
};
