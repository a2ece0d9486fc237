/**
 * Carrier connectors and routes (README "Carriers"): rows of the organization (both modes see and
 * manage them; only live messages use them). A `shared` connector or route belongs to the platform
 * operator's organization (MESSAGING_OPERATOR_ORG) and serves every organization after its own routes.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter } from '../../platform/db/tenant.ts';
import type { ConnectorState } from '../../providers/messaging/types.ts';
import type { SmppBindMode } from '../../providers/messaging/smpp/connector.ts';
import type { Concatenation } from '../../providers/messaging/smpp/encoding.ts';

export const CONNECTOR_KINDS = ['smpp'] as const;
export type ConnectorKind = (typeof CONNECTOR_KINDS)[number];
/** The channels carriers carry today. */
export const CARRIER_CHANNELS = ['sms'] as const;
export type CarrierChannel = (typeof CARRIER_CHANNELS)[number];
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
    settings: p.json<SmppSettings>(),
    /** `{ password }`, sealed (platform/crypto); opened only by the instances that bind. Never presented. */
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
