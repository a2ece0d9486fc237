/**
 * Carrier connectors and routes (docs/messaging.md, "Carriers"): rows of the organization (both modes see and
 * manage them; only live messages use them). A `shared` connector or route belongs to the platform
 * operator's organization (MESSAGING_OPERATOR_ORG) and serves every organization after its own routes.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter } from '../../platform/db/tenant.ts';
import type { ConnectorState } from '../../providers/messaging/types.ts';
import type { SmppBindMode } from '../../providers/messaging/smpp/connector.ts';
import type { Concatenation } from '../../providers/messaging/smpp/encoding.ts';

export const CONNECTOR_KINDS = ['smpp', 'twilio', 'telnyx', 'vonage', 'whatsapp_cloud'] as const;
export type ConnectorKind = (typeof CONNECTOR_KINDS)[number];
/** The HTTP API kinds: they call back on this service's routes (`/v1/providers/{kind}/callbacks`). */
export const HTTP_CONNECTOR_KINDS = ['twilio', 'telnyx', 'vonage', 'whatsapp_cloud'] as const;
export type HttpConnectorKind = (typeof HTTP_CONNECTOR_KINDS)[number];
export function isHttpKind(kind: string): kind is HttpConnectorKind {
  return (HTTP_CONNECTOR_KINDS as readonly string[]).includes(kind);
}
/** The channels carriers carry today. */
export const CARRIER_CHANNELS = ['sms', 'whatsapp'] as const;
export type CarrierChannel = (typeof CARRIER_CHANNELS)[number];
/** The channel each kind carries: WhatsApp Cloud carries WhatsApp, every other kind SMS (and MMS where it can). */
export function channelOfKind(kind: ConnectorKind): CarrierChannel {
  return kind === 'whatsapp_cloud' ? 'whatsapp' : 'sms';
}
/** Kinds that carry MMS (media URLs on an SMS): the SMS carrier APIs, not SMPP. */
export function carriesMms(kind: string): boolean {
  return kind === 'twilio' || kind === 'telnyx' || kind === 'vonage';
}
/** What a connector row shows: the reported state, or `disabled` when switched off. */
export type ConnectorRowStatus = ConnectorState | 'disabled';

/** An SMPP account's settings as stored and presented (the password is sealed apart). */
export type SmppSettings = {
  host: string;
  port: number;
  tls: boolean;
  system_id: string;
  system_type: string;
  bind_mode: SmppBindMode;
  binds: number;
  window: number;
  throughput: number;
  concatenation: Concatenation;
  enquire_link_seconds: number;
  request_receipts: boolean;
};

/** A Twilio account (the auth token is sealed apart). */
export type TwilioSettings = { account_sid: string; messaging_service_sid: string | null };
/** A Telnyx account (the API key is sealed apart; the public key verifies webhooks). */
export type TelnyxSettings = { public_key: string; messaging_profile_id: string | null };
/** A Vonage account (the API secret and the signature secret are sealed apart). */
export type VonageSettings = { api_key: string };
/**
 * A WhatsApp Cloud API number (Meta). Its access token, app secret, verify token, phone number id
 * and WABA id are all sealed with the credentials; only the Graph API version is a plain setting.
 */
export type WhatsAppCloudSettings = { api_version: string };
/** A connector's settings as stored: the shape of its kind. */
export type ConnectorSettings = SmppSettings | TwilioSettings | TelnyxSettings | VonageSettings | WhatsAppCloudSettings;
/** What the sealed credentials hold, by kind. */
export type ConnectorCredentials = {
  password?: string; auth_token?: string; api_key?: string; api_secret?: string; signature_secret?: string;
  access_token?: string; app_secret?: string; verify_token?: string; phone_number_id?: string; waba_id?: string;
};

export const MessagingConnector = defineEntity({
  name: 'MessagingConnector',
  tableName: 'messaging_connectors',
  filters: tenantFilter('organization'),
  properties: {
    id: p.string().primary(),
    organizationId: p.string(),
    name: p.string(),
    kind: p.string().$type<ConnectorKind>(),
    channel: p.string().$type<CarrierChannel>(),
    shared: p.boolean(),
    enabled: p.boolean(),
    settings: p.json<ConnectorSettings>(),
    /** The kind's secrets (`{ password }`, `{ auth_token }`, …), sealed (platform/crypto); opened only by the instances that run the connector and by its callbacks. Never presented. */
    sealedCredentials: p.text(),
    status: p.string().$type<ConnectorRowStatus>(),
    bindsUp: p.integer(),
    lastError: p.string().nullable(),
    lastErrorAt: p.datetime().nullable(),
    statusAt: p.datetime().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type MessagingConnector = InferEntity<typeof MessagingConnector>;

export const MessagingRoute = defineEntity({
  name: 'MessagingRoute',
  tableName: 'messaging_routes',
  filters: tenantFilter('organization'),
  properties: {
    id: p.string().primary(),
    organizationId: p.string(),
    connectorId: p.string(),
    shared: p.boolean(),
    channel: p.string().$type<CarrierChannel>(),
    /** E.164 prefix of the destination (`+44`, `+1212`); empty matches every destination. */
    prefix: p.string(),
    /** Only messages from this sender; null matches every sender. */
    sender: p.string().nullable(),
    priority: p.integer(),
    weight: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type MessagingRoute = InferEntity<typeof MessagingRoute>;
