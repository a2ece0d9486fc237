/** GraphQL twins of the contacts routes; inputs are converted to the REST wire shape and run through the same operations. */
import DataLoader from 'dataloader';
import { servicesOf, type RequestContext } from '../../context.ts';
import { builder } from '../../graphql/builder.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { patchWire, toWire } from '../../graphql/wire.ts';
import { publicEventData } from '../../platform/events/events.ts';
import type { ActivityEntry } from './activity.ts';
import {
  CONSENT_CHANNELS, CONSENT_STATUSES, IMPORT_STATUSES, LIFECYCLE_STAGES,
  type ConsentChange, type ConsentEntry, type Contact, type ContactImport, type ContactList, type ImportRejection, type Segment,
} from './contacts.entities.ts';
import {
  addMembersOp, addTagsOp, consentHistoryOp, contactActivityOp, createContactOp, createListOp, createSegmentOp, deleteContactOp, deleteListOp, deleteSegmentOp,
  getContactOp, getImportOp, getListOp, getSegmentOp, listContactsOp, listListsOp, listMembersOp, listOptOutsOp, listSegmentsOp, previewRulesOp,
  previewSegmentOp, removeMemberOp, removeTagOp, setPreferencesOp, startImportOp, updateContactOp, updateListOp, updateSegmentOp,
} from './contacts.operations.ts';

/** `Contact.lists`: a contact id → its lists (one query per batch of a request). */
const contactListsLoader = (ctx: RequestContext) => ctx.loaders.get('contacts.lists', () => new DataLoader(async (ids: readonly string[]) => {
  const lists = await servicesOf(ctx, 'contacts').contacts.listsOf(ctx.scope, ids);
  return ids.map((id) => lists.get(id) ?? []);
}));
/** `Contact.lastActivity`: a contact (keyed by id) → its newest timeline entry or null (one query per batch). */
const lastActivityLoader = (ctx: RequestContext) => ctx.loaders.get('contacts.lastActivity', () => new DataLoader(async (contacts: readonly Contact[]) => {
  const latest = await servicesOf(ctx, 'contacts').contacts.lastActivityOf(ctx.scope, contacts);
  return contacts.map((c) => latest.get(c.id) ?? null);
}, { cacheKeyFn: (c) => c.id }));

const LifecycleStageEnum = builder.enumType('LifecycleStage', { values: LIFECYCLE_STAGES });
const ConsentChannelEnum = builder.enumType('ConsentChannel', { values: CONSENT_CHANNELS });
const ConsentStatusEnum = builder.enumType('ConsentStatus', { values: CONSENT_STATUSES });
const ImportStatusEnum = builder.enumType('ContactImportStatus', { values: IMPORT_STATUSES });

type ConsentView = { status: ConsentEntry['status']; updated_at: string | null; source: string | null };
const unknownConsent: ConsentView = { status: 'unknown', updated_at: null, source: null };

const ConsentEntryRef = builder.objectRef<ConsentView>('ConsentEntry').implement({
  fields: (t) => ({
    status: t.field({ type: ConsentStatusEnum, resolve: (c) => c.status }),
    updatedAt: t.field({ type: 'DateTime', nullable: true, resolve: (c) => (c.updated_at ? new Date(c.updated_at) : null) }),
    source: t.string({ nullable: true, description: 'api, keyword, import or campaign_link', resolve: (c) => c.source }),
  }),
});

const text = (v: unknown) => (typeof v === 'string' ? v : null);

const ActivityRef = builder.objectRef<ActivityEntry>('ContactActivity').implement({
  description: 'One entry of a contact\'s timeline: an event (message queued, sent, delivered, read, failed or received; later calls and agent conversations) whose counterpart address is the contact\'s phone or email.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The event id (evt_…)' }),
    type: t.exposeString('type', { description: 'The event type, e.g. message.delivered' }),
    resourceType: t.exposeString('resourceType', { description: 'message (later call, conversation)' }),
    resourceId: t.exposeString('resourceId', { description: 'The message (call, conversation) the event is about' }),
    channel: t.string({ nullable: true, resolve: (e) => text(e.data.channel) }),
    direction: t.string({ nullable: true, description: 'outbound or inbound', resolve: (e) => text(e.data.direction) }),
    from: t.string({ nullable: true, resolve: (e) => text(e.data.from) }),
    to: t.string({ nullable: true, resolve: (e) => text(e.data.to) }),
    status: t.string({ nullable: true, description: 'The resource\'s status at this event', resolve: (e) => text(e.data.status) }),
    data: t.field({ type: 'JSON', description: 'The event data as webhooks receive it', resolve: (e) => publicEventData(e.data) }),
    createdAt: t.field({ type: 'DateTime', resolve: (e) => new Date(e.createdAt) }),
  }),
});

const ConsentChangeRef = builder.objectRef<ConsentChange>('ConsentChange').implement({
  description: 'One change of a contact\'s consent on one channel (the append-only consent history).',
  fields: (t) => ({
    id: t.exposeID('id'),
    contactId: t.exposeString('contactId'),
    channel: t.field({ type: ConsentChannelEnum, resolve: (h) => h.channel }),
    status: t.field({ type: ConsentStatusEnum, resolve: (h) => h.status }),
    previousStatus: t.field({ type: ConsentStatusEnum, resolve: (h) => h.previousStatus }),
    source: t.exposeString('source', { description: 'api, keyword, import or campaign_link' }),
    actorType: t.string({ nullable: true, description: 'api_key, user or system for changes made through the API; null for keywords and imports', resolve: (h) => h.actorType ?? null }),
    actorId: t.string({ nullable: true, resolve: (h) => h.actorId ?? null }),
    requestId: t.string({ nullable: true, resolve: (h) => h.requestId ?? null }),
    details: t.field({ type: 'JSON', description: 'keyword and message_id (keywords); import_id and row (imports)', resolve: (h) => h.details }),
    createdAt: t.field({ type: 'DateTime', resolve: (h) => new Date(h.createdAt) }),
  }),
});

const ContactConsentRef = builder.objectRef<Contact>('ContactConsent').implement({
  description: 'Consent per channel; unknown when nothing was recorded.',
  fields: (t) => Object.fromEntries(CONSENT_CHANNELS.map((ch) => [ch, t.field({ type: ConsentEntryRef, resolve: (c) => c.consent[ch] ?? unknownConsent })])),
});

export const ContactRef = builder.node(builder.objectRef<Contact>('Contact'), {
  id: { resolve: (c) => c.id },
  loadOne: (id, ctx) => run(getContactOp, ctx, { id }),
  fields: (t) => ({
    phone: t.string({ nullable: true, description: 'E.164', resolve: (c) => c.phone ?? null }),
    email: t.string({ nullable: true, resolve: (c) => c.email ?? null }),
    firstName: t.string({ nullable: true, resolve: (c) => c.firstName ?? null }),
    lastName: t.string({ nullable: true, resolve: (c) => c.lastName ?? null }),
    country: t.string({ nullable: true, description: 'ISO 3166-1 alpha-2', resolve: (c) => c.country ?? null }),
    lifecycleStage: t.field({ type: LifecycleStageEnum, nullable: true, resolve: (c) => c.lifecycleStage ?? null }),
    tags: t.stringList({ resolve: (c) => c.tags }),
    metadata: t.field({ type: 'JSON', resolve: (c) => c.metadata }),
    consent: t.field({ type: ContactConsentRef, resolve: (c) => c }),
    lists: t.field({
      type: [ContactListRef], description: 'The lists the contact is a member of, newest list first',
      resolve: (c, _args, ctx) => contactListsLoader(ctx).load(c.id),
    }),
    lastActivity: t.field({
      type: ActivityRef, nullable: true, description: 'The newest entry of the contact\'s timeline (see contactActivity); null when there is none',
      resolve: (c, _args, ctx) => lastActivityLoader(ctx).load(c),
    }),
    createdAt: t.field({ type: 'DateTime', resolve: (c) => new Date(c.createdAt) }),
    updatedAt: t.field({ type: 'DateTime', resolve: (c) => new Date(c.updatedAt) }),
  }),
});

const ContactListRef = builder.node(builder.objectRef<ContactList>('ContactList'), {
  id: { resolve: (l) => l.id },
  loadOne: (id, ctx) => run(getListOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    description: t.string({ nullable: true, resolve: (l) => l.description ?? null }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const SegmentRef = builder.node(builder.objectRef<Segment>('Segment'), {
  id: { resolve: (s) => s.id },
  loadOne: (id, ctx) => run(getSegmentOp, ctx, { id }),
  fields: (t) => ({
    name: t.exposeString('name'),
    description: t.string({ nullable: true, resolve: (s) => s.description ?? null }),
    rules: t.field({ type: 'JSON', description: 'The rules object (docs/contacts.md: all/any groups of { field, op, value })', resolve: (s) => s.rules }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const SegmentPreviewRef = builder.objectRef<{ count: number; contacts: Contact[] }>('SegmentPreview').implement({
  fields: (t) => ({
    count: t.exposeInt('count'),
    contacts: t.field({ type: [ContactRef], description: 'The newest matching contacts (first page)', resolve: (p) => p.contacts }),
  }),
});

const ImportRejectionRef = builder.objectRef<ImportRejection>('ContactImportRejection').implement({
  fields: (t) => ({
    row: t.exposeInt('row', { description: 'CSV line number (the header is line 1)' }),
    code: t.exposeString('code'),
    field: t.string({ nullable: true, resolve: (r) => r.field ?? null }),
    message: t.exposeString('message'),
  }),
});

const ContactImportRef = builder.node(builder.objectRef<ContactImport>('ContactImport'), {
  id: { resolve: (i) => i.id },
  loadOne: (id, ctx) => run(getImportOp, ctx, { id }),
  fields: (t) => ({
    status: t.field({ type: ImportStatusEnum, resolve: (i) => i.status }),
    listId: t.string({ nullable: true, resolve: (i) => i.listId ?? null }),
    totalRows: t.exposeInt('totalRows'),
    processedRows: t.exposeInt('processedRows'),
    created: t.int({ resolve: (i) => i.createdCount }),
    updated: t.int({ resolve: (i) => i.updatedCount }),
    accepted: t.int({ resolve: (i) => i.createdCount + i.updatedCount }),
    rejected: t.int({ resolve: (i) => i.rejectedCount }),
    rejections: t.field({ type: [ImportRejectionRef], resolve: (i) => i.rejections }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    completedAt: t.field({ type: 'DateTime', nullable: true, resolve: (i) => i.completedAt ?? null }),
  }),
});

const ConsentMapInput = builder.inputType('ContactPreferencesInput', {
  description: 'Channels to set; channels left out are unchanged.',
  fields: (t) => Object.fromEntries(CONSENT_CHANNELS.map((ch) => [ch, t.field({ type: ConsentStatusEnum, required: false })])),
});

const contactFields = (required: boolean) => (t: PothosInputFields) => ({
  phone: t.string({ required: false }),
  email: t.string({ required: false }),
  firstName: t.string({ required: false }),
  lastName: t.string({ required: false }),
  country: t.string({ required: false }),
  lifecycleStage: t.field({ type: LifecycleStageEnum, required: false }),
  tags: t.stringList({ required: false }),
  metadata: t.field({ type: 'JSON', required: false, description: required ? undefined : 'Merged with the existing metadata; a null value removes its key' }),
});
type PothosInputFields = Parameters<Parameters<typeof builder.inputType>[1]['fields']>[0];

const CreateContactInput = builder.inputType('CreateContactInput', {
  fields: (t) => ({ ...contactFields(true)(t), consent: t.field({ type: ConsentMapInput, required: false }) }),
});
const UpdateContactInput = builder.inputType('UpdateContactInput', {
  description: 'An omitted field is left as it is; null clears it. Metadata is merged; tags replace the set.',
  fields: (t) => contactFields(false)(t),
});
const ListInput = builder.inputType('ContactListInput', {
  fields: (t) => ({ name: t.string({ required: true }), description: t.string({ required: false }) }),
});
const UpdateListInput = builder.inputType('UpdateContactListInput', {
  fields: (t) => ({ name: t.string({ required: false }), description: t.string({ required: false }) }),
});
const SegmentInput = builder.inputType('SegmentInput', {
  fields: (t) => ({ name: t.string({ required: true }), description: t.string({ required: false }), rules: t.field({ type: 'JSON', required: true }) }),
});
const UpdateSegmentInput = builder.inputType('UpdateSegmentInput', {
  fields: (t) => ({ name: t.string({ required: false }), description: t.string({ required: false }), rules: t.field({ type: 'JSON', required: false }) }),
});


const deleted = (id: unknown) => String(id);

builder.queryFields((t) => ({
  contacts: t.connection({
    type: ContactRef, ...guard('Query', 'contacts', listContactsOp),
    args: {
      search: t.arg.string({ required: false, description: 'Full-text search over name, phone, email and metadata values, and fuzzy over name, phone and email; results best match first' }),
      lifecycleStage: t.arg({ type: LifecycleStageEnum, required: false }),
      country: t.arg.string({ required: false }),
      tag: t.arg.string({ required: false }),
    },
    resolve: async (_r, args, ctx) => toConnection(await run(listContactsOp, ctx, {
      ...pageRequest(args), search: args.search, lifecycle_stage: args.lifecycleStage, country: args.country, tag: args.tag,
    })),
  }),
  contact: t.field({
    type: ContactRef, ...guard('Query', 'contact', getContactOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getContactOp, ctx, { id: String(args.id) }),
  }),
  contactActivity: t.connection({
    type: ActivityRef, ...guard('Query', 'contactActivity', contactActivityOp),
    description: 'The contact\'s timeline from the event backbone: one entry per event (message queued, sent, delivered, read, failed, received) to or from its phone or email, newest first.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => toConnection(await run(contactActivityOp, ctx, { ...pageRequest(args), id: String(args.id) })),
  }),
  contactConsentHistory: t.connection({
    type: ConsentChangeRef, ...guard('Query', 'contactConsentHistory', consentHistoryOp),
    description: 'The contact\'s consent changes, newest first (REST: GET /v1/contacts/{id}/preferences/history).',
    args: { id: t.arg.id({ required: true }), channel: t.arg({ type: ConsentChannelEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(consentHistoryOp, ctx, { ...pageRequest(args), id: String(args.id), channel: args.channel })),
  }),
  contactOptOuts: t.connection({
    type: ContactRef, ...guard('Query', 'contactOptOuts', listOptOutsOp),
    args: { channel: t.arg({ type: ConsentChannelEnum, required: false }), search: t.arg.string({ required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listOptOutsOp, ctx, { ...pageRequest(args), channel: args.channel, search: args.search })),
  }),
  contactLists: t.connection({
    type: ContactListRef, ...guard('Query', 'contactLists', listListsOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listListsOp, ctx, pageRequest(args))),
  }),
  contactList: t.field({
    type: ContactListRef, ...guard('Query', 'contactList', getListOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getListOp, ctx, { id: String(args.id) }),
  }),
  contactListMembers: t.connection({
    type: ContactRef, ...guard('Query', 'contactListMembers', listMembersOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listMembersOp, ctx, { ...pageRequest(args), id: String(args.id) })),
  }),
  segments: t.connection({
    type: SegmentRef, ...guard('Query', 'segments', listSegmentsOp),
    resolve: async (_r, args, ctx) => toConnection(await run(listSegmentsOp, ctx, pageRequest(args))),
  }),
  segment: t.field({
    type: SegmentRef, ...guard('Query', 'segment', getSegmentOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getSegmentOp, ctx, { id: String(args.id) }),
  }),
  segmentPreview: t.field({
    type: SegmentPreviewRef, ...guard('Query', 'segmentPreview', previewSegmentOp),
    args: { id: t.arg.id({ required: true }), limit: t.arg.int({ required: false }) },
    resolve: (_r, args, ctx) => run(previewSegmentOp, ctx, { id: String(args.id), limit: args.limit }),
  }),
  segmentRulesPreview: t.field({
    type: SegmentPreviewRef, ...guard('Query', 'segmentRulesPreview', previewRulesOp),
    description: 'Count and first page of contacts matching rules that are not saved as a segment.',
    args: { rules: t.arg({ type: 'JSON', required: true }), limit: t.arg.int({ required: false }) },
    resolve: (_r, args, ctx) => run(previewRulesOp, ctx, { rules: args.rules, limit: args.limit }),
  }),
  contactImport: t.field({
    type: ContactImportRef, ...guard('Query', 'contactImport', getImportOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getImportOp, ctx, { id: String(args.id) }),
  }),
}));

builder.mutationFields((t) => ({
  createContact: t.field({
    type: ContactRef, ...guard('Mutation', 'createContact', createContactOp),
    args: { input: t.arg({ type: CreateContactInput, required: true }) },
    resolve: (_r, args, ctx) => run(createContactOp, ctx, toWire(args.input)),
  }),
  updateContact: t.field({
    type: ContactRef, ...guard('Mutation', 'updateContact', updateContactOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateContactInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateContactOp, ctx, { ...patchWire(args.input), id: String(args.id) }),
  }),
  deleteContact: t.id({
    ...guard('Mutation', 'deleteContact', deleteContactOp),
    description: 'Deletes the contact permanently with its list memberships and consent history; returns its id.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => { await run(deleteContactOp, ctx, { id: String(args.id) }); return deleted(args.id); },
  }),
  addContactTags: t.field({
    type: ContactRef, ...guard('Mutation', 'addContactTags', addTagsOp),
    args: { id: t.arg.id({ required: true }), tags: t.arg.stringList({ required: true }) },
    resolve: (_r, args, ctx) => run(addTagsOp, ctx, { id: String(args.id), tags: args.tags }),
  }),
  removeContactTag: t.field({
    type: ContactRef, ...guard('Mutation', 'removeContactTag', removeTagOp),
    args: { id: t.arg.id({ required: true }), tag: t.arg.string({ required: true }) },
    resolve: (_r, args, ctx) => run(removeTagOp, ctx, { id: String(args.id), tag: args.tag }),
  }),
  setContactPreferences: t.field({
    type: ContactRef, ...guard('Mutation', 'setContactPreferences', setPreferencesOp),
    args: { id: t.arg.id({ required: true }), preferences: t.arg({ type: ConsentMapInput, required: true }), source: t.arg.string({ required: false, description: 'api (default) or campaign_link' }) },
    resolve: (_r, args, ctx) => run(setPreferencesOp, ctx, { id: String(args.id), preferences: toWire(args.preferences), source: args.source }),
  }),
  createContactList: t.field({
    type: ContactListRef, ...guard('Mutation', 'createContactList', createListOp),
    args: { input: t.arg({ type: ListInput, required: true }) },
    resolve: (_r, args, ctx) => run(createListOp, ctx, toWire(args.input)),
  }),
  updateContactList: t.field({
    type: ContactListRef, ...guard('Mutation', 'updateContactList', updateListOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateListInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateListOp, ctx, { ...patchWire(args.input), id: String(args.id) }),
  }),
  deleteContactList: t.id({
    ...guard('Mutation', 'deleteContactList', deleteListOp),
    description: 'Deletes the list (its contacts are kept); returns its id.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => { await run(deleteListOp, ctx, { id: String(args.id) }); return deleted(args.id); },
  }),
  addContactListMembers: t.field({
    type: ContactListRef, ...guard('Mutation', 'addContactListMembers', addMembersOp),
    args: { id: t.arg.id({ required: true }), contactIds: t.arg.idList({ required: true }) },
    resolve: async (_r, args, ctx) => (await run(addMembersOp, ctx, { id: String(args.id), contact_ids: args.contactIds.map(String) })).list,
  }),
  removeContactListMember: t.id({
    ...guard('Mutation', 'removeContactListMember', removeMemberOp),
    description: 'Removes the contact from the list; returns the contact id.',
    args: { id: t.arg.id({ required: true }), contactId: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => { await run(removeMemberOp, ctx, { id: String(args.id), contact_id: String(args.contactId) }); return String(args.contactId); },
  }),
  createSegment: t.field({
    type: SegmentRef, ...guard('Mutation', 'createSegment', createSegmentOp),
    args: { input: t.arg({ type: SegmentInput, required: true }) },
    resolve: (_r, args, ctx) => run(createSegmentOp, ctx, { name: args.input.name, description: args.input.description, rules: args.input.rules }),
  }),
  updateSegment: t.field({
    type: SegmentRef, ...guard('Mutation', 'updateSegment', updateSegmentOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateSegmentInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateSegmentOp, ctx, { ...patchWire(args.input), id: String(args.id) }),
  }),
  deleteSegment: t.id({
    ...guard('Mutation', 'deleteSegment', deleteSegmentOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => { await run(deleteSegmentOp, ctx, { id: String(args.id) }); return deleted(args.id); },
  }),
  importContacts: t.field({
    type: ContactImportRef, ...guard('Mutation', 'importContacts', startImportOp),
    description: 'Starts a CSV import (header line: phone, email, first_name, last_name, country, lifecycle_stage, tags, metadata.<key>, consent.<channel>); poll contactImport for progress.',
    args: { csv: t.arg.string({ required: true }), listId: t.arg.id({ required: false }) },
    resolve: (_r, args, ctx) => run(startImportOp, ctx, { csv: args.csv, list_id: args.listId == null ? undefined : String(args.listId) }),
  }),
}));
