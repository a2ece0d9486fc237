/**
 * Every MikroORM entity of the service, in one list: the ORM is configured from it and the tenant
 * scope test enumerates its metadata. A module adds its entities here.
 */
import { Organization, User, TeamMember, ApiKey } from './platform/tenancy/tenancy.entities.ts';
import { AuditLogEntry } from './platform/audit/audit.entities.ts';
import { UsageEntry } from './platform/usage/usage.entities.ts';
import { Event } from './platform/events/events.entities.ts';
import { Message, MessageSender, MessageTemplate } from './modules/messaging/messaging.entities.ts';
import { WebhookAttempt, WebhookDelivery, WebhookEndpoint } from './modules/webhooks/webhooks.entities.ts';
import { Verification, VerifySettings } from './modules/verify/verify.entities.ts';
import { PhoneNumber, PortRequest } from './modules/numbers/numbers.entities.ts';
import { ConsentChange, Contact, ContactImport, ContactList, ContactListMember, Segment } from './modules/contacts/contacts.entities.ts';

export const entities = [
  Organization, User, TeamMember, ApiKey, AuditLogEntry, UsageEntry, Event,
  Message, MessageTemplate, MessageSender,
  WebhookEndpoint, WebhookDelivery, WebhookAttempt,
  PhoneNumber, PortRequest,
  Verification, VerifySettings,
  Contact, ConsentChange, ContactList, ContactListMember, Segment, ContactImport,
];

/** Entities that are not owned by one tenant. Anything else must carry the tenant filter. */
export const GLOBAL_ENTITIES = new Set(['Organization', 'User']);
