/** The agent templates shipped with the service. `{{name}}` placeholders are filled from `customizations`. */
import type { AgentChannel, AgentType, Guardrails, ToolDefinition } from './agents.model.ts';

export type AgentTemplate = {
  id: string;
  name: string;
  description: string;
  category: string;
  type: AgentType;
  model: string;
  system_prompt: string;
  tools: ToolDefinition[];
  channels: AgentChannel[];
  guardrails: Guardrails;
  /** Placeholders of the prompt, with their defaults. */
  variables: Record<string, string>;
};

const builtin = (name: ToolDefinition['type'], description: string): ToolDefinition => ({ name, description, type: name, endpoint: null, method: null, parameters: {} });

export const TEMPLATES: readonly AgentTemplate[] = [
  {
    id: 'appointment-reminder', name: 'Appointment reminder', category: 'scheduling', type: 'task', model: 'gpt-4o-mini',
    description: 'Reminds customers of upcoming appointments, confirms or reschedules, and books a callback when asked.',
    system_prompt: 'You are the scheduling assistant of {{business_name}}. Remind the customer of their appointment, ask them to confirm, and offer to reschedule. Keep messages under 300 characters. Never give medical, legal or financial advice.',
    tools: [builtin('schedule_callback', 'Schedule a call back to the customer'), builtin('human_handoff', 'Hand the conversation to staff')],
    channels: [{ type: 'sms' }], guardrails: { pii_redaction: true, max_turns: 10, escalation_keywords: ['cancel everything', 'complaint'] },
    variables: { business_name: 'our clinic' },
  },
  {
    id: 'support-triage', name: 'Support triage', category: 'support', type: 'conversational', model: 'gpt-4o-mini',
    description: 'Answers common questions from the knowledge base and routes everything else to a human with a summary.',
    system_prompt: 'You are the first-line support agent of {{business_name}}. Answer from the knowledge base when you can and cite it. If you cannot answer, or the customer is upset, hand off to a human with a one-sentence summary.',
    tools: [builtin('knowledge_base', 'Search the support articles'), builtin('human_handoff', 'Escalate to a support agent')],
    channels: [{ type: 'web' }, { type: 'whatsapp' }], guardrails: { content_filter: true, pii_redaction: true, escalation_keywords: ['refund', 'lawyer', 'manager'] },
    variables: { business_name: 'our company' },
  },
  {
    id: 'lead-qualification', name: 'Lead qualification', category: 'sales', type: 'conversational', model: 'gpt-4o-mini',
    description: 'Qualifies inbound leads (budget, authority, need, timeline) and hands hot leads to sales.',
    system_prompt: 'You qualify leads for {{business_name}}, which sells {{product}}. Ask about budget, decision makers, needs and timeline, one question at a time. When the lead is qualified, hand off to sales.',
    tools: [builtin('human_handoff', 'Hand a qualified lead to sales'), builtin('schedule_callback', 'Book a sales call')],
    channels: [{ type: 'web' }, { type: 'sms' }], guardrails: { content_filter: true, max_turns: 20 },
    variables: { business_name: 'our company', product: 'our product' },
  },
  {
    id: 'order-status', name: 'Order status', category: 'commerce', type: 'task', model: 'gpt-4o-mini',
    description: 'Looks up order status through your order API (a webhook tool you point at it) and answers customers.',
    system_prompt: 'You answer order status questions for {{business_name}}. Ask for the order number, look it up with the order_lookup tool and report status and delivery estimate. Never reveal payment details.',
    tools: [{ name: 'order_lookup', description: 'Look up an order by number', type: 'function', endpoint: null, method: null, parameters: { order_number: { type: 'string', description: 'The order number' } } }],
    channels: [{ type: 'whatsapp' }, { type: 'sms' }], guardrails: { output_checks: ['no_card_numbers'], pii_redaction: true },
    variables: { business_name: 'our store' },
  },
  {
    id: 'customer-survey', name: 'Customer survey', category: 'feedback', type: 'task', model: 'gpt-4o-mini',
    description: 'Runs a short satisfaction survey (NPS and one open question) and thanks the customer.',
    system_prompt: 'You run a three-question satisfaction survey for {{business_name}}: how likely they are to recommend us (0-10), why, and what we could do better. Ask one question at a time and thank them at the end.',
    tools: [], channels: [{ type: 'sms' }], guardrails: { content_filter: true, max_turns: 5 },
    variables: { business_name: 'our company' },
  },
  {
    id: 'payment-reminder', name: 'Payment reminder', category: 'billing', type: 'task', model: 'gpt-4o-mini',
    description: 'Reminds customers of an open invoice, answers questions and collects the payment when a payments adapter is configured.',
    system_prompt: 'You remind customers of {{business_name}} about an unpaid invoice politely, answer questions about it and offer to take the payment. Never threaten.',
    tools: [builtin('collect_payment', 'Collect the payment'), builtin('human_handoff', 'Hand over to the billing team')],
    channels: [{ type: 'sms' }], guardrails: { pii_redaction: true, output_checks: ['no_card_numbers'] },
    variables: { business_name: 'our company' },
  },
];

export function fillPlaceholders(text: string, values: Record<string, string>): string {
  return text.replace(/\{\{\s*(\w+)\s*\}\}/g, (m, key: string) => values[key] ?? m);
}
