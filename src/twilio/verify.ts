/**
 * Verify v2: `/v2/Services`, `/v2/Services/{ServiceSid}/Verifications` and `…/VerificationCheck`
 * over verify's operations. An account (an organization in one mode) has one Verify service, its
 * verify settings: the service SID is the account SID's bits with the `VA` prefix.
 */
import type { Verification } from '../modules/verify/verify.entities.ts';
import {
  checkVerificationOp, getVerificationOp, getVerifySettingsOp, listVerificationsOp, sendVerificationOp, updateVerifySettingsOp,
} from '../modules/verify/verify.operations.ts';
import type { EffectiveVerifySettings } from '../modules/verify/verify.service.ts';
import { notFound, TwilioError } from './errors.ts';
import { twilioRoute, type TwilioRequest } from './route.ts';
import { fromSid, toSid } from './sids.ts';
import { rfc2822 } from './wire.ts';

const BASE = 'https://verify.twilio.com';
const SERVICES = '/v2/Services';
const SERVICE = '/v2/Services/{ServiceSid}';

export const serviceSidOf = (accountSid: string) => `VA${accountSid.slice(2)}`;

/** The path's service SID, checked to be the caller's (another is answered 404, as Twilio does). */
function checkService(r: TwilioRequest): string {
  const sid = serviceSidOf(r.accountSid);
  if (r.params.ServiceSid !== sid) throw notFound(r.path);
  return sid;
}

/** Native statuses in Twilio's vocabulary: a wrong code leaves a verification `pending`. */
function verificationStatus(v: Verification): string {
  switch (v.status) {
    case 'rejected': return 'pending';
    case 'maxed': return 'max_attempts_reached';
    default: return v.status;
  }
}

function presentService(s: EffectiveVerifySettings, r: TwilioRequest) {
  const sid = serviceSidOf(r.accountSid);
  return {
    sid, account_sid: r.accountSid, friendly_name: s.appName, code_length: s.codeLength,
    lookup_enabled: false, psd2_enabled: false, skip_sms_to_landlines: false, dtmf_input_required: false,
    tts_name: null, do_not_share_warning_enabled: false, custom_code_enabled: false, push: {}, totp: {},
    default_template_sid: null, whatsapp: {}, verify_event_subscription_enabled: false,
    date_created: rfc2822(s.updatedAt), date_updated: rfc2822(s.updatedAt),
    url: `${BASE}${SERVICES}/${sid}`,
    links: { verifications: `${BASE}${SERVICES}/${sid}/Verifications`, verification_checks: `${BASE}${SERVICES}/${sid}/VerificationCheck` },
  };
}

function presentVerification(v: Verification, r: TwilioRequest) {
  const sid = toSid(v.id);
  const serviceSid = serviceSidOf(r.accountSid);
  return {
    sid, service_sid: serviceSid, account_sid: r.accountSid, to: v.to, channel: v.channel, status: verificationStatus(v),
    valid: v.status === 'approved', lookup: {}, amount: null, payee: null,
    send_code_attempts: [{ time: v.createdAt.toISOString(), channel: v.channel, attempt_sid: v.messageId ? toSid(v.messageId) : null }],
    date_created: v.createdAt.toISOString(), date_updated: v.updatedAt.toISOString(),
    sna: null, url: `${BASE}${SERVICES}/${serviceSid}/Verifications/${sid}`,
  };
}

function presentCheck(v: Verification, r: TwilioRequest) {
  return {
    sid: toSid(v.id), service_sid: serviceSidOf(r.accountSid), account_sid: r.accountSid, to: v.to, channel: v.channel,
    status: verificationStatus(v), valid: v.status === 'approved', amount: null, payee: null,
    date_created: v.createdAt.toISOString(), date_updated: v.updatedAt.toISOString(), sna_attempts_error_codes: [],
  };
}

const CHANNELS: Record<string, string> = { sms: 'sms', whatsapp: 'whatsapp', email: 'email' };

/** The verification a check or fetch names: by SID, or the latest checkable one sent to `To`. */
async function verificationId(r: TwilioRequest, sid: string | undefined, to: string | undefined): Promise<string> {
  if (sid !== undefined) {
    const id = fromSid(sid, 'ver');
    if (!id) throw notFound(r.path);
    return id;
  }
  if (to === undefined) throw new TwilioError(400, 60200, 'Either a To or VerificationSid must be specified');
  for (const status of ['pending', 'rejected'] as const) {
    const page = await r.run(listVerificationsOp, { to, status, limit: 1 });
    const found = (page as { items: Verification[] }).items[0];
    if (found) return found.id;
  }
  throw new TwilioError(404, 20404, `No pending verification for ${to}`);
}

const codeLength = (r: TwilioRequest) => (r.form.CodeLength === undefined ? undefined : Number(r.form.CodeLength));

export const verifyRoutes = [
  twilioRoute({
    method: 'GET', path: SERVICES, operation: getVerifySettingsOp, params: ['PageSize', 'Page', 'PageToken'],
    input: () => ({}),
    output: (s: EffectiveVerifySettings, r) => ({
      services: [presentService(s, r)],
      meta: { page: 0, page_size: 50, first_page_url: `${BASE}${SERVICES}?PageSize=50&Page=0`, previous_page_url: null, url: `${BASE}${SERVICES}?PageSize=50&Page=0`, next_page_url: null, key: 'services' },
    }),
  }),
  twilioRoute({
    method: 'GET', path: SERVICE, operation: getVerifySettingsOp,
    input: (r) => { checkService(r); return {}; },
    output: presentService,
  }),
  twilioRoute({
    method: 'POST', path: SERVICE, operation: updateVerifySettingsOp, params: ['FriendlyName', 'CodeLength'],
    fields: { app_name: 'FriendlyName', code_length: 'CodeLength' },
    input: (r) => { checkService(r); return { app_name: r.form.FriendlyName, code_length: codeLength(r) }; },
    output: presentService,
  }),
  twilioRoute({
    method: 'POST', path: `${SERVICE}/Verifications`, operation: sendVerificationOp, status: 201,
    params: ['To', 'Channel', 'Locale', 'CodeLength'],
    fields: { to: 'To', channel: 'Channel', locale: 'Locale', code_length: 'CodeLength' },
    input: (r) => {
      checkService(r);
      const channel = typeof r.form.Channel === 'string' ? CHANNELS[r.form.Channel] ?? r.form.Channel : undefined;
      return { to: r.form.To, channel, locale: r.form.Locale, code_length: codeLength(r) };
    },
    output: presentVerification,
  }),
  twilioRoute({
    method: 'GET', path: `${SERVICE}/Verifications/{Sid}`, operation: getVerificationOp,
    input: async (r) => { checkService(r); return { id: await verificationId(r, r.params.Sid, undefined) }; },
    output: presentVerification,
  }),
  twilioRoute({
    method: 'POST', path: `${SERVICE}/VerificationCheck`, operation: checkVerificationOp, status: 200,
    params: ['To', 'VerificationSid', 'Code'],
    fields: { code: 'Code', verification_id: 'VerificationSid' },
    input: async (r) => {
      checkService(r);
      const id = await verificationId(r, r.form.VerificationSid as string | undefined, r.form.To as string | undefined);
      return { verification_id: id, code: r.form.Code };
    },
    output: presentCheck,
  }),
];
