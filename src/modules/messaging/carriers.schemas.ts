/**
 * Inputs of the connector and route operations (REST wire shape; GraphQL converts to it). Limits
 * follow SMPP 3.4 where it has them (system_id 15 and system_type 12 characters); the password is
 * write-only. Destination prefixes are `+` and up to 15 digits (empty: every destination); a route's
 * sender is an E.164 number.
 */
import { z } from 'zod';
import { pageInput } from '../../platform/inputs.ts';
import { normalizePhone } from '../../platform/recipients.ts';
import { SMPP_BIND_MODES } from '../../providers/messaging/smpp/connector.ts';
import { CONCATENATIONS } from '../../providers/messaging/smpp/encoding.ts';
import { CARRIER_CHANNELS, channelOfKind, CONNECTOR_KINDS } from './carriers.entities.ts';

const smppFields = {
  host: z.string().trim().min(1).max(253),
  port: z.number().int().min(1).max(65535),
  tls: z.boolean().nullish(),
  system_id: z.string().min(1).max(15),
  password: z.string().min(1).max(64),
  system_type: z.string().max(12).nullish(),
  bind_mode: z.enum(SMPP_BIND_MODES).nullish(),
  binds: z.number().int().min(1).max(16).nullish(),
  window: z.number().int().min(1).max(1000).nullish(),
  throughput: z.number().positive().max(10_000).nullish(),
  concatenation: z.enum(CONCATENATIONS).nullish(),
  enquire_link_seconds: z.number().min(1).max(600).nullish(),
  request_receipts: z.boolean().nullish(),
};

export const SMPP_DEFAULTS = {
  tls: false, system_type: '', bind_mode: 'transceiver', binds: 1, window: 10, throughput: 100, concatenation: 'udh', enquire_link_seconds: 30, request_receipts: true,
} as const;

/** Twilio: the account SID (AC…), its auth token (write-only), and optionally a Messaging Service (MG…) to send from. */
const twilioFields = {
  account_sid: z.string().regex(/^AC[0-9a-fA-F]{32}$/, { message: 'account_sid is AC and 32 hex digits' }),
  auth_token: z.string().min(1).max(128),
  messaging_service_sid: z.string().regex(/^MG[0-9a-fA-F]{32}$/, { message: 'messaging_service_sid is MG and 32 hex digits' }).nullish(),
};
/** Telnyx: an API key (write-only), the account's webhook public key (base64 Ed25519), optionally a messaging profile. */
const telnyxFields = {
  api_key: z.string().min(1).max(256),
  public_key: z.string().refine((k) => /^[A-Za-z0-9+/]{43}=$/.test(k), { message: 'public_key is a base64 Ed25519 public key (44 characters)' }),
  messaging_profile_id: z.string().min(1).max(100).nullish(),
};
/** Vonage: the API key, its secret and the signature secret of signed webhooks (both write-only). */
const vonageFields = {
  api_key: z.string().min(1).max(64),
  api_secret: z.string().min(1).max(128),
  signature_secret: z.string().min(16).max(256),
};
/**
 * WhatsApp Cloud API (Meta): the system user's access token, the app secret (signs webhooks), the
 * verify token of the webhook subscription handshake, the phone number id and the WhatsApp
 * Business Account id; all write-only. `api_version` is the Graph API version (v21.0).
 */
const whatsAppCloudFields = {
  access_token: z.string().min(1).max(1024),
  app_secret: z.string().min(8).max(256),
  verify_token: z.string().min(8).max(256),
  phone_number_id: z.string().regex(/^\d{1,32}$/, { message: 'phone_number_id is the number\'s id in the Cloud API (digits)' }),
  waba_id: z.string().regex(/^\d{1,32}$/, { message: 'waba_id is the WhatsApp Business Account id (digits)' }),
  api_version: z.string().regex(/^v\d{1,3}\.\d{1,2}$/, { message: 'api_version is a Graph API version such as v21.0' }).nullish(),
};
const KIND_FIELDS = ['smpp', 'twilio', 'telnyx', 'vonage', 'whatsapp_cloud'] as const;

/** The settings object named by `kind` must be there, and no other kind's. */
function oneKind(v: { kind?: string | null; [k: string]: unknown }, ctx: z.RefinementCtx, creating: boolean): void {
  for (const field of KIND_FIELDS) {
    const present = v[field] !== undefined && v[field] !== null;
    if (v.kind !== undefined && field === v.kind && !present && creating) {
      ctx.addIssue({ code: 'custom', path: [field], message: `${field} settings are required for a ${field} connector`, params: { code: 'MISSING_REQUIRED_FIELD' } });
    }
    if (present && v.kind !== undefined && field !== v.kind) {
      ctx.addIssue({ code: 'custom', path: [field], message: `${field} settings do not apply to a ${String(v.kind)} connector` });
    }
  }
}

export const createConnectorInput = z.object({
  name: z.string().trim().min(1).max(100),
  kind: z.enum(CONNECTOR_KINDS),
  channel: z.enum(CARRIER_CHANNELS).nullish(),
  shared: z.boolean().nullish(),
  enabled: z.boolean().nullish(),
  smpp: z.object(smppFields).nullish(),
  twilio: z.object(twilioFields).nullish(),
  telnyx: z.object(telnyxFields).nullish(),
  vonage: z.object(vonageFields).nullish(),
  whatsapp_cloud: z.object(whatsAppCloudFields).nullish(),
}).superRefine((v, ctx) => {
  oneKind(v, ctx, true);
  if (v.channel != null && v.channel !== channelOfKind(v.kind)) {
    ctx.addIssue({ code: 'custom', path: ['channel'], message: `A ${v.kind} connector carries ${channelOfKind(v.kind)}` });
  }
});
export type CreateConnectorInput = z.infer<typeof createConnectorInput>;

export const updateConnectorInput = z.object({
  id: z.string().min(1).max(100),
  name: z.string().trim().min(1).max(100).nullish(),
  enabled: z.boolean().nullish(),
  /** Only the settings given change; a password (token, key, secret) given replaces the stored one. The object must be the connector's kind. */
  smpp: z.object(smppFields).partial().nullish(),
  twilio: z.object(twilioFields).partial().nullish(),
  telnyx: z.object(telnyxFields).partial().nullish(),
  vonage: z.object(vonageFields).partial().nullish(),
  whatsapp_cloud: z.object(whatsAppCloudFields).partial().nullish(),
});
export type UpdateConnectorInput = z.infer<typeof updateConnectorInput>;

const prefix = z.string().trim().max(16).refine((p) => p === '' || /^\+\d{1,15}$/.test(p), { message: 'prefix is + and 1 to 15 digits, or empty for every destination' });
const sender = z.string().trim().min(1).transform((value, ctx) => {
  const phone = normalizePhone(value);
  if (!phone) {
    ctx.addIssue({ code: 'custom', message: `${value} is not an E.164 number`, params: { code: 'INVALID_PHONE_NUMBER' } });
    return z.NEVER;
  }
  return phone;
});

export const createRouteInput = z.object({
  connector_id: z.string().min(1).max(100),
  channel: z.enum(CARRIER_CHANNELS).nullish(),
  prefix: prefix.nullish(),
  sender: sender.nullish(),
  priority: z.number().int().min(0).max(1000).nullish(),
  weight: z.number().int().min(1).max(10_000).nullish(),
  shared: z.boolean().nullish(),
});
export type CreateRouteInput = z.infer<typeof createRouteInput>;

export const updateRouteInput = z.object({
  id: z.string().min(1).max(100),
  connector_id: z.string().min(1).max(100).nullish(),
  prefix: prefix.nullish(),
  /** null clears the sender (every sender matches); absent leaves it. */
  sender: sender.nullable().optional(),
  priority: z.number().int().min(0).max(1000).nullish(),
  weight: z.number().int().min(1).max(10_000).nullish(),
});
export type UpdateRouteInput = z.infer<typeof updateRouteInput>;

export const listCarriersInput = pageInput;
