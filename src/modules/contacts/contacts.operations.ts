/** The contacts use cases as operations: reads for READERS, writes for BUILDERS, declared once for REST and GraphQL. */
import { LIMITS } from '../../platform/ratelimit/plans.ts';
import { operationsOf } from '../../context.ts';
import type { ContactsServices } from './contacts.service.ts';
import { BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { idInput, pageInput } from '../../platform/inputs.ts';
import {
  consentHistoryInput, createContactInput, idPageInput, importInput, listContactsInput, listInput, listOptOutsInput, membersInput, preferencesInput, previewInput,
  previewSegmentInput, removeMemberInput, removeTagInput, segmentInput, tagsInput, updateContactInput, updateListInput, updateSegmentInput,
} from './contacts.schemas.ts';
import { z } from 'zod';

const op = operationsOf<ContactsServices>('contacts');

export const createContactOp = op({
  name: 'contacts.create', endpoint: 'POST /v1/contacts', limits: LIMITS.write, roles: BUILDERS, input: createContactInput,
  run: (ctx, input, s) => s.contacts.create(ctx.scope, input),
});
export const listContactsOp = op({
  name: 'contacts.list', endpoint: 'GET /v1/contacts', limits: LIMITS.read, roles: READERS, input: listContactsInput,
  run: (ctx, input, s) => s.contacts.list(ctx.scope, input),
});
export const getContactOp = op({
  name: 'contacts.get', endpoint: 'GET /v1/contacts/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.contacts.get(ctx.scope, input.id),
});
export const updateContactOp = op({
  name: 'contacts.update', endpoint: 'PUT /v1/contacts/{id}', roles: BUILDERS, input: z.intersection(idInput, updateContactInput),
  run: (ctx, { id, ...patch }, s) => s.contacts.update(ctx.scope, id, patch),
});
export const deleteContactOp = op({
  name: 'contacts.delete', endpoint: 'DELETE /v1/contacts/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.contacts.remove(ctx.scope, input.id),
});
export const addTagsOp = op({
  name: 'contacts.addTags', endpoint: 'POST /v1/contacts/{id}/tags', roles: BUILDERS, input: tagsInput,
  run: (ctx, input, s) => s.contacts.addTags(ctx.scope, input.id, input.tags),
});
export const removeTagOp = op({
  name: 'contacts.removeTag', endpoint: 'DELETE /v1/contacts/{id}/tags/{tag}', roles: BUILDERS, input: removeTagInput,
  run: (ctx, input, s) => s.contacts.removeTag(ctx.scope, input.id, input.tag),
});
export const contactActivityOp = op({
  name: 'contacts.activity', endpoint: 'GET /v1/contacts/{id}/activity', roles: READERS, input: idPageInput,
  run: (ctx, input, s) => s.contacts.activity(ctx.scope, input.id, input),
});
export const setPreferencesOp = op({
  name: 'contacts.setPreferences', endpoint: 'PUT /v1/contacts/{id}/preferences', roles: BUILDERS, input: preferencesInput,
  run: (ctx, input, s) => s.contacts.setPreferences(ctx.scope, input.id, input.preferences, input.source ?? 'api'),
});
export const consentHistoryOp = op({
  name: 'contacts.consentHistory', endpoint: 'GET /v1/contacts/{id}/preferences/history', roles: READERS, input: consentHistoryInput,
  run: (ctx, input, s) => s.contacts.consent.history(ctx.scope, input.id, input),
});
export const listOptOutsOp = op({
  name: 'contacts.listOptOuts', endpoint: 'GET /v1/contacts/optouts', roles: READERS, input: listOptOutsInput,
  run: (ctx, input, s) => s.contacts.listOptOuts(ctx.scope, input),
});

export const listListsOp = op({
  name: 'contacts.listLists', endpoint: 'GET /v1/contacts/lists', roles: READERS, input: pageInput,
  run: (ctx, input, s) => s.contactLists.listLists(ctx.scope, input),
});
export const createListOp = op({
  name: 'contacts.createList', endpoint: 'POST /v1/contacts/lists', roles: BUILDERS, input: listInput,
  run: (ctx, input, s) => s.contactLists.createList(ctx.scope, input),
});
export const getListOp = op({
  name: 'contacts.getList', endpoint: 'GET /v1/contacts/lists/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.contactLists.getList(ctx.scope, input.id),
});
export const updateListOp = op({
  name: 'contacts.updateList', endpoint: 'PUT /v1/contacts/lists/{id}', roles: BUILDERS, input: updateListInput,
  run: (ctx, { id, ...patch }, s) => s.contactLists.updateList(ctx.scope, id, patch),
});
export const deleteListOp = op({
  name: 'contacts.deleteList', endpoint: 'DELETE /v1/contacts/lists/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.contactLists.deleteList(ctx.scope, input.id),
});
export const listMembersOp = op({
  name: 'contacts.listMembers', endpoint: 'GET /v1/contacts/lists/{id}/members', roles: READERS, input: idPageInput,
  run: (ctx, input, s) => s.contactLists.listMembers(ctx.scope, input),
});
export const addMembersOp = op({
  name: 'contacts.addMembers', endpoint: 'POST /v1/contacts/lists/{id}/members', roles: BUILDERS, input: membersInput,
  run: (ctx, input, s) => s.contactLists.addMembers(ctx.scope, input.id, input.contact_ids),
});
export const removeMemberOp = op({
  name: 'contacts.removeMember', endpoint: 'DELETE /v1/contacts/lists/{id}/members/{contact_id}', roles: BUILDERS, input: removeMemberInput,
  run: (ctx, input, s) => s.contactLists.removeMember(ctx.scope, input.id, input.contact_id),
});

export const listSegmentsOp = op({
  name: 'contacts.listSegments', endpoint: 'GET /v1/contacts/segments', roles: READERS, input: pageInput,
  run: (ctx, input, s) => s.contactSegments.listSegments(ctx.scope, input),
});
export const createSegmentOp = op({
  name: 'contacts.createSegment', endpoint: 'POST /v1/contacts/segments', roles: BUILDERS, input: segmentInput,
  run: (ctx, input, s) => s.contactSegments.createSegment(ctx.scope, input),
});
export const getSegmentOp = op({
  name: 'contacts.getSegment', endpoint: 'GET /v1/contacts/segments/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.contactSegments.getSegment(ctx.scope, input.id),
});
export const updateSegmentOp = op({
  name: 'contacts.updateSegment', endpoint: 'PUT /v1/contacts/segments/{id}', roles: BUILDERS, input: updateSegmentInput,
  run: (ctx, { id, ...patch }, s) => s.contactSegments.updateSegment(ctx.scope, id, patch),
});
export const deleteSegmentOp = op({
  name: 'contacts.deleteSegment', endpoint: 'DELETE /v1/contacts/segments/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.contactSegments.deleteSegment(ctx.scope, input.id),
});
export const previewSegmentOp = op({
  name: 'contacts.previewSegment', endpoint: 'GET /v1/contacts/segments/{id}/preview', roles: READERS, input: previewSegmentInput,
  run: (ctx, input, s) => s.contactSegments.previewSegment(ctx.scope, input.id, input.limit),
});
/** A read that takes a body (the rules): READERS, counted against the generic write bucket. */
export const previewRulesOp = op({
  name: 'contacts.previewRules', endpoint: 'POST /v1/contacts/segments/preview', roles: READERS, input: previewInput,
  run: (ctx, input, s) => s.contactSegments.previewRules(ctx.scope, input.rules, input.limit),
});

export const startImportOp = op({
  name: 'contacts.startImport', endpoint: 'POST /v1/contacts/imports', roles: BUILDERS, input: importInput,
  run: (ctx, input, s) => s.contactImports.startImport(ctx.scope, input),
});
export const getImportOp = op({
  name: 'contacts.getImport', endpoint: 'GET /v1/contacts/imports/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.contactImports.getImport(ctx.scope, input.id),
});
