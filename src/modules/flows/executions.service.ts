/**
 * Executions as the API sees them: started by the `api` trigger (POST /v1/flows/{id}/executions),
 * by a flow's webhook (signed with a timestamp and a delivery id, through the provider-callback
 * route: flows.webhook.ts) or by its schedule; listed across flows most recent first; read with
 * their step log; cancelled. Starts over a limit are refused with the limit's error (429).
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import type { Clock } from '../../platform/clock.ts';
import { systemScope, type Scope } from '../../platform/auth/scope.ts';
import { ServiceError, notFound } from '../../platform/errors.ts';
import { tenantEm } from '../../platform/db/tenant.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { CursorCodec, Page } from '../../platform/pagination.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import { organizationPlan } from '../../platform/tenancy/plan.ts';
import { Flow, FlowExecution, FlowStep } from './flows.entities.ts';
import type { TriggerType } from './flows.graph.ts';
import type { FlowsService } from './flows.service.ts';
import { ACTIVE, type ExecutionEngine } from './executions.engine.ts';
import { admit, insertStarts, startCounts, type Query, type StartLimits } from './executions.starts.ts';
import { checkWebhookSignature, parseWebhookSignature } from './flows.webhook.ts';
import type { ListExecutionsInput } from './flows.schemas.ts';
import type { FlowPhi } from './flows.phi.ts';

export type ExecutionView = FlowExecution & { steps?: FlowStep[] };

export type ExecutionsDeps = {
  orm: MikroORM;
  clock: Clock;
  cursors: CursorCodec;
  jobs: Pick<Jobs, 'insertStatement'>;
  flows: FlowsService;
  engine: ExecutionEngine;
  phi: FlowPhi;
  limits: StartLimits;
  /** How far from now a webhook trigger call's signed time may be. */
  webhookToleranceSeconds: number;
};

/** What a start is given besides its flow: trigger type and context, input, and a webhook call's delivery id. */
type StartRequest = { type: TriggerType; trigger: Record<string, unknown>; input: Record<string, unknown>; deliveryId?: string };

export class ExecutionsService {
  readonly #d: ExecutionsDeps;

  constructor(deps: ExecutionsDeps) {
    this.#d = deps;
  }

  /** The `api` trigger: starts the flow's current version with `input`; the execution runs on the workers. */
  async startApi(scope: Scope, flowId: string, input: Record<string, unknown>): Promise<FlowExecution> {
    const ex = await this.#start(scope, flowId, { type: 'api', trigger: { type: 'api', request_id: scope.requestId }, input });
    return (await this.#d.phi.executions(scope, [ex], 'flows.startExecution'))[0]!;
  }

  /**
   * A webhook trigger call, signed as flows.webhook.ts describes. A delivery id starts at most one
   * execution of the flow: a replay (or a retry with the same id) answers with the execution the
   * first call started.
   */
  async startWebhook(raw: string, signature: string | undefined): Promise<FlowExecution> {
    const sig = parseWebhookSignature(signature);
    const { flowId } = sig;
    const found = await this.#d.flows.findForTrigger(flowId);
    if (!found || found.flow.triggerType !== 'webhook' || !found.webhookSecret) {
      throw new ServiceError('UNAUTHORIZED', `No flow ${flowId} with a webhook trigger`, { header: 'X-Provider-Signature' });
    }
    checkWebhookSignature(sig, found.webhookSecret, raw, this.#d.clock.now(), this.#d.webhookToleranceSeconds);
    let body: unknown;
    try {
      body = raw.trim() === '' ? {} : JSON.parse(raw);
    } catch {
      throw new ServiceError('VALIDATION_ERROR', 'The webhook body must be JSON', { field: 'body' }, { status: 400 });
    }
    const input = body !== null && typeof body === 'object' && !Array.isArray(body) ? body as Record<string, unknown> : { body };
    const scope = systemScope(found.flow.organizationId, found.flow.mode, await this.#planOf(found.flow.organizationId), `webhook:${flowId}`);
    return this.#start(scope, flowId, { type: 'webhook', trigger: { type: 'webhook', delivery_id: sig.deliveryId }, input, deliveryId: sig.deliveryId });
  }

  /** A schedule firing (one pg-boss job per tick across instances); a flow no longer scheduled starts nothing. */
  async startScheduled(flowId: string, firedAt: Date): Promise<FlowExecution | null> {
    const found = await this.#d.flows.findForTrigger(flowId);
    if (!found || found.flow.triggerType !== 'schedule') return null;
    const scope = systemScope(found.flow.organizationId, found.flow.mode, await this.#planOf(found.flow.organizationId), `schedule:${flowId}`);
    return this.#start(scope, flowId, { type: 'schedule', trigger: { type: 'schedule', fired_at: firedAt.toISOString() }, input: { fired_at: firedAt.toISOString() } });
  }

  async #start(scope: Scope, flowId: string, req: StartRequest): Promise<FlowExecution> {
    const now = this.#d.clock.now();
    // Looked up before the transaction: inside it, the start holds its connection and the tenant's start lock (activeCounts).
    const codec = await this.#d.phi.writer(scope.organizationId);
    return tenantEm(this.#d.orm, scope).transactional(async (tx) => {
      const query: Query = (sql, params) => sqlQuery(tx.getTransactionContext<Transaction<unknown>>()!, sql, params);
      // A share lock on the flow: a concurrent DELETE waits for this start (or this start sees it deleted).
      const rows = await query<{ version: number }>('select version from flows where id = $1 and organization_id = $2 and mode = $3 and deleted_at is null for share', [flowId, scope.organizationId, scope.mode]);
      if (rows.length === 0) throw notFound('Flow', flowId);
      const { def } = await this.#d.engine.definition(tx, flowId, rows[0]!.version);
      // Under the tenant's start lock: a replayed delivery finds the execution its first call started (committed before the lock was ours).
      const counts = await startCounts(query, [{ scope, flowId }], now, this.#d.limits.perMinute);
      if (req.deliveryId !== undefined) {
        const earlier = await query<{ id: string }>('select id from flow_executions where organization_id = $1 and mode = $2 and flow_id = $3 and delivery_id = $4',
          [scope.organizationId, scope.mode, flowId, req.deliveryId]);
        if (earlier[0]) return tx.findOneOrFail(FlowExecution, { id: earlier[0].id });
      }
      const refusal = admit(counts, scope, flowId, this.#d.limits, now);
      if (refusal?.code === 'RATE_LIMIT_EXCEEDED') {
        throw new ServiceError('RATE_LIMIT_EXCEEDED', `Flow ${flowId} started ${refusal.limit} executions in the last 60 s; retry in ${refusal.retryAfter} s`,
          { retry_after: refusal.retryAfter, limit: refusal.limit, window: '60s', flow_id: flowId }, { headers: { 'Retry-After': String(refusal.retryAfter) } });
      }
      if (refusal?.code === 'QUOTA_EXCEEDED') {
        throw new ServiceError('QUOTA_EXCEEDED', `At most ${refusal.limit} executions may run or wait at once; retry when some have finished`, { limit: refusal.limit, active: refusal.active });
      }
      const start = {
        scope, flow: { id: flowId, version: rows[0]!.version, definition: def }, triggerType: req.type, trigger: req.trigger, input: req.input, depth: 0,
        ...(req.deliveryId !== undefined ? { deliveryId: req.deliveryId } : {}),
      };
      const [started] = await insertStarts(query, this.#d.jobs, [start], now, async () => codec);
      return tx.findOneOrFail(FlowExecution, { id: started!.id });
    });
  }

  async #planOf(organizationId: string): Promise<Plan> {
    return (await organizationPlan(sqlClient(this.#d.orm), organizationId)) ?? 'starter';
  }

  async list(scope: Scope, input: ListExecutionsInput): Promise<Page<FlowExecution>> {
    const filters = { flow: input.flow_id ?? null, status: input.status ?? null };
    const where: Record<string, unknown> = {};
    if (input.flow_id) where.flowId = input.flow_id;
    if (input.status) where.status = input.status;
    const page = await this.#d.cursors.findPage(tenantEm(this.#d.orm, scope), FlowExecution, scope, { list: 'flow_executions', filters }, input, where);
    return { ...page, items: await this.#d.phi.executions(scope, page.items, 'flows.listExecutions') };
  }

  /** An execution with its step log (in step order), as this caller may see it (HIPAA mode). `flowId` must be the flow it belongs to. */
  async get(scope: Scope, flowId: string | null, executionId: string): Promise<ExecutionView> {
    const em = tenantEm(this.#d.orm, scope);
    const ex = await em.findOne(FlowExecution, { id: executionId, ...(flowId ? { flowId } : {}) });
    if (!ex) throw notFound('Flow execution', executionId);
    const steps = await em.find(FlowStep, { executionId }, { orderBy: { seq: 'asc' } });
    return (await this.#d.phi.executions(scope, [{ ...ex, steps }], 'flows.getExecution'))[0]!;
  }

  async steps(scope: Scope, executionId: string): Promise<FlowStep[]> {
    const rows = await tenantEm(this.#d.orm, scope).find(FlowStep, { executionId }, { orderBy: { seq: 'asc' } });
    return this.#d.phi.steps(scope, rows, 'flows.executionSteps');
  }

  async step(scope: Scope, stepId: string): Promise<FlowStep | null> {
    const row = await tenantEm(this.#d.orm, scope).findOne(FlowStep, { id: stepId });
    return row ? (await this.#d.phi.steps(scope, [row], 'flows.executionSteps'))[0]! : null;
  }

  async cancel(scope: Scope, flowId: string | null, executionId: string): Promise<ExecutionView> {
    const ex = await tenantEm(this.#d.orm, scope).findOne(FlowExecution, { id: executionId, ...(flowId ? { flowId } : {}) });
    if (!ex) throw notFound('Flow execution', executionId);
    const after = ACTIVE.has(ex.status) ? await this.#d.engine.cancel(scope, executionId) : ex;
    if (after && after.status !== 'cancelled' || !ACTIVE.has(ex.status)) {
      const status = after?.status ?? ex.status;
      throw new ServiceError('CONFLICT', `Only running or waiting executions can be cancelled; this one is ${status}`, { status });
    }
    return this.get(scope, flowId, executionId);
  }

  /** Flow ids whose trigger is a schedule (for re-syncing pg-boss schedules at start). */
  async scheduledFlows(): Promise<Flow[]> {
    return this.#d.orm.em.fork({ clear: true }).find(Flow, { triggerType: 'schedule', deletedAt: null }, { filters: { tenant: false } });
  }
}
