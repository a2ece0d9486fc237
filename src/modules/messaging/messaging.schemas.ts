/**
 * Input schemas of the messaging context, shared by GraphQL and REST: the REST request bodies
 * (snake_case, as in the spec) validated and normalized into the shapes the service works with.
 * Unknown keys are refused (parseInput); null counts as absent for optional fields. Issues are
 * raised so that parseInput (platform/operations.ts) maps them to the spec's codes: an omitted required field is
 * MISSING_REQUIRED_FIELD with details.field, and refinements carry `params.code` for
 * INVALID_PHONE_NUMBER, INVALID_EMAIL, INVALID_TEMPLATE, MESSAGE_TOO_LONG and MEDIA_TOO_LARGE.
 *
 * One file per channel under schemas/ (sms, whatsapp, email, rcs, viber), the message list filters
 * (messages.ts), templates (templates.ts) and the shared parts (shared.ts); this file is their
 * public face for the module.
 */
export { MESSAGE_LIMITS, isAllowedWebhookUrl, isHttpsUrl, type Metadata, type MetadataValue, type MessageStatus, type MessageDirection } from './schemas/shared.ts';
export { sendSmsInput, type SendSmsInput } from './schemas/sms.ts';
export {
  WHATSAPP_MEDIA_LIMITS, sendWhatsAppInput, type SendWhatsAppInput, type WhatsAppMedia, type WhatsAppMediaType, type WhatsAppTemplate,
  type WhatsAppTemplateComponent, type WhatsAppTemplateParameter,
} from './schemas/whatsapp.ts';
export { sendEmailInput, type SendEmailInput } from './schemas/email.ts';
export { sendRcsInput, type RcsCard, type RcsMessageType, type RcsSuggestion, type SendRcsInput } from './schemas/rcs.ts';
export { sendViberInput, type SendViberInput } from './schemas/viber.ts';
export { listMessagesInput, type ListMessagesInput } from './schemas/messages.ts';
export { createTemplateInput, updateTemplateInput, type CreateTemplateInput, type TemplateStatusInput, type TemplateVariable, type UpdateTemplateInput } from './schemas/templates.ts';
