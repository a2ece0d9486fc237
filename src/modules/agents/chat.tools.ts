/**
 * The tools an agent's model may call, as AI SDK tools: custom webhook tools (a signed POST through
 * the SSRF-safe HTTP client, with a deadline) and the built-ins. A tool that fails throws: the model
 * sees the error as the tool's result and may recover; the chat decides what an unrecovered failure is.
 */
import type { ToolSet } from 'ai';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import { emitEvent } from '../../platform/events/events.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import { safePost } from '../../platform/http/safeHttp.ts';
import type { MessageSenderPort } from '../messaging/messaging.ports.ts';
import type { Agent } from './agents.entities.ts';
import type { ToolDefinition, ToolParameters } from './agents.model.ts';
import type { KnowledgeService } from './knowledge.service.ts';
import { toolSignature } from './tools.signing.ts';
import { loadAi } from '../../providers/llm/types.ts';

export const CALLBACK_JOB = 'agents.callback-due';

export type ToolRunContext = {
  scope: Scope;
  agent: Agent;
  /** The agent's tool signing key (opened when a webhook tool is called). */
  toolSecret: () => string;
  /** Filled in once the conversation exists (tools run before the turn is stored). */
  conversationId: () => string | null;
  /** Test conversations: nothing leaves the service (no messages, no calls). */
  simulate: boolean;
  signal: AbortSignal;
  /** Set when the model hands the conversation to a human. */
  onHandoff: (reason: string) => void;
};

export type ToolDeps = {
  orm: MikroORM;
  clock: Clock;
  jobs: Jobs;
  messaging: MessageSenderPort;
  knowledge: KnowledgeService;
  http: { allowLoopback: boolean; timeoutMs: number };
};

const obj = (properties: Record<string, unknown>, required: string[] = []) => ({ type: 'object' as const, properties, required });

const BUILTIN_SCHEMAS: Record<string, ReturnType<typeof obj>> = {
  knowledge_base: obj({ query: { type: 'string', description: 'What to look up' } }, ['query']),
  human_handoff: obj({ reason: { type: 'string' } }),
  send_message: obj({ to: { type: 'string', description: 'E.164 number' }, body: { type: 'string' } }, ['to', 'body']),
  schedule_callback: obj({ to: { type: 'string' }, delay_minutes: { type: 'integer' }, at: { type: 'string', description: 'ISO 8601' } }),
  collect_payment: obj({ amount: { type: 'integer', description: 'minor units' }, currency: { type: 'string' } }, ['amount']),
};

/** The agent-setup shape (name → {type, description}) or a JSON schema object, as a JSON schema. */
export function parametersSchema(p: ToolParameters): Record<string, unknown> {
  if (p.type === 'object') return p;
  const properties: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(p)) properties[name] = spec && typeof spec === 'object' ? spec : { type: 'string' };
  return obj(properties);
}

/** A turn's tools: the AI SDK tool set, and each tool's context for the call (`toolsContext`: the turn's ToolRunContext). */
export type TurnTools = { tools: ToolSet; toolsContext: Record<string, ToolRunContext> };

export class AgentTools {
  readonly #d: ToolDeps;
  /**
   * The AI SDK tools of an agent's definitions array (an agent held by the agents cache keeps the
   * same array on every turn; a change replaces the array): schemas and tool objects made once,
   * the turn reaching `execute` as the tool's context.
   */
  readonly #sets = new WeakMap<readonly ToolDefinition[], ToolSet>();

  constructor(deps: ToolDeps) {
    this.#d = deps;
  }

  async build(ctx: ToolRunContext): Promise<TurnTools> {
    let tools = this.#sets.get(ctx.agent.tools);
    if (!tools) {
      const { jsonSchema, tool } = await loadAi();
      tools = {};
      for (const def of ctx.agent.tools) {
        const schema = BUILTIN_SCHEMAS[def.type] ?? parametersSchema(def.parameters);
        tools[def.name] = tool({
          description: def.description || def.name,
          inputSchema: jsonSchema(schema as Parameters<typeof jsonSchema>[0] & object),
          execute: async (input: unknown, options: { context?: unknown }) => this.#execute(def, (input ?? {}) as Record<string, unknown>, options.context as ToolRunContext),
        });
      }
      this.#sets.set(ctx.agent.tools, tools);
    }
    const toolsContext: Record<string, ToolRunContext> = {};
    for (const name of Object.keys(tools)) toolsContext[name] = ctx;
    return { tools, toolsContext };
  }

  async #execute(def: ToolDefinition, input: Record<string, unknown>, ctx: ToolRunContext): Promise<unknown> {
    switch (def.type) {
      case 'webhook':
        return this.#webhook(def, input, ctx);
      case 'knowledge_base': {
        const hits = await this.#d.knowledge.search(ctx.scope, ctx.agent.knowledgeBaseIds, String(input.query ?? ''), 4);
        return { results: hits.map((h) => ({ content: h.content, source: { document_id: h.documentId, filename: h.filename, chunk: h.ordinal } })) };
      }
      case 'human_handoff':
        ctx.onHandoff(String(input.reason ?? 'requested by the agent'));
        return { handed_off: true };
      case 'send_message':
        return this.#sendMessage(input, ctx);
      case 'schedule_callback':
        return this.#scheduleCallback(input, ctx);
      case 'collect_payment':
        throw new Error('payments are not configured for this organization (the billing payments adapter is not installed)');
      default:
        throw new Error(`tool ${def.name} has no endpoint to call`);
    }
  }

  async #webhook(def: ToolDefinition, input: Record<string, unknown>, ctx: ToolRunContext): Promise<unknown> {
    const body = JSON.stringify({ tool: def.name, input, agent_id: ctx.agent.id, conversation_id: ctx.conversationId(), mode: ctx.scope.mode });
    const res = await safePost(def.endpoint!, body, {
      'Content-Type': 'application/json', 'User-Agent': 'omnichannel-agents/1', 'X-Service-Signature': toolSignature(ctx.toolSecret(), body),
    }, { policy: { allowLoopback: this.#d.http.allowLoopback }, timeoutMs: this.#d.http.timeoutMs, signal: ctx.signal });
    if (res.status >= 400) throw new Error(`${def.name} answered HTTP ${res.status}`);
    try {
      return JSON.parse(res.body) as unknown;
    } catch {
      return res.body;
    }
  }

  async #sendMessage(input: Record<string, unknown>, ctx: ToolRunContext): Promise<unknown> {
    const to = String(input.to ?? '');
    const body = String(input.body ?? '');
    if (ctx.simulate) return { simulated: true, to, body };
    const message = await this.#d.messaging.sendSms(ctx.scope, { to, body, metadata: { agent_id: ctx.agent.id } });
    return { message_id: message.id, status: message.status };
  }

  async #scheduleCallback(input: Record<string, unknown>, ctx: ToolRunContext): Promise<unknown> {
    const now = this.#d.clock.now();
    const at = typeof input.at === 'string' && !Number.isNaN(Date.parse(input.at))
      ? new Date(input.at)
      : new Date(now.getTime() + Math.max(1, Number(input.delay_minutes ?? 15)) * 60_000);
    const to = typeof input.to === 'string' ? input.to : null;
    if (ctx.simulate) return { simulated: true, scheduled_for: at.toISOString(), to };
    await tenantEm(this.#d.orm, ctx.scope).transactional(async (tx: EntityManager) => {
      await this.#d.jobs.enqueue(CALLBACK_JOB, { agentId: ctx.agent.id, conversationId: ctx.conversationId(), to, at: at.toISOString() }, { scope: ctx.scope, em: tx, startAfter: at });
    });
    return { scheduled_for: at.toISOString(), to };
  }

  /** The callback job: at the due time, `conversation.callback_due` tells subscribers (and the voice channel) to call. */
  async callbackDue(scope: Scope, data: { agentId: string; conversationId: string | null; to: string | null; at: string }): Promise<void> {
    await tenantEm(this.#d.orm, scope).transactional(async (tx) => {
      const now = this.#d.clock.now();
      emitEvent(tx, scope, {
        type: 'conversation.callback_due', resourceType: 'conversation', resourceId: data.conversationId ?? data.agentId, sequence: 1,
        data: { agent_id: data.agentId, conversation_id: data.conversationId, to: data.to, scheduled_for: data.at },
      }, now);
    });
  }
}
