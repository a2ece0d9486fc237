/** The messaging use cases as operations: roles, rate-limit endpoint and input schema, declared once. */
import { LIMITS } from '../../platform/ratelimit/plans.ts';
import { z } from 'zod';
import { operationsOf, type RequestContext } from '../../context.ts';
import type { MessagingService } from './messaging.service.ts';
import type { TemplatesService } from './templates.service.ts';
import type { SenderDirectory } from './messaging.senders.ts';
import type { MessageInbound } from './messaging.inbound.ts';
import type { CarriersService } from './carriers.service.ts';
import { ADMINS, BUILDERS, READERS } from '../../platform/auth/roles.ts';
import { CHANNELS } from '../../providers/messaging/types.ts';
import { idInput, pageInput } from '../../platform/inputs.ts';
import { TEMPLATE_STATUSES } from './messaging.entities.ts';
import { createTemplateInput, updateTemplateInput } from './schemas/templates.ts';
import { listMessagesInput } from './schemas/messages.ts';
import { sendEmailInput } from './schemas/email.ts';
import { sendRcsInput } from './schemas/rcs.ts';
import { sendSmsInput } from './schemas/sms.ts';
import { sendViberInput } from './schemas/viber.ts';
import { sendWhatsAppInput } from './schemas/whatsapp.ts';

/** The services this module's operations run on. */
export type MessagingServices = { messaging: MessagingService; templates: TemplatesService; messageSenders: SenderDirectory; messageInbound: MessageInbound; carriers: CarriersService };
const op = operationsOf<MessagingServices>('messaging');

/**
 * A send under the request's Idempotency-Key records it on the message (each send of the request
 * takes the next ordinal, whatever its outcome), so a request run again after its first attempt
 * committed returns that message instead of sending twice.
 */
const sendOptions = (ctx: RequestContext) => (ctx.idempotency ? { idempotency: ctx.idempotency.next() } : {});

export const sendSmsOp = op({
  name: 'messaging.sendSms', endpoint: 'POST /v1/messages/sms', limits: LIMITS.send, roles: BUILDERS, input: sendSmsInput,
  run: (ctx, input, s) => s.messaging.sendSms(ctx.scope, input, sendOptions(ctx)),
});
export const sendWhatsAppOp = op({
  name: 'messaging.sendWhatsApp', endpoint: 'POST /v1/messages/whatsapp', limits: LIMITS.send, roles: BUILDERS, input: sendWhatsAppInput,
  run: (ctx, input, s) => s.messaging.sendWhatsApp(ctx.scope, input, sendOptions(ctx)),
});
export const sendEmailOp = op({
  name: 'messaging.sendEmail', endpoint: 'POST /v1/messages/email', limits: LIMITS.email, roles: BUILDERS, input: sendEmailInput,
  run: (ctx, input, s) => s.messaging.sendEmail(ctx.scope, input, sendOptions(ctx)),
});
export const sendRcsOp = op({
  name: 'messaging.sendRcs', endpoint: 'POST /v1/messages/rcs', limits: LIMITS.send, roles: BUILDERS, input: sendRcsInput,
  run: (ctx, input, s) => s.messaging.sendRcs(ctx.scope, input, sendOptions(ctx)),
});
export const sendViberOp = op({
  name: 'messaging.sendViber', endpoint: 'POST /v1/messages/viber', limits: LIMITS.send, roles: BUILDERS, input: sendViberInput,
  run: (ctx, input, s) => s.messaging.sendViber(ctx.scope, input, sendOptions(ctx)),
});
export const listMessagesOp = op({
  name: 'messaging.listMessages', endpoint: 'GET /v1/messages', limits: LIMITS.read, roles: READERS, input: listMessagesInput,
  run: (ctx, input, s) => s.messaging.listMessages(ctx.scope, input),
});
export const getMessageOp = op({
  name: 'messaging.getMessage', endpoint: 'GET /v1/messages/{id}', limits: LIMITS.read, roles: READERS, input: idInput,
  run: (ctx, input, s) => s.messaging.getMessage(ctx.scope, input.id),
});
export const retryMessageOp = op({
  name: 'messaging.retryMessage', endpoint: 'POST /v1/messages/{id}/retry', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.messaging.retryMessage(ctx.scope, input.id, sendOptions(ctx)),
});

const templateFilters = pageInput.extend({ channel: z.enum(CHANNELS).nullish(), status: z.enum(TEMPLATE_STATUSES).nullish() });

export const listTemplatesOp = op({
  name: 'messaging.listTemplates', endpoint: 'GET /v1/messages/templates', roles: READERS, input: templateFilters,
  run: (ctx, input, s) => s.templates.list(ctx.scope, input),
});
export const listWhatsAppTemplatesOp = op({
  name: 'messaging.listWhatsAppTemplates', endpoint: 'GET /v1/whatsapp/templates', roles: READERS, input: templateFilters.omit({ channel: true }),
  run: (ctx, input, s) => s.templates.list(ctx.scope, { ...input, channel: 'whatsapp' }),
});
export const createTemplateOp = op({
  name: 'messaging.createTemplate', endpoint: 'POST /v1/messages/templates', roles: BUILDERS, input: createTemplateInput,
  run: (ctx, input, s) => s.templates.create(ctx.scope, input),
});
export const getTemplateOp = op({
  name: 'messaging.getTemplate', endpoint: 'GET /v1/messages/templates/{id}', roles: READERS, input: idInput,
  run: (ctx, input, s) => s.templates.get(ctx.scope, input.id),
});
export const updateTemplateOp = op({
  name: 'messaging.updateTemplate', endpoint: 'PATCH /v1/messages/templates/{id}', roles: BUILDERS,
  input: z.intersection(z.object({ id: z.string().min(1) }), updateTemplateInput),
  run: (ctx, { id, ...patch }, s) => s.templates.update(ctx.scope, id, patch),
});
export const deleteTemplateOp = op({
  name: 'messaging.deleteTemplate', endpoint: 'DELETE /v1/messages/templates/{id}', roles: BUILDERS, input: idInput,
  run: (ctx, input, s) => s.templates.remove(ctx.scope, input.id),
});

export const listSendersOp = op({
  name: 'messaging.listSenders', endpoint: 'GET /v1/messages/senders', roles: READERS, input: z.object({ channel: z.enum(CHANNELS).nullish() }),
  run: (ctx, input, s) => s.messageSenders.list(ctx.scope, input.channel),
});
export const addSenderOp = op({
  name: 'messaging.addSender', endpoint: 'POST /v1/messages/senders', roles: ADMINS,
  input: z.object({ channel: z.enum(CHANNELS), address: z.string().trim().min(1).max(320), is_default: z.boolean().nullish() }),
  run: (ctx, input, s) => s.messageSenders.add(ctx.scope, input),
});
export const removeSenderOp = op({
  name: 'messaging.removeSender', endpoint: 'DELETE /v1/messages/senders/{id}', roles: ADMINS, input: idInput,
  run: (ctx, input, s) => s.messageSenders.remove(ctx.scope, input.id),
});

export const simulateInboundOp = op({
  name: 'messaging.simulateInbound', endpoint: 'POST /v1/sandbox/inbound', roles: BUILDERS,
  input: z.object({ channel: z.enum(CHANNELS), from: z.string().trim().min(1), to: z.string().trim().min(1).nullish(), body: z.string().min(1).max(4096) }),
  run: (ctx, input, s) => s.messageInbound.simulateInbound(ctx.scope, input),
});
