/** The /v1/messages, /v1/whatsapp and /v1/sandbox routes. */
import { PAGE_QUERY, pageQuery, route } from '../../rest/route.ts';
import {
  addSenderOp, createTemplateOp, deleteTemplateOp, getMessageOp, getTemplateOp, listMessagesOp, listSendersOp, listTemplatesOp,
  listWhatsAppTemplatesOp, removeSenderOp, retryMessageOp, sendEmailOp, sendRcsOp, sendSmsOp, sendViberOp, sendWhatsAppOp,
  simulateInboundOp, updateTemplateOp,
} from './messaging.operations.ts';
import { presentMessage, presentMessageSummary, presentSender, presentTemplate } from './messaging.presenters.ts';

const body = (r: { body: Record<string, unknown> }) => r.body;

export const messagingRoutes = [
  route({ method: 'POST', path: '/v1/messages/sms', operation: sendSmsOp, status: 201, input: body, output: presentMessage }),
  route({ method: 'POST', path: '/v1/messages/whatsapp', operation: sendWhatsAppOp, status: 201, input: body, output: presentMessage }),
  route({ method: 'POST', path: '/v1/messages/email', operation: sendEmailOp, status: 201, input: body, output: presentMessage }),
  route({ method: 'POST', path: '/v1/messages/rcs', operation: sendRcsOp, status: 201, input: body, output: presentMessage }),
  route({ method: 'POST', path: '/v1/messages/viber', operation: sendViberOp, status: 201, input: body, output: presentMessage }),
  route({
    method: 'GET', path: '/v1/messages', operation: listMessagesOp, query: [...PAGE_QUERY, 'channel', 'status', 'to', 'direction'],
    input: (r) => ({ ...pageQuery(r.query), channel: r.query.channel, status: r.query.status, to: r.query.to, direction: r.query.direction }),
    paginated: true, output: presentMessageSummary,
  }),
  route({ method: 'GET', path: '/v1/messages/{id}', operation: getMessageOp, input: (r) => r.params, output: presentMessage, resource: 'msg' }),
  route({ method: 'POST', path: '/v1/messages/{id}/retry', operation: retryMessageOp, status: 201, input: (r) => r.params, output: presentMessage, resource: 'msg' }),

  route({
    method: 'GET', path: '/v1/messages/templates', operation: listTemplatesOp, query: [...PAGE_QUERY, 'channel', 'status'],
    input: (r) => ({ ...pageQuery(r.query), channel: r.query.channel, status: r.query.status }), paginated: true, output: presentTemplate,
  }),
  route({ method: 'POST', path: '/v1/messages/templates', operation: createTemplateOp, status: 201, input: body, output: presentTemplate }),
  route({ method: 'GET', path: '/v1/messages/templates/{id}', operation: getTemplateOp, input: (r) => r.params, output: presentTemplate, resource: 'tpl' }),
  route({ method: 'PATCH', path: '/v1/messages/templates/{id}', operation: updateTemplateOp, input: (r) => ({ ...r.body, id: r.params.id }), output: presentTemplate, resource: 'tpl' }),
  route({ method: 'DELETE', path: '/v1/messages/templates/{id}', operation: deleteTemplateOp, status: 204, input: (r) => r.params, resource: 'tpl' }),
  route({
    method: 'GET', path: '/v1/whatsapp/templates', operation: listWhatsAppTemplatesOp, query: [...PAGE_QUERY, 'status'],
    input: (r) => ({ ...pageQuery(r.query), status: r.query.status }), paginated: true, output: presentTemplate,
  }),

  route({ method: 'GET', path: '/v1/messages/senders', operation: listSendersOp, query: ['channel'], input: (r) => ({ channel: r.query.channel }), output: (rows: Parameters<typeof presentSender>[0][]) => rows.map(presentSender) }),
  route({ method: 'POST', path: '/v1/messages/senders', operation: addSenderOp, status: 201, input: body, output: presentSender }),
  route({ method: 'DELETE', path: '/v1/messages/senders/{id}', operation: removeSenderOp, status: 204, input: (r) => r.params, resource: 'snd' }),

  route({ method: 'POST', path: '/v1/sandbox/inbound', operation: simulateInboundOp, status: 201, input: body, output: presentMessage }),
];
