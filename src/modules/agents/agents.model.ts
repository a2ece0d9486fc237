/** The agents context's value types and constants (no I/O). */
export const AGENT_TYPES = ['conversational', 'task'] as const;
export type AgentType = (typeof AGENT_TYPES)[number];
export const AGENT_STATUSES = ['draft', 'active', 'paused', 'error'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];
export const CHANNEL_TYPES = ['whatsapp', 'sms', 'voice', 'web'] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];
export const CONVERSATION_STATUSES = ['active', 'completed', 'abandoned'] as const;
export type ConversationStatus = (typeof CONVERSATION_STATUSES)[number];
export const BUILTIN_TOOLS = ['knowledge_base', 'human_handoff', 'send_message', 'schedule_callback', 'collect_payment'] as const;
export const KNOWLEDGE_TYPES = ['pdf', 'txt', 'md', 'html', 'csv'] as const;
export type KnowledgeType = (typeof KNOWLEDGE_TYPES)[number];
export const OUTPUT_CHECKS = ['no_pii', 'no_profanity', 'no_card_numbers', 'no_urls', 'max_length'] as const;

export type AgentChannel = { type: ChannelType; phone_number?: string | null };

/** JSON-schema style parameters (`type`, `properties`, `required`) or the agent-setup map of name → {type, description}. */
export type ToolParameters = Record<string, unknown>;

export type ToolDefinition = {
  name: string;
  description: string;
  /** `webhook` (custom HTTP tool) or a built-in tool name; `function` for a declared tool without endpoint. */
  type: string;
  endpoint?: string | null;
  method?: string | null;
  parameters: ToolParameters;
};

export type Guardrails = {
  pii_redaction?: boolean;
  content_filter?: boolean;
  max_turns?: number | null;
  escalation_keywords?: string[];
  blocked_topics?: string[];
  output_checks?: string[];
  max_output_chars?: number | null;
};

/** One decision a guardrail took on a message (recorded on the message). */
export type GuardrailDecision = { guardrail: string; action: 'redacted' | 'blocked' | 'escalated' | 'ended' | 'passed'; detail?: string };

/** As the spec shows it: `tool`, `input`, optional `output` (plus `error` and `sources` when they apply). */
export type ToolCallRecord = { tool: string; input: unknown; output?: unknown; error?: string; sources?: { document_id: string; filename: string; chunk: number }[] };

export const DEFAULT_TEMPERATURE = 0.7;
export const DEFAULT_MAX_TOKENS = 4096;
