/**
 * The durable execution engine. An execution is pinned to the flow version that started it; each
 * step runs as one pg-boss job (`flows.step`, data `{ executionId, seq }`, a job id derived from
 * both, so a step is enqueued once). A step job is idempotent: it does nothing unless the execution
 * is still at that step (`cursor`), checked under the execution's row lock in the transaction that
 * records the step, advances the cursor and enqueues the next step's job. Waits are jobs scheduled
 * for later (`resume`), not sleeping processes; a reply and a timeout race for the same step and
 * the lock lets exactly one of them move the execution on.
 */
import { colonKeyedJobId } from '../../platform/jobs/jobIds.ts';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import { emitEvent } from '../../platform/events/events.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Logger } from '../../platform/logger.ts';
import type { PhiCodec } from '../../platform/phi.ts';
import { FlowExecution, FlowStep, FlowVersion, type ExecutionError, type ExecutionStatus } from './flows.entities.ts';
import { openStep, sealExecution, sealStep, type FlowPhi } from './flows.phi.ts';
import { nextNode, type FlowDefinition, type FlowNode } from './flows.graph.ts';
import { EXTERNAL, type NodeRunner, type Outcome, type RunState } from './flows.nodes.ts';

export const STEP_JOB = 'flows.step';
export type Resume = 'timer' | 'timeout' | 'reply';
export type StepJob = { executionId: string; seq: number; resume?: Resume; reply?: { message_id: string; from: string; to: string; channel: string; body: string | null } };
export const ACTIVE: ReadonlySet<ExecutionStatus> = new Set(['running', 'waiting']);

/** A stable job id per execution step (and resume kind), so a step is enqueued once (the keying its stored ids have). */
export function stepJobId(executionId: string, seq: number, resume = ''): string {
  return colonKeyedJobId(executionId, seq, resume);
}

export type EngineDeps = {
  orm: MikroORM;
  clock: Clock;
  log: Logger;
  jobs: Pick<Jobs, 'enqueue'>;
  nodes: NodeRunner;
  phi: FlowPhi;
  maxSteps: number;
};


type Compiled = { def: FlowDefinition; byId: Map<string, FlowNode> };

export class ExecutionEngine {
  readonly #d: EngineDeps;
  /** Versions are immutable: compiled definitions are kept by `flow@version`. */
  readonly #cache = new Map<string, Compiled>();

  constructor(deps: EngineDeps) {
    this.#d = deps;
  }

  async definition(em: EntityManager, flowId: string, version: number): Promise<Compiled> {
    const key = `${flowId}@${version}`;
    const hit = this.#cache.get(key);
    if (hit) return hit;
    const v = await em.findOneOrFail(FlowVersion, { flowId, version });
    const compiled = { def: v.definition, byId: new Map(v.definition.nodes.map((n) => [n.id, n])) };
    if (this.#cache.size > 2000) this.#cache.clear();
    this.#cache.set(key, compiled);
    return compiled;
  }

  /** Runs (or resumes) one step; a job for a step the execution has left does nothing. */
  async runStep(scope: Scope, job: StepJob): Promise<void> {
    const em = tenantEm(this.#d.orm, scope);
    const ex = await em.findOne(FlowExecution, { id: job.executionId });
    if (!ex || !this.#current(ex, job)) return;
    const { def, byId } = await this.definition(em, ex.flowId, ex.flowVersion);
    const node = ex.currentNodeId ? byId.get(ex.currentNodeId) : undefined;
    const started = this.#d.clock.now();
    const key = `${ex.id}:${job.seq}`;
    // What the nodes do is caused by this execution: messages they send and contact changes they make carry the next depth (Scope.chainDepth).
    const acting: Scope = { ...scope, chainDepth: ex.depth + 1 };
    const early = node && !job.resume && EXTERNAL.has(node.type) && ex.stepsCount < this.#d.maxSteps
      ? await this.#d.nodes.external(acting, await this.#state(ex), def, node, key) : undefined;
    await em.transactional(async (tx) => {
      const cur = await tx.findOne(FlowExecution, { id: job.executionId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!cur || !this.#current(cur, job)) return;
      const state = await this.#state(cur);
      if (!node) {
        await this.#finish(tx, state, 'completed', null);
        return;
      }
      let outcome: Outcome;
      if (job.resume) outcome = resumed(job, cur);
      else if (cur.stepsCount >= this.#d.maxSteps) outcome = { kind: 'fail', error: { code: 'STEP_LIMIT', message: `executions run at most ${this.#d.maxSteps} steps` } };
      else outcome = early ?? await this.#d.nodes.internal(tx, acting, state, def, node, job.seq);
      await this.#apply(tx, scope, state, def, node, job.seq, outcome, started);
    });
  }

  /** An execution with its context opened and the codec its writes are sealed with (HIPAA mode; else null). */
  async #state(ex: FlowExecution): Promise<RunState> {
    const codec = await this.#d.phi.sealer(ex.organizationId, ex.phi);
    return { ex, ctx: await this.#d.phi.context(ex, codec), codec, sealed: codec !== null };
  }

  #current(ex: FlowExecution, job: StepJob): boolean {
    if (!ACTIVE.has(ex.status) || ex.cursor !== job.seq) return false;
    // A waiting execution moves only on a resume; a running one never does.
    return (ex.status === 'waiting') === (job.resume !== undefined);
  }

  async #apply(tx: EntityManager, scope: Scope, state: RunState, def: FlowDefinition, node: FlowNode, seq: number, o: Outcome, started: Date): Promise<void> {
    const { ex, codec } = state;
    const now = this.#d.clock.now();
    let step = await tx.findOne(FlowStep, { executionId: ex.id, seq });
    if (!step) {
      step = tx.create(FlowStep, {
        id: newId('fst', now.getTime()), organizationId: ex.organizationId, mode: ex.mode, executionId: ex.id, seq, nodeId: node.id, nodeType: node.type,
        status: 'completed', input: null, output: null, error: null, phi: null, startedAt: started, finishedAt: null, durationMs: null,
      });
    }
    // The step's content in clear (a waiting step resumed was sealed when it started waiting).
    const content = step.phi && codec ? openStep(step, codec) : step;
    const log = { input: content.input ?? null, output: content.output ?? null, error: content.error ?? null };
    if ('input' in o && o.input) log.input = o.input;
    if (o.kind === 'wait') {
      step.status = 'waiting';
      log.output = o.output;
      this.#storeStep(step, log, codec);
      ex.status = 'waiting';
      ex.waiting = o.waiting ?? null;
      ex.sequence += 1;
      ex.updatedAt = now;
      this.#storeExecution(state, null);
      this.#stepEvent(tx, ex, step, now);
      await this.#d.jobs.enqueue(STEP_JOB, { executionId: ex.id, seq, resume: o.resume } satisfies StepJob, { scope, em: tx, startAfter: o.until, id: stepJobId(ex.id, seq, o.resume) });
      return;
    }
    step.finishedAt = now;
    step.durationMs = Math.max(0, now.getTime() - step.startedAt.getTime());
    ex.stepsCount += 1;
    if (o.kind === 'fail') {
      step.status = 'failed';
      log.error = { node: node.id, ...o.error };
      this.#storeStep(step, log, codec);
      this.#stepEvent(tx, ex, step, now);
      await this.#finish(tx, state, 'failed', { node: node.id, ...o.error });
      return;
    }
    step.status = 'completed';
    log.output = { ...(log.output ?? {}), ...o.output };
    this.#storeStep(step, log, codec);
    state.ctx = { ...state.ctx, steps: { ...(state.ctx.steps as Record<string, unknown> | undefined), [node.id]: o.output } };
    ex.waiting = null;
    const next = o.kind === 'next' ? nextNode(def, node.id, o.branch) : undefined;
    if (!next) {
      this.#stepEvent(tx, ex, step, now);
      await this.#finish(tx, state, 'completed', null);
      return;
    }
    ex.status = 'running';
    ex.cursor = seq + 1;
    ex.currentNodeId = next;
    ex.sequence += 1;
    ex.updatedAt = now;
    this.#storeExecution(state, null);
    this.#stepEvent(tx, ex, step, now);
    await this.#d.jobs.enqueue(STEP_JOB, { executionId: ex.id, seq: seq + 1 } satisfies StepJob, { scope, em: tx, id: stepJobId(ex.id, seq + 1) });
  }

  /** A step's log in its columns: in clear, or sealed (HIPAA mode). */
  #storeStep(step: FlowStep, log: { input: Record<string, unknown> | null; output: Record<string, unknown> | null; error: ExecutionError | null }, codec: PhiCodec | null): void {
    Object.assign(step, codec ? sealStep(step.id, log, codec) : { ...log, phi: null });
  }

  /** The execution's context and error in their columns: in clear, or sealed (HIPAA mode); returns the error as stored. */
  #storeExecution(state: RunState, error: ExecutionError | null): ExecutionError | null {
    const { ex, codec } = state;
    if (!codec) {
      Object.assign(ex, { context: state.ctx, error, phi: null });
      return error;
    }
    Object.assign(ex, sealExecution(ex.id, state.ctx, error, codec));
    return ex.error ?? null;
  }

  /** Ends an execution (completed, failed or cancelled) with its event. */
  async #finish(tx: EntityManager, state: RunState, status: 'completed' | 'failed' | 'cancelled', error: ExecutionError | null): Promise<void> {
    const { ex } = state;
    const now = this.#d.clock.now();
    ex.status = status;
    const stored = this.#storeExecution(state, error);
    ex.waiting = null;
    ex.currentNodeId = null;
    ex.finishedAt = now;
    ex.updatedAt = now;
    ex.sequence += 1;
    emitEvent(tx, ex, {
      type: `flow.execution.${status}`, resourceType: 'flow_execution', resourceId: ex.id, sequence: ex.sequence,
      data: { execution_id: ex.id, flow_id: ex.flowId, flow_version: ex.flowVersion, status, steps: ex.stepsCount, ...(stored ? { error: stored } : {}), depth: ex.depth + 1 },
    }, now);
  }

  #stepEvent(tx: EntityManager, ex: FlowExecution, step: FlowStep, now: Date): void {
    emitEvent(tx, ex, {
      type: 'flow.execution.step', resourceType: 'flow_execution', resourceId: ex.id, sequence: ex.sequence,
      data: { execution_id: ex.id, flow_id: ex.flowId, step_id: step.id, seq: step.seq, node_id: step.nodeId, node_type: step.nodeType, step_status: step.status, status: ex.status },
    }, now);
  }

  /** Cancels an active execution: its pending step jobs then find it cancelled and do nothing. */
  async cancel(tenant: TenantRef, executionId: string): Promise<FlowExecution | null> {
    return tenantEm(this.#d.orm, tenant).transactional(async (tx) => {
      const ex = await tx.findOne(FlowExecution, { id: executionId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!ex) return null;
      if (ACTIVE.has(ex.status)) await this.#finish(tx, await this.#state(ex), 'cancelled', null);
      return ex;
    });
  }
}

/** The outcome of a resumed wait: the timer went off, the reply timed out, or the reply came. */
function resumed(job: StepJob, ex: FlowExecution): Outcome {
  if (job.resume === 'reply' && job.reply) return { kind: 'next', output: { replied: true, message: job.reply }, branch: 'reply' };
  if (job.resume === 'timeout') return { kind: 'next', output: { replied: false, waited_for: ex.waiting?.address ?? null }, branch: 'timeout' };
  return { kind: 'next', output: { waited_until: ex.waiting?.until ?? null } };
}
