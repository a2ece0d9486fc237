/**
 * `AvailablePhoneNumbers/{Country}/Local.json` and `IncomingPhoneNumbers.json` (list, buy, update
 * SmsUrl/VoiceUrl, release) over numbers' operations. Webhooks are always requested with POST:
 * SmsMethod and VoiceMethod accept POST only.
 */
import type { PhoneNumber } from '../modules/numbers/numbers.entities.ts';
import { buyNumberOp, getNumberOp, listNumbersOp, releaseNumberOp, searchNumbersOp, updateNumberOp } from '../modules/numbers/numbers.operations.ts';
import type { AvailableNumber } from '../providers/numbers/types.ts';
import { withoutCallbackFormat } from '../modules/webhooks/webhooks.formats.ts';
import { twilioCallbackUrl } from './callbacks.ts';
import { notFound, TwilioError } from './errors.ts';
import { twilioRoute, type TwilioRequest } from './route.ts';
import { fromSid, toSid } from './sids.ts';
import { listPage, pageParams, rfc2822 } from './wire.ts';

const API = '/2010-04-01';
const NUMBERS = `${API}/Accounts/{AccountSid}/IncomingPhoneNumbers.json`;
const NUMBER = `${API}/Accounts/{AccountSid}/IncomingPhoneNumbers/{Sid}.json`;

const has = (caps: readonly string[], c: string) => caps.includes(c);

export function presentNumber(n: PhoneNumber, accountSid: string) {
  const sid = toSid(n.id);
  return {
    sid, account_sid: accountSid, api_version: '2010-04-01', phone_number: n.number, friendly_name: n.friendlyName,
    sms_url: withoutCallbackFormat(n.smsWebhookUrl ?? ''), sms_method: 'POST', sms_fallback_url: '', sms_fallback_method: 'POST', sms_application_sid: '',
    voice_url: n.voiceWebhookUrl ?? '', voice_method: 'POST', voice_fallback_url: '', voice_fallback_method: 'POST', voice_application_sid: '',
    voice_caller_id_lookup: false, status_callback: '', status_callback_method: 'POST',
    capabilities: { voice: has(n.capabilities, 'voice'), sms: has(n.capabilities, 'sms'), mms: has(n.capabilities, 'mms'), fax: false },
    status: n.status === 'active' ? 'in-use' : n.status, origin: n.source === 'ported' ? 'hosted' : 'twilio',
    date_created: rfc2822(n.createdAt), date_updated: rfc2822(n.updatedAt),
    uri: `${API}/Accounts/${accountSid}/IncomingPhoneNumbers/${sid}.json`,
    subresource_uris: { assigned_add_ons: `${API}/Accounts/${accountSid}/IncomingPhoneNumbers/${sid}/AssignedAddOns.json` },
  };
}

function presentAvailable(a: AvailableNumber) {
  return {
    friendly_name: a.friendlyName, phone_number: a.number, lata: null, locality: a.region, rate_center: null,
    latitude: null, longitude: null, region: a.region, postal_code: null, iso_country: a.country,
    address_requirements: 'none', beta: false,
    capabilities: { voice: has(a.capabilities, 'voice'), SMS: has(a.capabilities, 'sms'), MMS: has(a.capabilities, 'mms') },
  };
}

function checkMethods(r: TwilioRequest): void {
  for (const name of ['SmsMethod', 'VoiceMethod']) {
    const v = r.form[name];
    if (v !== undefined && String(v).toUpperCase() !== 'POST') throw new TwilioError(400, 20001, `${name} ${String(v)} is not supported; webhooks are requested with POST`);
  }
}

const numberId = (r: TwilioRequest) => {
  const id = fromSid(r.params.Sid!, 'num');
  if (!id) throw notFound(r.path);
  return id;
};

/** A form value that clears a field when empty (Twilio's way to remove a URL). */
const urlOrNull = (v: string | string[] | undefined) => (v === undefined ? undefined : v === '' ? null : v);
/** An SmsUrl, marked so the inbound messages' webhooks are sent in Twilio's format (callbacks.ts). */
const smsUrl = (v: string | string[] | undefined) => (typeof v === 'string' && v !== '' ? twilioCallbackUrl(v) : urlOrNull(v));

const capabilityFilter = (r: TwilioRequest) => {
  const caps: string[] = [];
  if (r.form.SmsEnabled === 'true') caps.push('sms');
  if (r.form.VoiceEnabled === 'true') caps.push('voice');
  if (r.form.MmsEnabled === 'true') caps.push('mms');
  return caps.length ? caps : undefined;
};

export const numberRoutes = [
  twilioRoute({
    method: 'GET', path: `${API}/Accounts/{AccountSid}/AvailablePhoneNumbers/{Country}/Local.json`, operation: searchNumbersOp,
    params: ['AreaCode', 'Contains', 'SmsEnabled', 'VoiceEnabled', 'MmsEnabled', 'PageSize'],
    fields: { country: 'Country', area_code: 'AreaCode', contains: 'Contains', limit: 'PageSize' },
    input: (r) => ({
      country: r.params.Country, type: 'local', area_code: r.form.AreaCode, contains: r.form.Contains,
      capabilities: capabilityFilter(r), limit: r.form.PageSize === undefined ? undefined : Number(r.form.PageSize),
    }),
    output: (rows: AvailableNumber[], r) => ({ available_phone_numbers: rows.map(presentAvailable), uri: r.path }),
  }),
  twilioRoute({
    method: 'GET', path: NUMBERS, operation: listNumbersOp, params: ['PageSize', 'Page', 'PageToken'],
    fields: { cursor: 'PageToken' },
    input: (r) => {
      const p = pageParams(r.form);
      return { cursor: p.cursor, limit: Math.min(p.pageSize, 100) };
    },
    output: (page, r) => listPage('incoming_phone_numbers', r.path, {}, pageParams(r.form), page, (n: PhoneNumber) => presentNumber(n, r.accountSid)),
  }),
  twilioRoute({
    method: 'POST', path: NUMBERS, operation: buyNumberOp, status: 201,
    params: ['PhoneNumber', 'FriendlyName', 'SmsUrl', 'SmsMethod', 'VoiceUrl', 'VoiceMethod'],
    fields: { number: 'PhoneNumber', friendly_name: 'FriendlyName', sms_webhook_url: 'SmsUrl', voice_webhook_url: 'VoiceUrl' },
    input: (r) => {
      checkMethods(r);
      return { number: r.form.PhoneNumber, friendly_name: r.form.FriendlyName, sms_webhook_url: r.form.SmsUrl === undefined ? undefined : smsUrl(r.form.SmsUrl), voice_webhook_url: r.form.VoiceUrl };
    },
    output: (n: PhoneNumber, r) => presentNumber(n, r.accountSid),
  }),
  twilioRoute({
    method: 'GET', path: NUMBER, operation: getNumberOp,
    input: (r) => ({ id: numberId(r) }),
    output: (n: PhoneNumber, r) => presentNumber(n, r.accountSid),
  }),
  twilioRoute({
    method: 'POST', path: NUMBER, operation: updateNumberOp,
    params: ['FriendlyName', 'SmsUrl', 'SmsMethod', 'VoiceUrl', 'VoiceMethod'],
    fields: { friendly_name: 'FriendlyName', sms_webhook_url: 'SmsUrl', voice_webhook_url: 'VoiceUrl' },
    input: (r) => {
      checkMethods(r);
      return { id: numberId(r), friendly_name: urlOrNull(r.form.FriendlyName), sms_webhook_url: smsUrl(r.form.SmsUrl), voice_webhook_url: urlOrNull(r.form.VoiceUrl) };
    },
    output: (n: PhoneNumber, r) => presentNumber(n, r.accountSid),
  }),
  twilioRoute({
    method: 'DELETE', path: NUMBER, operation: releaseNumberOp, status: 204,
    input: (r) => ({ id: numberId(r) }),
  }),
];
