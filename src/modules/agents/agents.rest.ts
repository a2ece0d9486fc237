/** The /v1/agents and /v1/marketplace/agents routes. */
import { badRequest } from '../../platform/errors.ts';
import { PAGE_QUERY, pageQuery, route, type RestRequest, type UploadedFile } from '../../rest/route.ts';
import {
  addToolOp, chatOp, createAgentOp, deleteAgentOp, deployAgentOp, getAgentOp, installTemplateOp, listAgentsOp, listConversationMessagesOp,
  listConversationsOp, marketplaceCatalogOp, patchAgentOp, pauseAgentOp, replaceAgentOp, resumeAgentOp, submitListingOp, testAgentOp,
  updateGuardrailsOp, uploadKnowledgeOp,
} from './agents.operations.ts';
import {
  presentAgent, presentCatalogEntry, presentChatOrStream, presentConversation, presentCreatedAgent, presentDeployment, presentKnowledge,
  presentListing, presentMessage, presentTestRun,
} from './agents.presenters.ts';
import type { CatalogEntry } from './marketplace.service.ts';

const body = (r: RestRequest) => r.body;
const withId = (r: RestRequest) => ({ ...r.body, id: r.params.id });

/** The knowledge upload: multipart (`file`, `type`) or JSON (`filename`, `type`, `content` text or `content_base64`). */
export function knowledgeInput(r: RestRequest): Record<string, unknown> {
  const b = r.body;
  const file = b.file as UploadedFile | string | undefined;
  if (file && typeof file === 'object') {
    const ext = file.filename.split('.').pop()?.toLowerCase();
    return { id: r.params.id, type: b.type ?? ext, filename: file.filename || 'upload', content: file.bytes };
  }
  if (typeof file === 'string') throw badRequest('file must be a file part of a multipart/form-data body', { field: 'file' });
  const content = typeof b.content_base64 === 'string' ? new Uint8Array(Buffer.from(b.content_base64, 'base64'))
    : typeof b.content === 'string' ? new TextEncoder().encode(b.content) : undefined;
  return { id: r.params.id, type: b.type, filename: b.filename ?? `upload.${String(b.type ?? 'txt')}`, content };
}

export const agentRoutes = [
  route({ method: 'POST', path: '/v1/agents', operation: createAgentOp, status: 201, input: body, output: presentCreatedAgent }),
  route({
    method: 'GET', path: '/v1/agents', operation: listAgentsOp, query: [...PAGE_QUERY, 'status'],
    input: (r) => ({ ...pageQuery(r.query), status: r.query.status }), paginated: true, output: presentAgent,
  }),
  route({ method: 'GET', path: '/v1/agents/{id}', operation: getAgentOp, input: (r) => r.params, output: presentAgent, resource: 'agt' }),
  route({ method: 'PUT', path: '/v1/agents/{id}', operation: replaceAgentOp, input: withId, output: presentAgent, resource: 'agt' }),
  route({ method: 'PATCH', path: '/v1/agents/{id}', operation: patchAgentOp, input: withId, output: presentAgent, resource: 'agt' }),
  route({ method: 'DELETE', path: '/v1/agents/{id}', operation: deleteAgentOp, input: (r) => r.params, status: 204, resource: 'agt' }),
  route({ method: 'POST', path: '/v1/agents/{id}/deploy', operation: deployAgentOp, input: withId, output: presentDeployment, resource: 'agt' }),
  route({ method: 'POST', path: '/v1/agents/{id}/pause', operation: pauseAgentOp, input: (r) => r.params, output: presentAgent, resource: 'agt' }),
  route({ method: 'POST', path: '/v1/agents/{id}/resume', operation: resumeAgentOp, input: (r) => r.params, output: presentAgent, resource: 'agt' }),
  route({ method: 'POST', path: '/v1/agents/{id}/chat', operation: chatOp, input: withId, output: presentChatOrStream, resource: 'agt' }),
  route({ method: 'POST', path: '/v1/agents/{id}/tools', operation: addToolOp, status: 201, input: (r) => ({ id: r.params.id, tool: r.body }), output: presentAgent, resource: 'agt' }),
  route({ method: 'POST', path: '/v1/agents/{id}/knowledge', operation: uploadKnowledgeOp, status: 201, multipart: true, input: knowledgeInput, output: presentKnowledge, resource: 'agt' }),
  route({ method: 'PATCH', path: '/v1/agents/{id}/guardrails', operation: updateGuardrailsOp, input: withId, output: presentAgent, resource: 'agt' }),
  route({ method: 'POST', path: '/v1/agents/{id}/test', operation: testAgentOp, input: withId, output: presentTestRun, resource: 'agt' }),
  route({
    method: 'GET', path: '/v1/agents/{id}/conversations', operation: listConversationsOp, query: [...PAGE_QUERY, 'status'],
    input: (r) => ({ ...pageQuery(r.query), id: r.params.id, status: r.query.status }), paginated: true, output: presentConversation, resource: 'agt',
  }),
  route({
    method: 'GET', path: '/v1/agents/{id}/conversations/{conversationId}/messages', operation: listConversationMessagesOp, query: PAGE_QUERY,
    input: (r) => ({ ...pageQuery(r.query), id: r.params.id, conversation_id: r.params.conversationId }), paginated: true, output: presentMessage, resource: 'agt',
  }),
  route({ method: 'GET', path: '/v1/marketplace/agents', operation: marketplaceCatalogOp, output: (list: CatalogEntry[]) => list.map(presentCatalogEntry) }),
  route({
    method: 'POST', path: '/v1/marketplace/agents/{templateId}/install', operation: installTemplateOp, status: 201,
    input: (r) => ({ ...r.body, template_id: r.params.templateId }), output: presentCreatedAgent, resource: 'mkt',
  }),
  route({ method: 'POST', path: '/v1/marketplace/agents', operation: submitListingOp, status: 201, input: body, output: presentListing }),
];
