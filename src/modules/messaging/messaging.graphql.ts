/** GraphQL twins of the messaging routes. Inputs are converted to the REST wire shape (toWire) and run through the same operations. */
import { builder } from '../../graphql/builder.ts';
import { liveStream, resourceNotices } from '../../graphql/live.ts';
import { pageRequest, toConnection } from '../../graphql/connections.ts';
import { guard, run } from '../../graphql/operationField.ts';
import { toWire } from '../../graphql/wire.ts';
import { READERS } from '../../platform/auth/roles.ts';
import { notFound } from '../../platform/errors.ts';
import { CHANNELS } from '../../providers/messaging/types.ts';
import { connectorOf } from './messaging.presenters.ts';
import { MESSAGE_DIRECTIONS, MESSAGE_STATUSES, TEMPLATE_STATUSES, type Message, type MessageSender, type MessageTemplate, type StatusChange } from './messaging.entities.ts';
import type { PricedMessage } from './messaging.billing.ts';
import {
  addSenderOp, createTemplateOp, deleteTemplateOp, getMessageOp, getTemplateOp, listMessagesOp, listSendersOp, listTemplatesOp,
  listWhatsAppTemplatesOp, removeSenderOp, retryMessageOp, sendEmailOp, sendRcsOp, sendSmsOp, sendViberOp, sendWhatsAppOp,
  simulateInboundOp, updateTemplateOp,
} from './messaging.operations.ts';

const ChannelEnum = builder.enumType('Channel', { values: CHANNELS });
const MessageStatusEnum = builder.enumType('MessageStatus', { values: MESSAGE_STATUSES });
const TemplateStatusEnum = builder.enumType('TemplateStatus', { values: TEMPLATE_STATUSES });
const DirectionEnum = builder.enumType('MessageDirection', { values: MESSAGE_DIRECTIONS });

const StatusChangeRef = builder.objectRef<StatusChange>('MessageStatusChange').implement({
  fields: (t) => ({
    status: t.field({ type: MessageStatusEnum, resolve: (c) => c.status }),
    at: t.field({ type: 'DateTime', resolve: (c) => new Date(c.at) }),
    errorCode: t.string({ nullable: true, resolve: (c) => c.error_code ?? null }),
  }),
});

export const MessageRef = builder.node(builder.objectRef<Message>('Message'), {
  id: { resolve: (m) => m.id },
  loadOne: (id, ctx) => run(getMessageOp, ctx, { id }),
  fields: (t) => ({
    channel: t.field({ type: ChannelEnum, resolve: (m) => m.channel }),
    direction: t.field({ type: DirectionEnum, resolve: (m) => m.direction }),
    to: t.exposeString('to'),
    recipients: t.exposeStringList('recipients'),
    from: t.exposeString('from'),
    body: t.exposeString('body', { nullable: true }),
    content: t.expose('content', { type: 'JSON', description: 'Channel payload: WhatsApp template/media, email subject/html, RCS card/suggestions, Viber media' }),
    status: t.field({ type: MessageStatusEnum, resolve: (m) => m.status }),
    statusHistory: t.field({ type: [StatusChangeRef], resolve: (m) => m.statusHistory }),
    encoding: t.exposeString('encoding', { nullable: true }),
    segments: t.exposeInt('segments', { nullable: true }),
    errorCode: t.exposeString('errorCode', { nullable: true }),
    connectorId: t.string({ nullable: true, description: 'The carrier connector that carried (or received) the message', resolve: (m) => connectorOf(m) }),
    errorMessage: t.exposeString('errorMessage', { nullable: true }),
    price: t.int({
      nullable: true, description: 'What the ledger charged for the message, in the smallest currency unit (cents); null until charged (on delivery) and for messages never charged (test mode, included messages, failed sends)',
      resolve: (m) => (m as PricedMessage).charge?.amount ?? null,
    }),
    priceUnit: t.string({ nullable: true, description: 'Currency code of price (usd); null with it', resolve: (m) => (m as PricedMessage).charge?.currency ?? null }),
    templateId: t.exposeString('templateId', { nullable: true }),
    fallback: t.expose('fallback', { type: 'JSON', nullable: true }),
    originalMessageId: t.exposeString('originalMessageId', { nullable: true }),
    metadata: t.expose('metadata', { type: 'JSON' }),
    webhookUrl: t.exposeString('webhookUrl', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    sentAt: t.expose('sentAt', { type: 'DateTime', nullable: true }),
    deliveredAt: t.expose('deliveredAt', { type: 'DateTime', nullable: true }),
    readAt: t.expose('readAt', { type: 'DateTime', nullable: true }),
    failedAt: t.expose('failedAt', { type: 'DateTime', nullable: true }),
  }),
});

const TemplateVariableRef = builder.objectRef<{ name: string; example?: string; required?: boolean }>('TemplateVariable').implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    example: t.string({ nullable: true, resolve: (v) => v.example ?? null }),
    required: t.boolean({ nullable: true, resolve: (v) => v.required ?? null }),
  }),
});

const MessageTemplateRef = builder.node(builder.objectRef<MessageTemplate>('MessageTemplate'), {
  id: { resolve: (t) => t.id },
  loadOne: (id, ctx) => run(getTemplateOp, ctx, { id }),
  fields: (t) => ({
    channel: t.field({ type: ChannelEnum, resolve: (x) => x.channel }),
    name: t.exposeString('name'),
    content: t.exposeString('content'),
    category: t.exposeString('category', { nullable: true }),
    language: t.exposeString('language'),
    variables: t.field({ type: [TemplateVariableRef], resolve: (x) => x.variables }),
    status: t.field({ type: TemplateStatusEnum, resolve: (x) => x.status }),
    rejectionReason: t.exposeString('rejectionReason', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const MessageSenderRef = builder.node(builder.objectRef<MessageSender>('MessageSender'), {
  id: { resolve: (s) => s.id },
  loadOne: async (id, ctx) => {
    const senders = await run(listSendersOp, ctx, {});
    const found = senders.find((s) => s.id === id);
    if (!found) throw notFound('Sender', id);
    return found;
  },
  fields: (t) => ({
    channel: t.field({ type: ChannelEnum, resolve: (s) => s.channel }),
    address: t.exposeString('address'),
    isDefault: t.exposeBoolean('isDefault'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

// ---- inputs (camelCase; converted to the REST shape) ----

const SendSmsInput = builder.inputType('SendSmsInput', {
  fields: (t) => ({
    to: t.string({ required: true }),
    body: t.string({ required: false }),
    mediaUrls: t.stringList({ required: false, description: 'MMS: https URLs of the media (live: carrier API connectors only)' }),
    templateId: t.string({ required: false }),
    variables: t.field({ type: 'JSON', required: false }),
    from: t.string({ required: false }),
    webhookUrl: t.string({ required: false }),
    metadata: t.field({ type: 'JSON', required: false }),
  }),
});

const TextInput = builder.inputType('WhatsAppTextInput', { fields: (t) => ({ body: t.string({ required: true }) }) });
const TemplateParameterInput = builder.inputType('WhatsAppTemplateParameterInput', {
  fields: (t) => ({ type: t.string({ required: true }), text: t.string({ required: false }) }),
});
const TemplateComponentInput = builder.inputType('WhatsAppTemplateComponentInput', {
  fields: (t) => ({ type: t.string({ required: true }), parameters: t.field({ type: [TemplateParameterInput], required: false }) }),
});
const WhatsAppTemplateInput = builder.inputType('WhatsAppTemplateInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    language: t.string({ required: true }),
    components: t.field({ type: [TemplateComponentInput], required: false }),
  }),
});
const MediaInput = builder.inputType('WhatsAppMediaInput', {
  fields: (t) => ({
    type: t.string({ required: false }),
    url: t.string({ required: true }),
    mimeType: t.string({ required: false }),
    sizeBytes: t.int({ required: false }),
    caption: t.string({ required: false }),
    filename: t.string({ required: false }),
  }),
});
const SendWhatsAppInput = builder.inputType('SendWhatsAppInput', {
  fields: (t) => ({
    to: t.string({ required: true }),
    type: t.string({ required: false, description: 'text, template, image, video, document or audio' }),
    body: t.string({ required: false }),
    text: t.field({ type: TextInput, required: false }),
    template: t.field({ type: WhatsAppTemplateInput, required: false }),
    media: t.field({ type: MediaInput, required: false }),
    from: t.string({ required: false }),
    webhookUrl: t.string({ required: false }),
    metadata: t.field({ type: 'JSON', required: false }),
  }),
});

const SendEmailInput = builder.inputType('SendEmailInput', {
  fields: (t) => ({
    to: t.stringList({ required: true }),
    subject: t.string({ required: true }),
    html: t.string({ required: false }),
    text: t.string({ required: false }),
    from: t.string({ required: false }),
    replyTo: t.string({ required: false }),
    webhookUrl: t.string({ required: false }),
    metadata: t.field({ type: 'JSON', required: false }),
  }),
});

const SuggestionInput = builder.inputType('RcsSuggestionInput', {
  fields: (t) => ({ type: t.string({ required: true }), text: t.string({ required: true }), url: t.string({ required: false }) }),
});
const CardInput = builder.inputType('RcsCardInput', {
  fields: (t) => ({
    title: t.string({ required: true }),
    description: t.string({ required: false }),
    mediaUrl: t.string({ required: false }),
    suggestions: t.field({ type: [SuggestionInput], required: false }),
  }),
});
const FallbackInput = builder.inputType('RcsFallbackInput', {
  fields: (t) => ({ channel: t.string({ required: true }), body: t.string({ required: false }) }),
});
const SendRcsInput = builder.inputType('SendRcsInput', {
  fields: (t) => ({
    to: t.string({ required: true }),
    type: t.string({ required: false, description: 'text (default), rich_card or carousel' }),
    body: t.string({ required: false }),
    templateId: t.string({ required: false }),
    variables: t.field({ type: 'JSON', required: false }),
    suggestions: t.field({ type: [SuggestionInput], required: false }),
    card: t.field({ type: CardInput, required: false }),
    cards: t.field({ type: [CardInput], required: false }),
    fallback: t.field({ type: FallbackInput, required: false }),
    from: t.string({ required: false }),
    webhookUrl: t.string({ required: false }),
    metadata: t.field({ type: 'JSON', required: false }),
  }),
});

const ButtonInput = builder.inputType('ViberButtonInput', { fields: (t) => ({ text: t.string({ required: true }), url: t.string({ required: true }) }) });
const SendViberInput = builder.inputType('SendViberInput', {
  fields: (t) => ({
    to: t.string({ required: true }),
    body: t.string({ required: false }),
    templateId: t.string({ required: false }),
    variables: t.field({ type: 'JSON', required: false }),
    mediaUrl: t.string({ required: false }),
    button: t.field({ type: ButtonInput, required: false }),
    from: t.string({ required: false }),
    webhookUrl: t.string({ required: false }),
    metadata: t.field({ type: 'JSON', required: false }),
  }),
});

const TemplateVariableInput = builder.inputType('TemplateVariableInput', {
  fields: (t) => ({ name: t.string({ required: true }), example: t.string({ required: false }), required: t.boolean({ required: false }) }),
});
const CreateTemplateInput = builder.inputType('CreateMessageTemplateInput', {
  fields: (t) => ({
    channel: t.field({ type: ChannelEnum, required: true }),
    name: t.string({ required: true }),
    content: t.string({ required: true }),
    category: t.string({ required: false }),
    language: t.string({ required: false }),
    variables: t.field({ type: [TemplateVariableInput], required: false }),
    status: t.field({ type: TemplateStatusEnum, required: false, description: 'draft or pending_approval (default)' }),
  }),
});
const UpdateTemplateInput = builder.inputType('UpdateMessageTemplateInput', {
  fields: (t) => ({
    name: t.string({ required: false }),
    content: t.string({ required: false }),
    category: t.string({ required: false }),
    language: t.string({ required: false }),
    variables: t.field({ type: [TemplateVariableInput], required: false }),
    status: t.field({ type: TemplateStatusEnum, required: false }),
  }),
});

// ---- fields ----

builder.queryFields((t) => ({
  messages: t.connection({
    type: MessageRef, ...guard('Query', 'messages', listMessagesOp),
    args: {
      channel: t.arg({ type: ChannelEnum, required: false }),
      status: t.arg({ type: MessageStatusEnum, required: false }),
      to: t.arg.string({ required: false, description: 'Exact recipient (E.164 or email)' }),
      direction: t.arg({ type: DirectionEnum, required: false }),
    },
    resolve: async (_r, args, ctx) => toConnection(await run(listMessagesOp, ctx, {
      ...pageRequest(args), channel: args.channel ?? undefined, status: args.status ?? undefined, to: args.to ?? undefined, direction: args.direction ?? undefined,
    })),
  }),
  message: t.field({
    type: MessageRef, ...guard('Query', 'message', getMessageOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getMessageOp, ctx, { id: String(args.id) }),
  }),
  messageTemplates: t.connection({
    type: MessageTemplateRef, ...guard('Query', 'messageTemplates', listTemplatesOp),
    args: { channel: t.arg({ type: ChannelEnum, required: false }), status: t.arg({ type: TemplateStatusEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listTemplatesOp, ctx, { ...pageRequest(args), channel: args.channel, status: args.status })),
  }),
  whatsappTemplates: t.connection({
    type: MessageTemplateRef, ...guard('Query', 'whatsappTemplates', listWhatsAppTemplatesOp),
    args: { status: t.arg({ type: TemplateStatusEnum, required: false }) },
    resolve: async (_r, args, ctx) => toConnection(await run(listWhatsAppTemplatesOp, ctx, { ...pageRequest(args), status: args.status })),
  }),
  messageTemplate: t.field({
    type: MessageTemplateRef, ...guard('Query', 'messageTemplate', getTemplateOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(getTemplateOp, ctx, { id: String(args.id) }),
  }),
  messageSenders: t.field({
    type: [MessageSenderRef], ...guard('Query', 'messageSenders', listSendersOp),
    args: { channel: t.arg({ type: ChannelEnum, required: false }) },
    resolve: (_r, args, ctx) => run(listSendersOp, ctx, { channel: args.channel }),
  }),
}));

builder.mutationFields((t) => ({
  sendSms: t.field({
    type: MessageRef, ...guard('Mutation', 'sendSms', sendSmsOp),
    args: { input: t.arg({ type: SendSmsInput, required: true }) },
    resolve: (_r, args, ctx) => run(sendSmsOp, ctx, toWire(args.input)),
  }),
  sendWhatsApp: t.field({
    type: MessageRef, ...guard('Mutation', 'sendWhatsApp', sendWhatsAppOp),
    args: { input: t.arg({ type: SendWhatsAppInput, required: true }) },
    resolve: (_r, args, ctx) => run(sendWhatsAppOp, ctx, toWire(args.input)),
  }),
  sendEmail: t.field({
    type: MessageRef, ...guard('Mutation', 'sendEmail', sendEmailOp),
    args: { input: t.arg({ type: SendEmailInput, required: true }) },
    resolve: (_r, args, ctx) => run(sendEmailOp, ctx, toWire(args.input)),
  }),
  sendRcs: t.field({
    type: MessageRef, ...guard('Mutation', 'sendRcs', sendRcsOp),
    args: { input: t.arg({ type: SendRcsInput, required: true }) },
    resolve: (_r, args, ctx) => run(sendRcsOp, ctx, toWire(args.input)),
  }),
  sendViber: t.field({
    type: MessageRef, ...guard('Mutation', 'sendViber', sendViberOp),
    args: { input: t.arg({ type: SendViberInput, required: true }) },
    resolve: (_r, args, ctx) => run(sendViberOp, ctx, toWire(args.input)),
  }),
  retryMessage: t.field({
    type: MessageRef, ...guard('Mutation', 'retryMessage', retryMessageOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, args, ctx) => run(retryMessageOp, ctx, { id: String(args.id) }),
  }),
  createMessageTemplate: t.field({
    type: MessageTemplateRef, ...guard('Mutation', 'createMessageTemplate', createTemplateOp),
    args: { input: t.arg({ type: CreateTemplateInput, required: true }) },
    resolve: (_r, args, ctx) => run(createTemplateOp, ctx, toWire(args.input)),
  }),
  updateMessageTemplate: t.field({
    type: MessageTemplateRef, ...guard('Mutation', 'updateMessageTemplate', updateTemplateOp),
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateTemplateInput, required: true }) },
    resolve: (_r, args, ctx) => run(updateTemplateOp, ctx, { ...(toWire(args.input) as object), id: String(args.id) }),
  }),
  deleteMessageTemplate: t.id({
    ...guard('Mutation', 'deleteMessageTemplate', deleteTemplateOp),
    description: 'Deletes the template; returns its id.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(deleteTemplateOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
  addMessageSender: t.field({
    type: MessageSenderRef, ...guard('Mutation', 'addMessageSender', addSenderOp),
    args: { channel: t.arg({ type: ChannelEnum, required: true }), address: t.arg.string({ required: true }), isDefault: t.arg.boolean({ required: false }) },
    resolve: (_r, args, ctx) => run(addSenderOp, ctx, { channel: args.channel, address: args.address, is_default: args.isDefault }),
  }),
  removeMessageSender: t.id({
    ...guard('Mutation', 'removeMessageSender', removeSenderOp),
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, args, ctx) => {
      await run(removeSenderOp, ctx, { id: String(args.id) });
      return String(args.id);
    },
  }),
  simulateInboundMessage: t.field({
    type: MessageRef, ...guard('Mutation', 'simulateInboundMessage', simulateInboundOp),
    description: 'Test mode only: a recipient writes to the organization (opens the WhatsApp session window).',
    args: { channel: t.arg({ type: ChannelEnum, required: true }), from: t.arg.string({ required: true }), to: t.arg.string({ required: false }), body: t.arg.string({ required: true }) },
    resolve: (_r, args, ctx) => run(simulateInboundOp, ctx, { channel: args.channel, from: args.from, to: args.to, body: args.body }),
  }),
}));

builder.subscriptionFields((t) => ({
  messageStatus: t.field({
    type: MessageRef, ...guard('Subscription', 'messageStatus', { endpoint: 'GET /v1/messages/{id}', roles: READERS }),
    description: 'The message now, then again after each status change.',
    args: { id: t.arg.id({ required: true }) },
    subscribe: (_r, args, ctx) => {
      const id = String(args.id);
      const notices = resourceNotices(ctx, id);
      const current = () => run(getMessageOp, ctx, { id });
      return liveStream(notices, current, current);
    },
    resolve: (m) => m,
  }),
}));
