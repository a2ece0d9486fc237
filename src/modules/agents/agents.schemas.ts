/** Input schemas of the agents context, shared by GraphQL and REST (snake_case wire shape). */
import { z } from 'zod';
import { pageInput } from '../../platform/inputs.ts';
import { normalizePhone } from '../../platform/recipients.ts';
import {
  AGENT_STATUSES, AGENT_TYPES, BUILTIN_TOOLS, CHANNEL_TYPES, CONVERSATION_STATUSES, OUTPUT_CHECKS, type AgentChannel, type ToolDefinition,
} from './agents.model.ts';

const id = z.string().trim().min(1).max(100);
const text = (max: number) => z.string().trim().min(1).max(max);

const phone = z.string().transform((v, ctx) => {
  const n = normalizePhone(v);
  if (!n) {
    ctx.addIssue({ code: 'custom', params: { code: 'INVALID_PHONE_NUMBER' }, message: 'phone_number must be an E.164 number' });
    return z.NEVER;
  }
  return n;
});

/** `channels` as strings (`["sms","web"]`) or as objects (`[{ type, phone_number }]`), normalized to objects. */
/**
 * A channel: `{ type, phone_number }`, or its name (`"sms"`). The object comes first: an object
 * that fails both options is reported by its own problems (a bad phone_number), not as "not one of".
 */
const channelInput = z.union([
  z.object({ type: z.enum(CHANNEL_TYPES), phone_number: phone.nullish() }).transform((c): AgentChannel => ({ type: c.type, ...(c.phone_number ? { phone_number: c.phone_number } : {}) })),
  z.enum(CHANNEL_TYPES).transform((type): AgentChannel => ({ type })),
]);

export const channelsInput = z.array(channelInput).max(4).transform((list) => {
  const seen = new Set<string>();
  return list.filter((c) => (seen.has(c.type) ? false : (seen.add(c.type), true)));
});

const parameterSpec = z.record(z.string(), z.unknown());

export const toolInput = z.object({
  name: z.string().regex(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/, 'letters, digits, _ and - (up to 64, starting with a letter)'),
  description: z.string().trim().max(1000).default(''),
  type: z.enum(['webhook', 'function', ...BUILTIN_TOOLS]).nullish(),
  endpoint: z.url({ protocol: /^https?$/ }).max(2000).nullish(),
  method: z.string().toUpperCase().pipe(z.enum(['POST'])).nullish(),
  parameters: parameterSpec.default({}),
}).transform((t, ctx): ToolDefinition => {
  const builtin = (BUILTIN_TOOLS as readonly string[]).includes(t.name) ? t.name : undefined;
  const type = t.type ?? (t.endpoint ? 'webhook' : builtin ?? 'function');
  if (type === 'webhook' && !t.endpoint) ctx.addIssue({ code: 'custom', path: ['endpoint'], message: 'a webhook tool needs an endpoint' });
  if ((BUILTIN_TOOLS as readonly string[]).includes(type) && type !== t.name) {
    ctx.addIssue({ code: 'custom', path: ['name'], message: `the built-in tool ${type} is named ${type}` });
  }
  return { name: t.name, description: t.description, type, endpoint: t.endpoint ?? null, method: t.endpoint ? (t.method ?? 'POST') : null, parameters: t.parameters };
});
const toolsInput = z.array(toolInput).max(32).superRefine((tools, ctx) => {
  const names = new Set<string>();
  tools.forEach((t, i) => {
    if (names.has(t.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `tool ${t.name} is listed twice` });
    names.add(t.name);
  });
});

const keywords = z.array(z.string().trim().min(1).max(100)).max(50);
export const guardrailsInput = z.object({
  pii_redaction: z.boolean().nullish(),
  content_filter: z.boolean().nullish(),
  max_turns: z.number().int().min(1).max(1000).nullish(),
  escalation_keywords: keywords.nullish(),
  blocked_topics: keywords.nullish(),
  output_checks: z.array(z.enum(OUTPUT_CHECKS)).max(OUTPUT_CHECKS.length).nullish(),
  max_output_chars: z.number().int().min(1).max(100_000).nullish(),
});
export type GuardrailsInput = z.infer<typeof guardrailsInput>;

const temperature = z.number().min(0).max(2);
const maxTokens = z.number().int().min(1).max(128_000);
const kbIds = z.array(id).max(50);

export const createAgentInput = z.object({
  name: text(100),
  type: z.enum(AGENT_TYPES),
  model: text(100),
  system_prompt: text(20_000),
  description: z.string().trim().max(2000).nullish(),
  instructions: z.string().trim().max(20_000).nullish(),
  tools: toolsInput.nullish(),
  channels: channelsInput.nullish(),
  guardrails: guardrailsInput.nullish(),
  knowledge_base_ids: kbIds.nullish(),
  temperature: temperature.nullish(),
  max_tokens: maxTokens.nullish(),
});
export type CreateAgentInput = z.infer<typeof createAgentInput>;

/**
 * PUT and PATCH: the create fields, each optional; fields left out keep their value (PUT's `tools`
 * replaces the whole list). A required field (name, type, model, system_prompt) cannot be null.
 */
export const updateAgentInput = createAgentInput.partial().extend({ id });
export type UpdateAgentInput = z.infer<typeof updateAgentInput>;

export const listAgentsInput = pageInput.extend({ status: z.enum(AGENT_STATUSES).nullish() });
export type ListAgentsInput = z.infer<typeof listAgentsInput>;

export const deployAgentInput = z.object({ id, channels: channelsInput.nullish(), number_id: id.nullish() });
export type DeployAgentInput = z.infer<typeof deployAgentInput>;

export const addToolInput = z.object({ id, tool: toolInput });
export const updateGuardrailsInput = guardrailsInput.extend({ id });

export const chatInput = z.object({
  id,
  message: z.string().min(1).max(100_000),
  conversation_id: id.nullish(),
  context: z.record(z.string(), z.unknown()).nullish(),
  stream: z.boolean().nullish(),
});

export const testTurnInput = z.object({
  message: z.string().min(1).max(100_000),
  expect: z.object({
    contains: z.string().max(1000).nullish(),
    tool: z.string().max(64).nullish(),
    blocked: z.boolean().nullish(),
    handoff: z.boolean().nullish(),
  }).nullish(),
});
export const testAgentInput = z.object({
  id,
  message: z.string().min(1).max(100_000).nullish(),
  turns: z.array(testTurnInput).min(1).max(20).nullish(),
  context: z.record(z.string(), z.unknown()).nullish(),
}).refine((v) => !!v.message !== !!v.turns, { message: 'give either message or turns', path: ['message'] });
export type TestAgentInput = z.infer<typeof testAgentInput>;

export const listConversationsInput = pageInput.extend({ id, status: z.enum(CONVERSATION_STATUSES).nullish() });
export type ListConversationsInput = z.infer<typeof listConversationsInput>;
export const listMessagesInput = pageInput.extend({ id, conversation_id: id });
export type ListMessagesInput = z.infer<typeof listMessagesInput>;

export const installTemplateInput = z.object({
  template_id: id,
  name: text(100).nullish(),
  channels: channelsInput.nullish(),
  customizations: z.record(z.string(), z.unknown()).nullish(),
});
export type InstallTemplateInput = z.infer<typeof installTemplateInput>;

/**
 * What of an agent's configuration a marketplace listing makes public, as the publisher confirms
 * it (`published_fields`): every organization sees and installs it. `type`, `model` and the channel
 * types are always published; instructions, knowledge, temperature, phone numbers never are.
 */
export const PUBLISHABLE_FIELDS = ['system_prompt', 'tools', 'guardrails'] as const;
export type PublishableField = (typeof PUBLISHABLE_FIELDS)[number];

export const submitListingInput = z.object({
  agent_id: id,
  /** Must name `system_prompt` (an install starts from it); `tools` and `guardrails` only when listed. */
  published_fields: z.array(z.enum(PUBLISHABLE_FIELDS)).max(PUBLISHABLE_FIELDS.length)
    .refine((f) => f.includes('system_prompt'), 'must include system_prompt: it becomes public, and an install starts from it'),
  listing: z.object({
    title: text(120),
    description: text(2000),
    category: text(60),
    pricing: z.record(z.string(), z.unknown()).nullish(),
  }),
});
export type SubmitListingInput = z.infer<typeof submitListingInput>;

export const uploadKnowledgeInput = z.object({
  id,
  type: z.enum(['pdf', 'txt', 'md', 'html', 'csv']),
  filename: z.string().trim().min(1).max(255),
  content: z.instanceof(Uint8Array),
});
export type UploadKnowledgeInput = z.infer<typeof uploadKnowledgeInput>;
