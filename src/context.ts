/** What a request (or subscription operation) carries through resolvers and REST handlers. */
import type DataLoader from 'dataloader';
import type { Scope } from './platform/auth/scope.ts';
import type { RateLimitResult } from './platform/ratelimit/limiter.ts';
import type { Organization } from './platform/tenancy/tenancy.entities.ts';
import { operationFactory, type DenialRecorder } from './platform/operations.ts';
import type { SettingsService } from './modules/settings/settings.service.ts';
import type { MessagingService } from './modules/messaging/messaging.service.ts';
import type { TemplatesService } from './modules/messaging/templates.service.ts';
import type { WebhooksService } from './modules/webhooks/webhooks.service.ts';
import type { NumbersService } from './modules/numbers/numbers.service.ts';
import type { VerifyService } from './modules/verify/verify.service.ts';
import type { ContactsService } from './modules/contacts/contacts.service.ts';
import type { Contact, ContactList } from './modules/contacts/contacts.entities.ts';
import type { ActivityEntry } from './modules/contacts/activity.ts';
import type { EventBus } from './platform/events/bus.ts';
import type { EventsService } from './platform/events/events.service.ts';

export type Services = {
  settings: SettingsService;
  messaging: MessagingService;
  templates: TemplatesService;
  webhooks: WebhooksService;
  numbers: NumbersService;
  verify: VerifyService;
  contacts: ContactsService;
  /** Live notices for subscriptions. */
  bus: EventBus;
  events: EventsService;
};

export type Loaders = {
  organization: DataLoader<string, Organization>;
  /** `Contact.lists`: a contact id → its lists (one query per batch). */
  contactLists: DataLoader<string, ContactList[]>;
  /** `Contact.lastActivity`: a contact (keyed by id) → its newest timeline entry or null (one query per batch). */
  contactLastActivity: DataLoader<Contact, ActivityEntry | null, string>;
};

export type RequestContext = {
  scope: Scope;
  services: Services;
  loaders: Loaders;
  /** The last rate-limit window this request counted against (for X-RateLimit-* headers). */
  rateLimit?: RateLimitResult;
  /** Audits a denied operation (installed by the composition root). */
  onDenied?: DenialRecorder;
};

/** Declares an operation over the request context (see platform/operations.ts). */
export const operation = operationFactory<RequestContext>();
