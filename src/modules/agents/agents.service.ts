/**
 * Agents: configuration (create, list, get, replace, patch, tools, guardrails, delete) and the
 * lifecycle of the spec's state table (deploy, pause, resume; `error` with a reason when a
 * configuration is found invalid at deploy or run time). Each change commits with its event.
 */
import type { Ports } from '../manifest.ts';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { LockMode } from '@mikro-orm/core';
import type { Config } from '../../config.ts';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import { emitEvent } from '../../platform/events/events.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import type { Pool } from 'pg';
import { entityColumns } from '../../platform/db/groupInsert.ts';
import { TenantRowReader } from '../../platform/db/rowReads.ts';
import { checkWebhookUrl } from '../../platform/http/safeHttp.ts';
import { newToolSecret } from './tools.signing.ts';
import { AgentCache, AGENTS_CHANGED_CHANNEL } from './agents.cache.ts';
import { Listener } from '../../platform/db/listen.ts';
import type { Logger } from '../../platform/logger.ts';
import { Agent, AgentConversation, KnowledgeDocument } from './agents.entities.ts';
import { DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, type AgentChannel, type Guardrails, type ToolDefinition } from './agents.model.ts';
import type { AgentEvent, AgentNumbersPort } from './agents.ports.ts';
import type { CreateAgentInput, DeployAgentInput, GuardrailsInput, ListAgentsInput, UpdateAgentInput } from './agents.schemas.ts';

/** The agent with its tool-signing secret in clear: only the create and install answers carry it. */
export type CreatedAgent = { agent: Agent; toolSigningSecret: string };

const NUMBER_CHANNELS = new Set(['sms', 'whatsapp', 'voice']);

export function guardrailsFrom(input: GuardrailsInput | null | undefined, base: Guardrails = {}): Guardrails {
  const out: Guardrails = { ...base };
  if (!input) return out;
  for (const [k, v] of Object.entries(input)) {
    if (v === undefined) continue;
    if (v === null) delete (out as Record<string, unknown>)[k];
    else (out as Record<string, unknown>)[k] = v;
  }
  return out;
}

export class AgentsService {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;
  readonly #numbers: AgentNumbersPort;
  readonly #sealer: Sealer;
  readonly #config: Config;

  readonly #quotas: () => Ports['planQuotas'] | undefined;

  readonly #turnReads: TenantRowReader<Agent>;
  /** Agents as turns read them, kept while this instance hears every change (agents.cache.ts). */
  readonly #cache: AgentCache | undefined;

  constructor(deps: {
    orm: MikroORM; pool: Pool; clock: Clock; cursors: CursorCodec; numbers: AgentNumbersPort; config: Config; quotas?: () => Ports['planQuotas'] | undefined;
    /** Where to LISTEN for agent changes (without it, turns read their agent every time). */
    listen?: { url: string; log: Logger; connectTimeoutMs: number };
  }) {
    this.#turnReads = new TenantRowReader(deps.pool, 'agents', entityColumns(deps.orm.getMetadata().get(Agent).properties));
    const listen = deps.listen;
    this.#cache = listen && new AgentCache({
      read: (tenant, id) => this.#turnReads.byId(tenant, id),
      feed: ({ changed, reconnected }) => {
        const listener = new Listener({ ...listen, channel: AGENTS_CHANGED_CHANNEL, onNotification: changed, onReconnect: reconnected });
        return { start: () => listener.start(), stop: () => listener.stop(), get connected() { return listener.connection !== undefined; } };
      },
    });
    this.#quotas = deps.quotas ?? (() => undefined);
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
    this.#numbers = deps.numbers;
    this.#config = deps.config;
    this.#sealer = new Sealer(deps.config.appSecret, 'agents.tool-secret');
  }

  toolSecret(agent: Agent): string {
    return this.#sealer.open(agent.toolSecretSealed);
  }

  async create(scope: Scope, input: CreateAgentInput, extra: { templateId?: string } = {}): Promise<CreatedAgent> {
    const secret = newToolSecret();
    const agent = await tenantEm(this.#orm, scope).transactional(async (tx) => {
      // The plan's agent count (live mode; billing's optional port): 429 QUOTA_EXCEEDED past it.
      const quotas = this.#quotas();
      if (quotas && scope.mode === 'live') quotas.checkAgents(scope, await tx.count(Agent, {}));
      await this.#checkKnowledge(tx, input.knowledge_base_ids ?? []);
      const now = this.#clock.now();
      const a = tx.create(Agent, {
        id: newId('agt', now.getTime()), organizationId: scope.organizationId, mode: scope.mode,
        name: input.name, type: input.type, model: input.model, systemPrompt: input.system_prompt,
        description: input.description ?? null, instructions: input.instructions ?? null,
        tools: input.tools ?? [], channels: input.channels ?? [], guardrails: guardrailsFrom(input.guardrails),
        knowledgeBaseIds: input.knowledge_base_ids ?? [], temperature: input.temperature ?? DEFAULT_TEMPERATURE,
        maxTokens: input.max_tokens ?? DEFAULT_MAX_TOKENS, status: 'draft', errorReason: null, deployedChannels: [],
        boundNumber: null, boundNumberId: null, deployedAt: null, toolSecretSealed: this.#sealer.seal(secret),
        templateId: extra.templateId ?? null, version: 1, createdAt: now, updatedAt: now,
      });
      this.#emit(tx, scope, 'agent.created', a, now);
      return a;
    });
    return { agent, toolSigningSecret: secret };
  }

  list(scope: Scope, input: ListAgentsInput): Promise<Page<Agent>> {
    const where = input.status ? { status: input.status } : {};
    return this.#cursors.findPage(tenantEm(this.#orm, scope), Agent, scope, { list: 'agents', filters: { status: input.status ?? null } }, input, where);
  }

  /**
   * The agent as a chat turn reads it: a plain object (never changed through the ORM), read on the
   * raw pool with every concurrent turn's read in one statement (chat's hot path).
   */
  async forTurn(scope: TenantRef, id: string): Promise<Agent> {
    const a = await (this.#cache ? this.#cache.get(scope, id) : this.#turnReads.byId(scope, id));
    if (!a) throw notFound('Agent', id);
    return a;
  }

  /** A change of agent `id` committed here: this instance's turns read it afresh at once (the others hear the commit's NOTIFY). */
  forget(id: string): void {
    this.#cache?.forget(id);
  }

  /** Whether this instance holds agent `id` for turns now (tests, diagnostics). */
  cached(id: string): boolean {
    return this.#cache?.has(id) ?? false;
  }

  /** Stops listening for agent changes (shutdown). */
  async close(): Promise<void> {
    await this.#cache?.close();
  }

  async get(scope: TenantRef, id: string): Promise<Agent> {
    const a = await tenantEm(this.#orm, scope).findOne(Agent, { id });
    if (!a) throw notFound('Agent', id);
    return a;
  }

  async update(scope: Scope, input: UpdateAgentInput): Promise<Agent> {
    return this.#change(scope, input.id, async (tx, a) => {
      if (input.knowledge_base_ids) await this.#checkKnowledge(tx, input.knowledge_base_ids);
      if (input.name != null) a.name = input.name;
      if (input.type != null) a.type = input.type;
      if (input.model != null) a.model = input.model;
      if (input.system_prompt != null) a.systemPrompt = input.system_prompt;
      if (input.description !== undefined) a.description = input.description;
      if (input.instructions !== undefined) a.instructions = input.instructions;
      if (input.tools != null) a.tools = input.tools;
      if (input.channels != null) a.channels = input.channels;
      if (input.guardrails != null) a.guardrails = guardrailsFrom(input.guardrails, a.guardrails);
      if (input.knowledge_base_ids != null) a.knowledgeBaseIds = input.knowledge_base_ids;
      if (input.temperature != null) a.temperature = input.temperature;
      if (input.max_tokens != null) a.maxTokens = input.max_tokens;
      return 'agent.updated';
    });
  }

  async addTool(scope: Scope, id: string, tool: ToolDefinition): Promise<Agent> {
    return this.#change(scope, id, async (_tx, a) => {
      if (a.tools.some((t) => t.name === tool.name)) {
        throw new ServiceError('ALREADY_EXISTS', `The agent already has a tool named ${tool.name}; PUT the agent to replace its tools`, { field: 'name', value: tool.name });
      }
      if (a.tools.length >= 32) throw new ServiceError('VALIDATION_ERROR', 'An agent has at most 32 tools', { field: 'tools' });
      a.tools = [...a.tools, tool];
      return 'agent.updated';
    });
  }

  async updateGuardrails(scope: Scope, id: string, input: GuardrailsInput): Promise<Agent> {
    return this.#change(scope, id, async (_tx, a) => {
      a.guardrails = guardrailsFrom(input, a.guardrails);
      return 'agent.updated';
    });
  }

  /** Removes the agent; its active conversations end as completed, its number is unbound. */
  async delete(scope: Scope, id: string): Promise<void> {
    const numberId = await this.#changing(id, () => tenantEm(this.#orm, scope).transactional(async (tx) => {
      const a = await tx.findOne(Agent, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!a) throw notFound('Agent', id);
      const now = this.#clock.now();
      const active = await tx.find(AgentConversation, { agentId: id, status: 'active' });
      for (const c of active) {
        Object.assign(c, { status: 'completed', endedReason: 'agent_deleted', endedAt: now, updatedAt: now });
        emitEvent(tx, scope, { type: 'conversation.completed', resourceType: 'conversation', resourceId: c.id, sequence: c.turns + 1, data: { conversation_id: c.id, agent_id: id, reason: 'agent_deleted' } }, now);
      }
      this.#emit(tx, scope, 'agent.deleted', a, now);
      tx.remove(a);
      return a.boundNumberId;
    }));
    if (numberId) await this.#numbers.bindAgent(scope, numberId, null);
  }

  // ---- lifecycle ----

  async deploy(scope: Scope, input: DeployAgentInput): Promise<Agent> {
    const current = await this.get(scope, input.id);
    if (current.status === 'active') throw new ServiceError('CONFLICT', 'The agent is already deployed (active); pause it first to redeploy', { status: current.status });
    const channels = input.channels ?? current.channels;
    if (!current.systemPrompt.trim()) throw new ServiceError('VALIDATION_ERROR', 'An agent needs a system prompt to be deployed', { field: 'system_prompt' });
    if (channels.length === 0) throw new ServiceError('VALIDATION_ERROR', 'An agent needs at least one channel to be deployed', { field: 'channels' });
    const problem = this.configurationProblem(current);
    if (problem) {
      await this.markError(scope, current.id, problem);
      throw new ServiceError('VALIDATION_ERROR', `The agent's configuration is invalid: ${problem}`, { field: 'tools', reason: problem, status: 'error' });
    }
    const number = await this.#bindableNumber(scope, channels, input.number_id);
    const agent = await this.#change(scope, input.id, async (_tx, a) => {
      if (a.status === 'active') throw new ServiceError('CONFLICT', 'The agent is already deployed (active)', { status: a.status });
      const now = this.#clock.now();
      Object.assign(a, {
        status: 'active', errorReason: null, channels, deployedChannels: channels.map((c) => c.type),
        boundNumber: number?.number ?? null, boundNumberId: number?.id ?? null, deployedAt: now,
      });
      return 'agent.deployed';
    });
    if (current.boundNumberId && current.boundNumberId !== number?.id) await this.#numbers.bindAgent(scope, current.boundNumberId, null);
    if (number) await this.#numbers.bindAgent(scope, number.id, agent.id);
    return agent;
  }

  pause(scope: Scope, id: string): Promise<Agent> {
    return this.#transition(scope, id, 'active', 'paused', 'agent.paused');
  }

  resume(scope: Scope, id: string): Promise<Agent> {
    return this.#transition(scope, id, 'paused', 'active', 'agent.resumed');
  }

  /** What makes a configuration unusable (a webhook tool whose endpoint the service may not call), or undefined. */
  configurationProblem(a: Agent): string | undefined {
    for (const t of a.tools) {
      if (t.type !== 'webhook' || !t.endpoint) continue;
      const verdict = checkWebhookUrl(t.endpoint, { allowLoopback: this.#config.allowLoopback });
      if (!verdict.ok) return `tool ${t.name}: ${verdict.reason}`;
    }
    return undefined;
  }

  /** Moves the agent to `error` with the reason (committed on its own: the failing request still fails). */
  async markError(tenant: TenantRef, id: string, reason: string): Promise<void> {
    await this.#changing(id, () => tenantEm(this.#orm, tenant).transactional(async (tx) => {
      const a = await tx.findOne(Agent, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!a) return;
      const now = this.#clock.now();
      Object.assign(a, { status: 'error', errorReason: reason, updatedAt: now, version: a.version + 1 });
      emitEvent(tx, tenant, { type: 'agent.error', resourceType: 'agent', resourceId: a.id, sequence: a.version, data: { agent_id: a.id, reason } }, now);
    }));
  }

  async #bindableNumber(scope: Scope, channels: readonly AgentChannel[], numberId: string | null | undefined) {
    if (numberId) {
      const n = await this.#numbers.findNumber(scope, { numberId });
      if (!n) throw notFound('Phone number', numberId);
      return n;
    }
    const wanting = channels.filter((c) => NUMBER_CHANNELS.has(c.type));
    if (wanting.length === 0) return undefined;
    const explicit = wanting.find((c) => c.phone_number)?.phone_number;
    if (explicit) {
      const n = await this.#numbers.findNumber(scope, { phoneNumber: explicit });
      if (!n) throw new ServiceError('VALIDATION_ERROR', `The organization does not own ${explicit}`, { field: 'channels', value: explicit });
      return n;
    }
    return this.#numbers.findNumber(scope, {});
  }

  async #transition(scope: Scope, id: string, from: Agent['status'], to: Agent['status'], event: AgentEvent): Promise<Agent> {
    return this.#change(scope, id, async (_tx, a) => {
      if (a.status !== from) throw new ServiceError('CONFLICT', `The agent is ${a.status}; only a ${from} agent can move to ${to}`, { status: a.status });
      a.status = to;
      return event;
    });
  }

  async #change(scope: Scope, id: string, apply: (tx: EntityManager, a: Agent) => Promise<AgentEvent>): Promise<Agent> {
    return this.#changing(id, () => tenantEm(this.#orm, scope).transactional(async (tx) => {
      const a = await tx.findOne(Agent, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!a) throw notFound('Agent', id);
      const event = await apply(tx, a);
      const now = this.#clock.now();
      a.updatedAt = now;
      a.version += 1;
      this.#emit(tx, scope, event, a, now);
      return a;
    }));
  }

  /**
   * Runs `change`, a transaction that changes agent `id`: this instance's turns read it afresh at
   * once, and the answer waits (briefly) until this instance has heard the change's NOTIFY, which
   * the other instances' listeners get at the same commit (agents.cache.ts `changing`).
   */
  #changing<T>(id: string, change: () => Promise<T>): Promise<T> {
    return this.#cache ? this.#cache.changing(id, change) : change();
  }

  async #checkKnowledge(tx: EntityManager, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const found = new Set((await tx.find(KnowledgeDocument, { id: { $in: [...ids] } }, { fields: ['id'] })).map((d) => d.id));
    const missing = ids.find((i) => !found.has(i));
    if (missing) throw new ServiceError('NOT_FOUND', `Knowledge base ${missing} not found`, { field: 'knowledge_base_ids', value: missing });
  }

  #emit(tx: EntityManager, scope: TenantRef, type: AgentEvent, a: Agent, now: Date): void {
    emitEvent(tx, scope, { type, resourceType: 'agent', resourceId: a.id, sequence: a.version, data: { agent_id: a.id, name: a.name, status: a.status } }, now);
  }
}
