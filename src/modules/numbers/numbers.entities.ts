/**
 * Numbers context: the phone numbers organizations hold and their port requests. A number has
 * one holder across the whole platform: the row that holds it is `porting` or `active`, and a
 * unique index on the number over those rows (whatever the organization or mode) makes a second
 * holder impossible, even under concurrent purchases.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../../platform/db/tenant.ts';
import type { NumberCapability, NumberType } from '../../providers/numbers/types.ts';

/**
 * Where an inbound call to the number goes (live SIP trunks), as stored: an IVR flow, a voicemail
 * box, or forwarded to another number (numbers.schemas.ts `voiceRoute` validates it).
 */
export type VoiceRoute = { type: 'ivr'; ivr_id: string } | { type: 'voicemail'; voicemail_id: string } | { type: 'forward'; to: string };

/** `porting`: held for an open port request (not listed); `active`: in the inventory; `released` / `port_rejected`: history. */
export const PHONE_NUMBER_STATUSES = ['porting', 'active', 'released', 'port_rejected'] as const;
export type PhoneNumberStatus = (typeof PHONE_NUMBER_STATUSES)[number];
/** Statuses that hold the number (the unique index covers exactly these). */
export const HOLDING_STATUSES: readonly PhoneNumberStatus[] = ['porting', 'active'];

export const PhoneNumber = defineEntity({
  name: 'PhoneNumber',
  tableName: 'phone_numbers',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    /** E.164 */
    number: p.string(),
    country: p.string(),
    type: p.string().$type<NumberType>(),
    region: p.string(),
    friendlyName: p.string(),
    capabilities: p.json<NumberCapability[]>(),
    status: p.string().$type<PhoneNumberStatus>(),
    smsWebhookUrl: p.string().nullable(),
    voiceWebhookUrl: p.string().nullable(),
    agentId: p.string().nullable(),
    /** Where inbound calls go (numbers.schemas.ts VoiceRoute, REST wire shape); null: to agentId, if any. */
    voiceRoute: p.json<VoiceRoute>().nullable(),
    monthlyCost: p.decimal().precision(10).scale(2),
    currency: p.string(),
    /** How the number joined the inventory. */
    source: p.string().$type<'purchased' | 'ported'>(),
    portRequestId: p.string().nullable(),
    provider: p.string(),
    providerReference: p.string().nullable(),
    /** Monthly billing: cycles start on the anniversary of this moment (purchase or port completion). */
    billingAnchorAt: p.datetime().nullable(),
    billingPeriodStart: p.datetime().nullable(),
    billingPeriodEnd: p.datetime().nullable(),
    /** Cycles billed so far (each one usage entry `number.monthly`). */
    billingCycles: p.integer(),
    releasedAt: p.datetime().nullable(),
    /** Released numbers are billed to the end of the cycle they were released in. */
    billingEndsAt: p.datetime().nullable(),
    /** Incremented on every change; events carry it so consumers can order them. */
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type PhoneNumber = InferEntity<typeof PhoneNumber>;

export const PORT_STATUSES = ['pending', 'submitted', 'completed', 'rejected'] as const;
export type PortStatus = (typeof PORT_STATUSES)[number];

export const PortRequest = defineEntity({
  name: 'PortRequest',
  tableName: 'port_requests',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    numbers: p.json<string[]>(),
    /** The phone number rows (status `porting`) created with the request, in the order of `numbers`. */
    phoneNumberIds: p.json<string[]>(),
    status: p.string().$type<PortStatus>(),
    currentCarrier: p.string(),
    authorizationName: p.string(),
    accountNumber: p.string().nullable(),
    /** The account PIN, sealed (the carrier needs it back at submission); never shown. */
    pinSealed: p.string().nullable(),
    provider: p.string(),
    providerReference: p.string().nullable(),
    estimatedCompletion: p.datetime(),
    rejectionCode: p.string().nullable(),
    rejectionReason: p.string().nullable(),
    submittedAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
    rejectedAt: p.datetime().nullable(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type PortRequest = InferEntity<typeof PortRequest>;
