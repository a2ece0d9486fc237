/** REST shapes (snake_case) of messages, templates and senders. */
import type { Message, MessageSender, MessageTemplate } from './messaging.entities.ts';

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

/** The carrier connector that carried (or received) the message, when one did: its provider is the connector's id. */
export function connectorOf(m: Pick<Message, 'provider'>): string | null {
  return m.provider?.startsWith('conn_') ? m.provider : null;
}

/** A list item: no body or channel payload. */
/**
 * `price`: what the ledger charged for the message, an integer in the smallest currency unit (cents,
 * as every amount of the billing API), positive; `price_unit`: its currency code (`usd`). Both null
 * until the charge is captured (on delivery), and for messages never charged (test mode, the plan's
 * included messages, failed sends).
 */
export function presentMessageSummary(m: Message & { charge?: { amount: number; currency: string } | null }) {
  return {
    id: m.id, message_id: m.id, channel: m.channel, direction: m.direction, to: m.channel === 'email' && m.recipients.length > 1 ? m.recipients : m.to,
    from: m.from, status: m.status, ...(m.channel === 'sms' || m.fallback?.channel === 'sms' ? { encoding: m.encoding, segments: m.segments } : {}),
    error_code: m.errorCode, ...(connectorOf(m) ? { connector_id: connectorOf(m) } : {}), ...(m.fallback ? { fallback: m.fallback } : {}), ...(m.originalMessageId ? { original_message_id: m.originalMessageId } : {}),
    price: m.charge?.amount ?? null, price_unit: m.charge?.currency ?? null,
    created_at: iso(m.createdAt), sent_at: iso(m.sentAt), delivered_at: iso(m.deliveredAt), read_at: iso(m.readAt), failed_at: iso(m.failedAt),
  };
}

export function presentMessage(m: Message & { charge?: { amount: number; currency: string } | null }) {
  return {
    ...presentMessageSummary(m),
    body: m.body,
    ...channelFields(m),
    status_history: m.statusHistory,
    error_message: m.errorMessage,
    template_id: m.templateId,
    metadata: m.metadata,
    webhook_url: m.webhookUrl,
    updated_at: iso(m.updatedAt),
  };
}

function channelFields(m: Message): Record<string, unknown> {
  const c = m.content;
  switch (m.channel) {
    case 'email': return { subject: c.subject, html: c.html ?? null, text: c.text ?? null, ...(c.reply_to ? { reply_to: c.reply_to } : {}) };
    case 'whatsapp': return { type: c.type, ...(c.template ? { template: c.template } : {}), ...(c.media ? { media: c.media } : {}) };
    case 'rcs': return { type: c.type, ...(c.card ? { card: c.card } : {}), ...(c.cards ? { cards: c.cards } : {}), ...(c.suggestions ? { suggestions: c.suggestions } : {}), ...(c.fallback ? { fallback_request: c.fallback } : {}) };
    case 'viber': return { ...(c.media_url ? { media_url: c.media_url } : {}), ...(c.button ? { button: c.button } : {}) };
    default: return {};
  }
}

export function presentTemplate(t: MessageTemplate) {
  return {
    id: t.id, channel: t.channel, name: t.name, content: t.content, category: t.category, language: t.language,
    variables: t.variables, status: t.status, ...(t.rejectionReason ? { rejection_reason: t.rejectionReason } : {}),
    created_at: iso(t.createdAt), updated_at: iso(t.updatedAt),
  };
}

export function presentSender(s: MessageSender) {
  return { id: s.id, channel: s.channel, address: s.address, is_default: s.isDefault, mode: s.mode, created_at: iso(s.createdAt) };
}
