/**
 * Contacts context: contacts with per-channel consent, contact lists and memberships, segments and
 * CSV imports. Consent lives on the contact (`consent` map per channel) and is what messaging's
 * opt-out check and the opt-outs list read; every change of it is also appended to the consent
 * history (`ConsentChange`), both written only by ConsentService.
 */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns, type Mode } from '../../platform/db/tenant.ts';
import type { ActorType } from '../../platform/auth/scope.ts';

/** Channels a contact can opt in to or out of (the spec's preference channels). */
export const CONSENT_CHANNELS = ['sms', 'whatsapp', 'email', 'rcs', 'viber', 'voice'] as const;
export type ConsentChannel = (typeof CONSENT_CHANNELS)[number];
export const CONSENT_STATUSES = ['opted_in', 'opted_out', 'unknown'] as const;
export type ConsentStatus = (typeof CONSENT_STATUSES)[number];
/** Where a consent change came from. */
export const CONSENT_SOURCES = ['api', 'keyword', 'import', 'campaign_link'] as const;
export type ConsentSource = (typeof CONSENT_SOURCES)[number];
/** The sources an API caller may name (the others are set by the platform). */
export const API_CONSENT_SOURCES = ['api', 'campaign_link'] as const satisfies readonly ConsentSource[];
export type ConsentEntry = { status: ConsentStatus; updated_at: string; source: ConsentSource };
export type ConsentMap = Partial<Record<ConsentChannel, ConsentEntry>>;
export type ConsentActorType = ActorType;

/** The spec's stages (lead, customer, churned) and the usual others. */
export const LIFECYCLE_STAGES = ['subscriber', 'lead', 'prospect', 'opportunity', 'customer', 'evangelist', 'churned', 'other'] as const;
export type LifecycleStage = (typeof LIFECYCLE_STAGES)[number];

export const Contact = defineEntity({
  name: 'Contact',
  tableName: 'contacts',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    /** E.164 */
    phone: p.string().nullable(),
    /** Lower-cased */
    email: p.string().nullable(),
    firstName: p.string().nullable(),
    lastName: p.string().nullable(),
    /** ISO 3166-1 alpha-2, upper case */
    country: p.string().nullable(),
    lifecycleStage: p.string().$type<LifecycleStage>().nullable(),
    tags: p.json<string[]>(),
    /** The custom metadata keys that are not sealed (all of them outside HIPAA mode). */
    metadata: p.json<Record<string, unknown>>(),
    /**
     * HIPAA mode: the PHI metadata keys, sealed under the organization's data key (contacts.phi.ts);
     * null when none is sealed.
     */
    phi: p.text().nullable(),
    consent: p.json<ConsentMap>(),
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type Contact = InferEntity<typeof Contact>;

/**
 * The consent history: one row per channel whose status changed, append-only (never updated),
 * deleted with its contact. `details` says where a change came from beyond `source`: the keyword
 * and inbound message, the import and CSV row.
 */
export const ConsentChange = defineEntity({
  name: 'ConsentChange',
  tableName: 'contact_consent_changes',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    contactId: p.string(),
    channel: p.string().$type<ConsentChannel>(),
    status: p.string().$type<ConsentStatus>(),
    previousStatus: p.string().$type<ConsentStatus>(),
    source: p.string().$type<ConsentSource>(),
    /** Who made the change through the API (null for keywords and imports). */
    actorType: p.string().$type<ConsentActorType>().nullable(),
    actorId: p.string().nullable(),
    requestId: p.string().nullable(),
    details: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
  },
});
export type ConsentChange = InferEntity<typeof ConsentChange>;

export const ContactList = defineEntity({
  name: 'ContactList',
  tableName: 'contact_lists',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    description: p.string().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type ContactList = InferEntity<typeof ContactList>;

export const ContactListMember = defineEntity({
  name: 'ContactListMember',
  tableName: 'contact_list_members',
  filters: tenantFilter('organization+mode'),
  properties: {
    listId: p.string().primary(),
    contactId: p.string().primary(),
    organizationId: p.string(),
    mode: p.string().$type<Mode>(),
    addedAt: p.datetime(),
  },
});
export type ContactListMember = InferEntity<typeof ContactListMember>;

export const Segment = defineEntity({
  name: 'Segment',
  tableName: 'segments',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    name: p.string(),
    description: p.string().nullable(),
    rules: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type Segment = InferEntity<typeof Segment>;

export const IMPORT_STATUSES = ['queued', 'processing', 'completed', 'failed'] as const;
export type ImportStatus = (typeof IMPORT_STATUSES)[number];
export type ImportRejection = { row: number; code: string; field?: string; message: string };

export const ContactImport = defineEntity({
  name: 'ContactImport',
  tableName: 'contact_imports',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    status: p.string().$type<ImportStatus>(),
    /** The uploaded CSV, kept until the job has read it (never presented). */
    csv: p.text().lazy(),
    listId: p.string().nullable(),
    totalRows: p.integer(),
    processedRows: p.integer(),
    createdCount: p.integer(),
    updatedCount: p.integer(),
    rejectedCount: p.integer(),
    rejections: p.json<ImportRejection[]>(),
    error: p.string().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    completedAt: p.datetime().nullable(),
  },
});
export type ContactImport = InferEntity<typeof ContactImport>;
