/**
 * Flows: create, read, update with optimistic concurrency (each accepted update increments
 * `version` and stores the version's snapshot, so every version stays readable), soft delete
 * (running executions finish on their pinned version; nothing new starts). Definitions and triggers
 * are validated at save time (flows.graph.ts) and so are their references to templates, lists and
 * agents in the tenant; a trigger on what the flow itself causes is refused (checkSelfTrigger).
 */
import { randomBytes } from 'node:crypto';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { newId } from '../../platform/ids.ts';
import { ALL_TENANTS, tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import type { CursorCodec, Page, PageRequest } from '../../platform/pagination.ts';
import { recordAudit } from '../../platform/audit/audit.ts';
import { Sealer } from '../../platform/crypto/seal.ts';
import { checkWebhookUrl, type UrlPolicy } from '../../platform/http/safeHttp.ts';
import { Flow, FlowVersion } from './flows.entities.ts';
import { hasPlaceholder } from './flows.conditions.ts';
import { checkSelfTrigger, references, validateDefinition, validateTrigger, type FlowDefinition, type FlowTrigger } from './flows.graph.ts';
import type { FlowAgentsPort, FlowContactsPort, FlowMessagesPort } from './flows.ports.ts';
import type { CreateFlowInput, UpdateFlowInput } from './flows.schemas.ts';

/** Keeps pg-boss schedules in step with schedule-triggered flows (called after commit). */
export type FlowScheduler = { sync(flow: Flow): Promise<void>; checkCron(cron: string, timezone: string): void };

/** The webhook secret of a flow, revealed in the response of the save that created it. */
export const revealedSecrets = new WeakMap<Flow, string>();

export type FlowsDeps = {
  orm: MikroORM;
  clock: Clock;
  cursors: CursorCodec;
  appSecret: string;
  urlPolicy: UrlPolicy;
  eventTypes: readonly string[];
  scheduler: FlowScheduler;
  messages: FlowMessagesPort;
  contacts: FlowContactsPort;
  agents: () => FlowAgentsPort | undefined;
};

export class FlowsService {
  readonly #d: FlowsDeps;
  readonly #sealer: Sealer;

  constructor(deps: FlowsDeps) {
    this.#d = deps;
    this.#sealer = new Sealer(deps.appSecret, 'flows:webhook-secret');
  }

  async create(scope: Scope, input: CreateFlowInput): Promise<Flow> {
    const { trigger, definition } = await this.#validate(scope, input.trigger, input.definition);
    const now = this.#d.clock.now();
    const flow = await tenantEm(this.#d.orm, scope).transactional(async (tx) => {
      const f = tx.create(Flow, {
        id: newId('flw', now.getTime()), organizationId: scope.organizationId, mode: scope.mode, name: input.name, triggerType: trigger.type,
        trigger, definition, version: 1, webhookSecret: null, createdAt: now, updatedAt: now, deletedAt: null,
      });
      this.#webhookSecret(f, null);
      this.#snapshot(tx, f, now);
      recordAudit(tx, scope, { action: 'flow.created', resourceType: 'flow', resourceId: f.id, details: { trigger: trigger.type } }, now);
      return f;
    });
    await this.#d.scheduler.sync(flow);
    return flow;
  }

  /**
   * Applies an update under a row lock: of concurrent updates with the same expected version the
   * first to lock wins, the others find the version moved (409 CONFLICT, `details.current_version`).
   */
  async update(scope: Scope, input: UpdateFlowInput): Promise<Flow> {
    if (input.name === undefined && input.trigger === undefined && input.definition === undefined) {
      throw new ServiceError('VALIDATION_ERROR', 'Give at least one of name, trigger and definition', { field: 'definition' });
    }
    const current = await this.get(scope, input.id);
    const checked = await this.#validate(scope, input.trigger ?? current.trigger, input.definition ?? current.definition,
      { trigger: input.trigger !== undefined, definition: input.definition !== undefined });
    const now = this.#d.clock.now();
    const flow = await tenantEm(this.#d.orm, scope).transactional(async (tx) => {
      const f = await tx.findOne(Flow, { id: input.id, deletedAt: null }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!f) throw notFound('Flow', input.id);
      if (input.expected_version != null && input.expected_version !== f.version) {
        throw new ServiceError('CONFLICT', `Flow is at version ${f.version}, not ${input.expected_version}; read it again and reapply your change`,
          { field: 'expected_version', current_version: f.version, expected_version: input.expected_version });
      }
      const previousType = f.triggerType;
      if (input.name !== undefined) f.name = input.name;
      f.trigger = checked.trigger;
      f.triggerType = checked.trigger.type;
      f.definition = checked.definition;
      f.version += 1;
      f.updatedAt = now;
      this.#webhookSecret(f, previousType);
      this.#snapshot(tx, f, now);
      recordAudit(tx, scope, { action: 'flow.updated', resourceType: 'flow', resourceId: f.id, details: { version: f.version } }, now);
      return f;
    });
    await this.#d.scheduler.sync(flow);
    return flow;
  }

  /** Soft delete: the flow disappears from reads and starts nothing; running executions finish. */
  async remove(scope: Scope, id: string): Promise<void> {
    const now = this.#d.clock.now();
    const flow = await tenantEm(this.#d.orm, scope).transactional(async (tx) => {
      const f = await tx.findOne(Flow, { id, deletedAt: null }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!f) throw notFound('Flow', id);
      f.deletedAt = now;
      f.updatedAt = now;
      recordAudit(tx, scope, { action: 'flow.deleted', resourceType: 'flow', resourceId: f.id, details: {} }, now);
      return f;
    });
    await this.#d.scheduler.sync(flow);
  }

  async get(scope: TenantRef, id: string): Promise<Flow> {
    const f = await tenantEm(this.#d.orm, scope).findOne(Flow, { id, deletedAt: null });
    if (!f) throw notFound('Flow', id);
    return f;
  }

  async list(scope: Scope, page: PageRequest): Promise<Page<Flow>> {
    return this.#d.cursors.findPage(tenantEm(this.#d.orm, scope), Flow, scope, { list: 'flows' }, page, { deletedAt: null });
  }

  async getVersion(scope: Scope, id: string, version: number): Promise<FlowVersion> {
    await this.get(scope, id);
    const v = await tenantEm(this.#d.orm, scope).findOne(FlowVersion, { flowId: id, version });
    if (!v) throw notFound('Flow version', `${id}@${version}`);
    return v;
  }

  async listVersions(scope: Scope, input: PageRequest & { id: string }): Promise<Page<FlowVersion>> {
    await this.get(scope, input.id);
    return this.#d.cursors.findPage(tenantEm(this.#d.orm, scope), FlowVersion, scope, { list: 'flow_versions', filters: { flow: input.id } }, input, { flowId: input.id });
  }

  /** A live flow by id across tenants (webhook callbacks, schedules), with its webhook secret opened. */
  async findForTrigger(id: string): Promise<{ flow: Flow; webhookSecret: string | null } | null> {
    const f = await this.#d.orm.em.fork({ clear: true }).findOne(Flow, { id, deletedAt: null }, ALL_TENANTS);
    if (!f) return null;
    return { flow: f, webhookSecret: f.webhookSecret ? this.#sealer.open(f.webhookSecret) : null };
  }

  /** A webhook trigger gets a secret when it is set (shown once); other triggers keep none. */
  #webhookSecret(f: Flow, previousType: string | null): void {
    if (f.triggerType !== 'webhook') {
      f.webhookSecret = null;
      return;
    }
    if (previousType === 'webhook' && f.webhookSecret) return;
    const secret = `whsec_${randomBytes(24).toString('hex')}`;
    f.webhookSecret = this.#sealer.seal(secret);
    revealedSecrets.set(f, secret);
  }

  #snapshot(tx: EntityManager, f: Flow, now: Date): void {
    tx.create(FlowVersion, {
      id: newId('flv', now.getTime()), organizationId: f.organizationId, mode: f.mode, flowId: f.id, version: f.version,
      name: f.name, trigger: f.trigger, definition: f.definition, createdAt: now,
    });
  }

  async #validate(tenant: TenantRef, rawTrigger: unknown, rawDefinition: unknown, changed = { trigger: true, definition: true }): Promise<{ trigger: FlowTrigger; definition: FlowDefinition }> {
    if (rawTrigger === undefined || rawTrigger === null) throw new ServiceError('MISSING_REQUIRED_FIELD', 'trigger is required', { field: 'trigger' });
    if (rawDefinition === undefined || rawDefinition === null) throw new ServiceError('MISSING_REQUIRED_FIELD', 'definition is required', { field: 'definition' });
    const trigger = changed.trigger ? validateTrigger(rawTrigger, { eventTypes: this.#d.eventTypes, checkCron: this.#d.scheduler.checkCron }) : rawTrigger as FlowTrigger;
    if (!changed.definition) {
      if (changed.trigger) checkSelfTrigger(trigger, rawDefinition as FlowDefinition);
      return { trigger, definition: rawDefinition as FlowDefinition };
    }
    const definition = validateDefinition(rawDefinition);
    checkSelfTrigger(trigger, definition);
    definition.nodes.forEach((n, i) => {
      if (n.type !== 'http_request' || hasPlaceholder(String(n.config.url))) return;
      const verdict = checkWebhookUrl(String(n.config.url), this.#d.urlPolicy);
      if (!verdict.ok) throw new ServiceError('VALIDATION_ERROR', `definition.nodes.${i}.config.url: ${verdict.reason}`, { node: n.id, field: `definition.nodes.${i}.config.url` });
    });
    for (const ref of references(definition)) {
      const exists = ref.kind === 'template' ? await this.#d.messages.templateExists(tenant, ref.id)
        : ref.kind === 'list' ? await this.#d.contacts.listExists(tenant, ref.id)
          : await this.#agentExists(tenant, ref.id, ref);
      if (!exists) throw new ServiceError('VALIDATION_ERROR', `${ref.field}: no ${ref.kind} ${ref.id} in this account`, { node: ref.node, field: ref.field, value: ref.id });
    }
    return { trigger, definition };
  }

  async #agentExists(tenant: TenantRef, id: string, ref: { node: string; field: string }): Promise<boolean> {
    const agents = this.#d.agents();
    if (!agents) throw new ServiceError('VALIDATION_ERROR', `${ref.field}: agent nodes need the agents context, which is not installed`, { node: ref.node, field: ref.field });
    return agents.agentExists(tenant, id);
  }
}
