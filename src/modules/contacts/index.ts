/**
 * Contacts: contacts, consent (checked before every send: port `consent`), inbound SMS keywords
 * (port `inboundMessages`), lists, segments and imports.
 */
import { defineModule } from '../manifest.ts';
import { ConsentChange, Contact, ContactImport, ContactList, ContactListMember, Segment } from './contacts.entities.ts';
import { createContactsServices } from './contacts.service.ts';
import { ConsentCheck } from './consent.check.ts';
import { registerContactsJobs } from './contacts.jobs.ts';
import { contactRoutes } from './contacts.rest.ts';
import { flowContactsPort } from './flows.port.ts';
import type { ContactsServices } from './contacts.operations.ts';
import { CampaignAudience } from './audience.ts';
import './contacts.graphql.ts';

export const CONTACT_EVENTS = ['contact.created', 'contact.updated', 'contact.deleted', 'contact.opted_out', 'contact.opted_in'] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { contacts: (typeof CONTACT_EVENTS)[number] }
}

export const contactsModule = defineModule({
  name: 'contacts',
  entities: [Contact, ConsentChange, ContactList, ContactListMember, Segment, ContactImport],
  events: CONTACT_EVENTS,
  requires: ['messageSender'],
  create: (p, ports): ContactsServices =>
    createContactsServices({ orm: p.orm, pool: p.pool, clock: p.clock, cursors: p.cursors, jobs: p.jobs, messaging: ports('messageSender'), consentCheck: new ConsentCheck(p.pool) }),
  provides: (s, p) => ({
    campaignAudience: new CampaignAudience(p.pool, p.clock),
    consent: { assertCanMessage: (tenant, channel, recipient) => s.contacts.consent.assertCanContact(tenant, channel, recipient) },
    inboundMessages: s.contacts,
    flowContacts: flowContactsPort(s),
  }),
  routes: contactRoutes,
  jobs: (registry, s) => registerContactsJobs(registry, s),
});
