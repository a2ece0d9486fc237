/** Messaging context: messages in both directions, templates and the organization's senders. */
import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { tenantFilter, tenantRowColumns } from '../../platform/db/tenant.ts';
import type { Channel } from '../../providers/messaging/types.ts';

/** The spec's message statuses, in its order (REST filters, the GraphQL enum, the entity). */
export const MESSAGE_STATUSES = ['queued', 'sent', 'delivered', 'failed', 'read'] as const;
export type MessageStatus = (typeof MESSAGE_STATUSES)[number];
export const MESSAGE_DIRECTIONS = ['outbound', 'inbound'] as const;
export type MessageDirection = (typeof MESSAGE_DIRECTIONS)[number];
export type StatusChange = { status: MessageStatus; at: string; error_code?: string };
export type Fallback = { channel: 'sms'; reason: string; at: string };

export const Message = defineEntity({
  name: 'Message',
  tableName: 'messages',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    channel: p.string().$type<Channel>(),
    direction: p.string().$type<MessageDirection>(),
    /** The recipient (outbound) or our receiving address (inbound); for email with several recipients, the first. */
    to: p.string(),
    recipients: p.json<string[]>(),
    from: p.string(),
    body: p.text().nullable(),
    /** Channel payload as accepted (WhatsApp template/media, email subject/html, RCS card/suggestions, …). */
    content: p.json<Record<string, unknown>>(),
    status: p.string().$type<MessageStatus>(),
    statusHistory: p.json<StatusChange[]>(),
    encoding: p.string().nullable(),
    segments: p.integer().nullable(),
    errorCode: p.string().nullable(),
    errorMessage: p.string().nullable(),
    provider: p.string().nullable(),
    providerMessageId: p.string().nullable(),
    templateId: p.string().nullable(),
    variables: p.json<Record<string, unknown>>().nullable(),
    fallback: p.json<Fallback>().nullable(),
    originalMessageId: p.string().nullable(),
    metadata: p.json<Record<string, unknown>>(),
    webhookUrl: p.string().nullable(),
    /**
     * Sealed (AES-GCM) `{ body, content }` of a send with concealed secrets (verify's codes): body and
     * content above show them masked; only the delivery job opens this. Never presented.
     */
    sealedContent: p.text().nullable(),
    /**
     * HIPAA mode: body, content, variables and PHI metadata keys sealed with the organization's
     * data key (messaging.phi.ts); the columns above then hold only their clear parts.
     */
    phi: p.text().nullable(),
    /** Set when the retention job purged the content (HIPAA mode); body and content are empty since. */
    contentPurgedAt: p.datetime().nullable(),
    /**
     * The Idempotency-Key the message was accepted under, as `<n>:<key>` (the request's n-th send),
     * unique per tenant; with the start of the request's hash. Never presented (see SendOptions.idempotency).
     */
    idempotencyKey: p.string().nullable(),
    idempotencyHash: p.string().nullable(),
    /**
     * Sent by a flow execution: how deep in its chain of executions (Scope.chainDepth); every
     * event of the message carries it as `data.depth` (flow triggers stop a chain by it). Else null.
     */
    chainDepth: p.integer().nullable(),
    /** Incremented on every status change; events carry it so consumers can order them. */
    sequence: p.integer(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
    sentAt: p.datetime().nullable(),
    deliveredAt: p.datetime().nullable(),
    readAt: p.datetime().nullable(),
    failedAt: p.datetime().nullable(),
  },
});
export type Message = InferEntity<typeof Message>;

export const TEMPLATE_STATUSES = ['draft', 'pending_approval', 'approved', 'rejected'] as const;
export type TemplateStatus = (typeof TEMPLATE_STATUSES)[number];
/** The statuses a caller may set (review sets the others). */
export const SETTABLE_TEMPLATE_STATUSES = ['draft', 'pending_approval'] as const satisfies readonly TemplateStatus[];
export type TemplateVariable = { name: string; example?: string; required?: boolean };

export const MessageTemplate = defineEntity({
  name: 'MessageTemplate',
  tableName: 'message_templates',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    channel: p.string().$type<Channel>(),
    name: p.string(),
    content: p.text(),
    category: p.string().nullable(),
    language: p.string(),
    variables: p.json<TemplateVariable[]>(),
    status: p.string().$type<TemplateStatus>(),
    rejectionReason: p.string().nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type MessageTemplate = InferEntity<typeof MessageTemplate>;

/** An address the organization sends from on one channel (phone number, email address, RCS agent, Viber sender). */
export const MessageSender = defineEntity({
  name: 'MessageSender',
  tableName: 'message_senders',
  filters: tenantFilter('organization+mode'),
  properties: {
    ...tenantRowColumns(),
    channel: p.string().$type<Channel>(),
    address: p.string(),
    isDefault: p.boolean(),
    createdAt: p.datetime(),
  },
});
export type MessageSender = InferEntity<typeof MessageSender>;
