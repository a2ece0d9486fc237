/** The /v1/contacts routes. Static paths (optouts, lists, segments, imports) win over `{id}` in the router. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import {
  addMembersOp, addTagsOp, consentHistoryOp, contactActivityOp, createContactOp, createListOp, createSegmentOp, deleteContactOp, deleteListOp, deleteSegmentOp,
  getContactOp, getImportOp, getListOp, getSegmentOp, listContactsOp, listListsOp, listMembersOp, listOptOutsOp, listSegmentsOp, previewRulesOp,
  previewSegmentOp, removeMemberOp, removeTagOp, setPreferencesOp, startImportOp, updateContactOp, updateListOp, updateSegmentOp,
} from './contacts.operations.ts';
import { preferencesBody } from './contacts.schemas.ts';
import { presentActivity, presentConsentChange, presentContact, presentImport, presentList, presentPreview, presentSegment } from './contacts.presenters.ts';

const body = (r: { body: Record<string, unknown> }) => r.body;
const withId = (r: { body: Record<string, unknown>; params: Record<string, string> }) => ({ ...r.body, id: r.params.id });

export const contactRoutes = [
  route({ method: 'POST', path: '/v1/contacts', operation: createContactOp, status: 201, input: body, output: presentContact }),
  route({
    method: 'GET', path: '/v1/contacts', operation: listContactsOp, query: [...PAGE_QUERY, 'search', 'lifecycle_stage', 'country', 'tag'],
    input: (r) => ({ ...pageQuery(r.query), search: r.query.search, lifecycle_stage: r.query.lifecycle_stage, country: r.query.country, tag: r.query.tag }),
    paginated: true, output: presentContact,
  }),
  route({
    method: 'GET', path: '/v1/contacts/optouts', operation: listOptOutsOp, query: [...PAGE_QUERY, 'channel', 'search'],
    input: (r) => ({ ...pageQuery(r.query), channel: r.query.channel, search: r.query.search }), paginated: true, output: presentContact,
  }),

  route({ method: 'GET', path: '/v1/contacts/lists', operation: listListsOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: presentList }),
  route({ method: 'POST', path: '/v1/contacts/lists', operation: createListOp, status: 201, input: body, output: presentList }),
  route({ method: 'GET', path: '/v1/contacts/lists/{id}', operation: getListOp, input: (r) => r.params, output: presentList, resource: 'lst' }),
  route({ method: 'PUT', path: '/v1/contacts/lists/{id}', operation: updateListOp, input: withId, output: presentList, resource: 'lst' }),
  route({ method: 'DELETE', path: '/v1/contacts/lists/{id}', operation: deleteListOp, status: 204, input: (r) => r.params, resource: 'lst' }),
  route({
    method: 'GET', path: '/v1/contacts/lists/{id}/members', operation: listMembersOp, query: PAGE_QUERY,
    input: (r) => ({ ...pageQuery(r.query), id: r.params.id }), paginated: true, output: presentContact, resource: 'lst',
  }),
  route({
    method: 'POST', path: '/v1/contacts/lists/{id}/members', operation: addMembersOp, input: withId, resource: 'lst',
    output: (r: { list: Parameters<typeof presentList>[0]; added: number }) => ({ ...presentList(r.list), added: r.added }),
  }),
  route({ method: 'DELETE', path: '/v1/contacts/lists/{id}/members/{contact_id}', operation: removeMemberOp, status: 204, input: (r) => r.params, resource: 'lst' }),

  route({ method: 'GET', path: '/v1/contacts/segments', operation: listSegmentsOp, query: PAGE_QUERY, input: (r) => pageQuery(r.query), paginated: true, output: presentSegment }),
  route({ method: 'POST', path: '/v1/contacts/segments', operation: createSegmentOp, status: 201, input: body, output: presentSegment }),
  route({ method: 'POST', path: '/v1/contacts/segments/preview', operation: previewRulesOp, input: body, output: presentPreview }),
  route({ method: 'GET', path: '/v1/contacts/segments/{id}', operation: getSegmentOp, input: (r) => r.params, output: presentSegment, resource: 'seg' }),
  route({ method: 'PUT', path: '/v1/contacts/segments/{id}', operation: updateSegmentOp, input: withId, output: presentSegment, resource: 'seg' }),
  route({ method: 'DELETE', path: '/v1/contacts/segments/{id}', operation: deleteSegmentOp, status: 204, input: (r) => r.params, resource: 'seg' }),
  route({
    method: 'GET', path: '/v1/contacts/segments/{id}/preview', operation: previewSegmentOp, query: ['limit'],
    input: (r) => ({ id: r.params.id, limit: pageQuery(r.query).limit }), output: presentPreview, resource: 'seg',
  }),

  route({ method: 'POST', path: '/v1/contacts/imports', operation: startImportOp, status: 202, input: body, output: presentImport }),
  route({ method: 'GET', path: '/v1/contacts/imports/{id}', operation: getImportOp, input: (r) => r.params, output: presentImport, resource: 'imp' }),

  route({ method: 'GET', path: '/v1/contacts/{id}', operation: getContactOp, input: (r) => r.params, output: presentContact, resource: 'con' }),
  route({ method: 'PUT', path: '/v1/contacts/{id}', operation: updateContactOp, input: withId, output: presentContact, resource: 'con' }),
  route({ method: 'DELETE', path: '/v1/contacts/{id}', operation: deleteContactOp, status: 204, input: (r) => r.params, resource: 'con' }),
  route({ method: 'POST', path: '/v1/contacts/{id}/tags', operation: addTagsOp, input: withId, output: presentContact, resource: 'con' }),
  route({ method: 'DELETE', path: '/v1/contacts/{id}/tags/{tag}', operation: removeTagOp, input: (r) => r.params, output: presentContact, resource: 'con' }),
  route({
    method: 'GET', path: '/v1/contacts/{id}/activity', operation: contactActivityOp, query: PAGE_QUERY,
    input: (r) => ({ ...pageQuery(r.query), id: r.params.id }), paginated: true, output: presentActivity, resource: 'con',
  }),
  route({
    method: 'GET', path: '/v1/contacts/{id}/preferences/history', operation: consentHistoryOp, query: [...PAGE_QUERY, 'channel'],
    input: (r) => ({ ...pageQuery(r.query), id: r.params.id, channel: r.query.channel }), paginated: true, output: presentConsentChange, resource: 'con',
  }),
  route({
    method: 'PUT', path: '/v1/contacts/{id}/preferences', operation: setPreferencesOp, resource: 'con', output: presentContact,
    // The body is the channel map itself (`{ "sms": "opted_out" }`), plus an optional `source`.
    body: preferencesBody,
    input: (r) => {
      const { source, ...preferences } = r.body;
      return { id: r.params.id, preferences, ...(source !== undefined ? { source } : {}) };
    },
  }),
];
