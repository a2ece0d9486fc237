/**
 * Contacts: contacts, consent (checked before every send: port `consent`), inbound SMS keywords
 * (port `inboundMessages`), lists, segments and imports. With the optional `phi` port (HIPAA mode)
 * PHI metadata keys are sealed, opened or redacted (contacts.phi.ts) and a job seals what was
 * stored before the mode (contacts.backfill.ts).
 */
import { defineModule } from '../manifest.ts';
import { PhiHousekeeping } from '../../platform/phiHousekeeping.ts';
import { ConsentChange, Contact, ContactImport, ContactList, ContactListMember, Segment } from './contacts.entities.ts';
import { createContactsServices, type ContactsServices } from './contacts.service.ts';
import { ConsentCheck } from './consent.check.ts';
import { registerContactsJobs } from './contacts.jobs.ts';
import { contactRoutes } from './contacts.rest.ts';
import { flowContactsPort } from './flows.port.ts';
import { CampaignAudience } from './audience.ts';
import { ContactPhi } from './contacts.phi.ts';
import { ContactsBackfill } from './contacts.backfill.ts';
import './contacts.graphql.ts';

export const CONTACT_EVENTS = ['contact.created', 'contact.updated', 'contact.deleted', 'contact.opted_out', 'contact.opted_in'] as const;
declare module '../../platform/events/events.ts' {
  interface EventCatalog { contacts: (typeof CONTACT_EVENTS)[number] }
}

/** Contacts's id prefixes → GraphQL type names (the manifest's `ids`); `newId` accepts them by the derived augmentation. */
const ids = { con: 'Contact', lst: 'ContactList', seg: 'Segment', imp: 'ContactImport', cns: 'ConsentChange' } as const;
declare module '../../platform/ids.ts' {
  interface ModuleIdPrefixes extends Readonly<typeof ids> {}
}

/** Contacts's error codes (the manifest's `errors`); `ServiceError` accepts them by the derived augmentation. */
const errors = {
  RECIPIENT_OPTED_OUT: { status: 422, message: 'Recipient has opted out of this channel' },
} as const;
declare module '../../platform/errors.ts' {
  interface ModuleErrorCodes extends Readonly<typeof errors> {}
}

export const contactsModule = defineModule({
  name: 'contacts',
  entities: [Contact, ConsentChange, ContactList, ContactListMember, Segment, ContactImport],
  ids,
  errors,
  events: CONTACT_EVENTS,
  requires: ['messageSender'],
  optional: ['phi'],
  create: (p, ports): ContactsServices & { contactsBackfill: ContactsBackfill; contactPhi: ContactPhi } => ({
    ...createContactsServices({ orm: p.orm, pool: p.pool, clock: p.clock, cursors: p.cursors, jobs: p.jobs, messaging: ports('messageSender'), consentCheck: new ConsentCheck(p.pool), phi: ports.optional('phi') }),
    contactsBackfill: new ContactsBackfill(new PhiHousekeeping({ pool: p.pool, clock: p.clock, phi: ports.optional('phi'), batchSize: p.config.phiBatchSize })),
    contactPhi: new ContactPhi(ports.optional('phi')),
  }),
  provides: (s, p) => ({
    campaignAudience: new CampaignAudience(p.pool, p.clock, s.contactPhi),
    consent: { assertCanMessage: (tenant, channel, recipient) => s.contacts.consent.assertCanContact(tenant, channel, recipient) },
    callConsent: { assertCanCall: (tenant, number) => s.contacts.consent.assertCanContact(tenant, 'voice', number), callConsentRead: s.contacts.consent.readPart('voice') },
    inboundMessages: s.contacts,
    flowContacts: flowContactsPort(s),
  }),
  routes: contactRoutes,
  jobs: (registry, s) => registerContactsJobs(registry, s),
});
