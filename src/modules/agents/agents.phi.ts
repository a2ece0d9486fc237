/**
 * Agent conversations' PHI in HIPAA mode (see platform/phi.ts): a message's content and its tool
 * calls (arguments, results, errors) are sealed together in `agent_messages.phi`, a conversation's
 * context in `agent_conversations.phi`, each bound to organization, table, row id and column. The
 * clear columns keep what lists and analytics need: roles, tool names, guardrail decisions (the
 * guardrail, its action and a configured keyword, topic or PII kind: never the text), tokens,
 * latency, timestamps, the contact's address (as messaging keeps addresses clear). Knowledge
 * documents are the organization's own material, not patient data: they stay clear.
 */
import type { Scope } from '../../platform/auth/scope.ts';
import { ServiceError } from '../../platform/errors.ts';
import { PhiUse, PHI_REASON_HEADER, REDACTED, redactDeep, type PhiCodec, type PhiPort, type PhiRef } from '../../platform/phi.ts';
import type { AgentConversation, AgentMessage } from './agents.entities.ts';
import type { ToolCallRecord } from './agents.model.ts';

export const AGENT_MESSAGE_PHI_FIELDS = ['content', 'tool_calls'] as const;
export const CONVERSATION_PHI_FIELDS = ['context'] as const;

type SealedMessage = { content: string; toolCalls: ToolCallRecord[] };

const messageRef = (id: string): PhiRef => ({ table: 'agent_messages', rowId: id, column: 'phi' });
const conversationRef = (id: string): PhiRef => ({ table: 'agent_conversations', rowId: id, column: 'phi' });

/** What of a tool call stays clear: the tool's name. */
const clearToolCalls = (calls: ToolCallRecord[]): ToolCallRecord[] => calls.map((c) => ({ tool: c.tool, input: null }));

/** The stored fields of a message in HIPAA mode (content '' and tool names only; the rest sealed). */
export function sealAgentMessage<T extends Pick<AgentMessage, 'id' | 'content' | 'toolCalls'>>(m: T, codec: PhiCodec): T & { phi: string } {
  const sealed: SealedMessage = { content: m.content, toolCalls: m.toolCalls };
  return { ...m, content: '', toolCalls: clearToolCalls(m.toolCalls), phi: codec.seal(messageRef(m.id), JSON.stringify(sealed)) };
}

/** A stored message with its sealed content opened (a plain copy, never a managed entity). */
export function openAgentMessage(m: AgentMessage, codec: PhiCodec): AgentMessage {
  if (!m.phi) return m;
  const s = JSON.parse(codec.open(messageRef(m.id), m.phi)) as SealedMessage;
  return { ...m, content: s.content, toolCalls: s.toolCalls, phi: null };
}

/** What a caller without PHI access sees: content and every string of the tool calls redacted (tool names kept). */
export function redactAgentMessage(m: AgentMessage, codec?: PhiCodec): AgentMessage {
  const opened = m.phi && codec ? openAgentMessage(m, codec) : m;
  const purged = m.contentPurgedAt !== null && m.contentPurgedAt !== undefined;
  return {
    ...opened, phi: null, content: purged ? opened.content : REDACTED,
    toolCalls: opened.toolCalls.map((c) => ({ ...redactDeep(c), tool: c.tool, ...(c.sources ? { sources: c.sources } : {}) })),
  };
}

export function sealConversationContext<T extends Pick<AgentConversation, 'id' | 'context'>>(c: T, codec: PhiCodec): T & { phi: string | null } {
  if (Object.keys(c.context).length === 0) return { ...c, phi: null };
  return { ...c, context: {}, phi: codec.seal(conversationRef(c.id), JSON.stringify(c.context)) };
}

export function openConversation(c: AgentConversation, codec: PhiCodec): AgentConversation {
  if (!c.phi) return c;
  return { ...c, context: JSON.parse(codec.open(conversationRef(c.id), c.phi)) as Record<string, unknown>, phi: null };
}

export function redactConversation(c: AgentConversation, codec?: PhiCodec): AgentConversation {
  const opened = c.phi && codec ? openConversation(c, codec) : c;
  return { ...opened, context: redactDeep(opened.context), phi: null };
}

/** The agents context's use of the `phi` port (optional: without the HIPAA module nothing is sealed). */
export class AgentsPhi extends PhiUse {
  constructor(port: () => PhiPort | undefined) {
    super(port, 'an agent conversation');
  }



  /** Messages as this caller may see them (opened and logged, or redacted). */
  messages(scope: Scope, rows: AgentMessage[], operation: string): Promise<AgentMessage[]> {
    return this.revealRows(scope, rows, {
      sealed: (r) => [r.phi], open: (r, codec) => openAgentMessage(r, codec), redact: (r, codec) => redactAgentMessage(r, codec),
      resourceType: 'agent_message', fields: AGENT_MESSAGE_PHI_FIELDS, operation,
    });
  }

  /** Conversations as this caller may see them (context opened and logged, or redacted). */
  conversations(scope: Scope, rows: AgentConversation[], operation: string): Promise<AgentConversation[]> {
    return this.revealRows(scope, rows, {
      sealed: (r) => [r.phi], open: (r, codec) => openConversation(r, codec), redact: (r, codec) => redactConversation(r, codec),
      resourceType: 'agent_conversation', fields: CONVERSATION_PHI_FIELDS, operation,
    });
  }

  /**
   * Continuing a stored conversation hands its history (PHI) to the model, whose answer may repeat
   * it: in HIPAA mode the caller needs PHI access (a developer: a reason code), and the disclosure
   * is logged. A new conversation needs none: its answer is generated for the caller from what they sent.
   */
  async assertMayContinue(scope: Scope, conversationId: string, operation: string): Promise<void> {
    const port = this.port();
    if (!port) return;
    const access = await port.access(scope);
    if (!access.hipaa) return;
    if (!access.granted) {
      throw new ServiceError('FORBIDDEN', `In HIPAA mode, continuing a conversation discloses its history: send a reason code (${PHI_REASON_HEADER}) or start a new conversation`, {
        reason: 'phi_access_required', header: PHI_REASON_HEADER, conversation_id: conversationId,
      });
    }
    await access.record({ resourceType: 'agent_conversation', resourceIds: [conversationId], fields: ['history'], operation });
  }
}
