/**
 * The durable execution engine. An execution is pinned to the flow version that started it. The
 * work still to do is a pg-boss job (`flows.step`, data `{ executionId, seq }`, a job id derived
 * from both, so a step is enqueued once). A step job is idempotent: it does nothing unless the
 * execution is still at that step (`cursor`), checked under the execution's row lock in the
 * transaction that records the step and advances the cursor. The job then runs the steps after it
 * inline, in the same transaction, while they are internal (INLINE_STEPS at most); what is left (a
 * node that calls out, a wait still to come) is enqueued as the next job in that transaction.
 * Step jobs running at one moment are gathered (platform/db/batcher.ts): one transaction per
 * tenant locks their executions in id order (plain rows, no unit of work: executions.rows.ts),
 * their messages are written with messaging's one acceptance statement (SendBatch), the step log,
 * events, execution updates and the jobs of what is left with one statement.
 * A crash anywhere rolls the whole transaction back, and the retried job runs the same steps again
 * with nothing of the first attempt committed: a message is written (and so sent) once. Waits are
 * jobs scheduled for later (`resume`), not sleeping processes; a reply and a timeout race for the
 * same step and the lock lets exactly one of them move the execution on.
 */
import { colonKeyedJobId } from '../../platform/jobs/jobIds.ts';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Transaction } from 'kysely';
import { Batcher } from '../../platform/db/batcher.ts';
import { sqlClient } from '../../platform/db/sql.ts';
import type { SendBatch } from '../messaging/messaging.ports.ts';
import type { Clock } from '../../platform/clock.ts';
import type { Scope } from '../../platform/auth/scope.ts';
import { newId } from '../../platform/ids.ts';
import { tenantEm, type TenantRef } from '../../platform/db/tenant.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Logger } from '../../platform/logger.ts';
import type { PhiCodec } from '../../platform/phi.ts';
import { FlowVersion, type ExecutionError, type ExecutionStatus, type FlowExecution, type FlowStep } from './flows.entities.ts';
import { addEvent, ExecutionRows, stepWrites, type StepWrites } from './executions.rows.ts';
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
  jobs: Pick<Jobs, 'insertStatement'>;
  nodes: NodeRunner;
  phi: FlowPhi;
  maxSteps: number;
  /** Gathered step jobs run at once (each batch is one transaction per tenant); default 2. */
  maxInFlight?: number;
  /** Step jobs in one gathered batch at most; default 64. */
  maxBatch?: number;
};

/**
 * Steps one job runs at most, inline in its transaction (a loop of internal nodes goes on in the
 * next job, so one transaction stays short).
 */
export const INLINE_STEPS = 32;

/** A job of a step left for later (the next step's, or a wait's resume at its time). */
type StepEntry = { data: StepJob; scope: Scope; id: string; startAfter?: Date };
type ScopedJob = { scope: Scope; job: StepJob };
/** What follows a recorded step: nothing (the execution ended), the next step, or the wait's resume. */
type Then = { kind: 'done' } | { kind: 'step'; seq: number } | { kind: 'wait'; until: Date; resume: 'timer' | 'timeout'; step: FlowStep };


type Compiled = { def: FlowDefinition; byId: Map<string, FlowNode> };

export class ExecutionEngine {
  readonly #d: EngineDeps;
  /** Versions are immutable: compiled definitions are kept by `flow@version`. */
  readonly #cache = new Map<string, Compiled>();
  readonly #reading = new Map<string, Promise<FlowVersion>>();

  readonly #batcher: Batcher<ScopedJob, { later?: Promise<void> }>;
  readonly #rows: ExecutionRows;

  constructor(deps: EngineDeps) {
    this.#d = deps;
    this.#rows = new ExecutionRows({ orm: deps.orm, jobs: deps.jobs });
    this.#batcher = new Batcher((items) => this.#runGathered(items), { maxInFlight: deps.maxInFlight ?? 2, maxBatch: deps.maxBatch ?? 64, isolate: true });
  }

  async definition(em: EntityManager, flowId: string, version: number): Promise<Compiled> {
    const key = `${flowId}@${version}`;
    const hit = this.#cache.get(key);
    if (hit) return hit;
    // Executions of one batch run side by side: the first miss reads the version, the others wait for it.
    const reading = this.#reading.get(key) ?? em.findOneOrFail(FlowVersion, { flowId, version }).finally(() => this.#reading.delete(key));
    this.#reading.set(key, reading);
    const v = await reading;
    const compiled = this.#cache.get(key) ?? { def: v.definition, byId: new Map(v.definition.nodes.map((n) => [n.id, n])) };
    if (this.#cache.size > 2000) this.#cache.clear();
    this.#cache.set(key, compiled);
    return compiled;
  }

  /** Runs (or resumes) one step and the steps that follow it inline; a job for a step the execution has left does nothing. */
  async runStep(scope: Scope, job: StepJob): Promise<void> {
    await this.runSteps([{ scope, job }]);
  }

  /**
   * A step job, gathered with the step jobs being run at the same moment (the jobs of one fetch,
   * and of the other fetchers while a batch runs): platform/db/batcher.ts's group execution, as
   * messaging's acceptance uses. A batch that fails as a whole is run again job by job.
   */
  async submit(scope: Scope, job: StepJob): Promise<void> {
    const { later } = await this.#batcher.submit({ scope, job });
    await later;
  }

  /**
   * One transaction per tenant; the jobs whose step calls out then run on their own, side by side
   * and outside the batch (its slot is free for the next one while they wait on the network).
   */
  async #runGathered(items: ScopedJob[]): Promise<({ later?: Promise<void> } | Error)[]> {
    const byTenant = new Map<string, ScopedJob[]>();
    for (const item of items) {
      const key = `${item.scope.organizationId}:${item.scope.mode}`;
      byTenant.set(key, [...(byTenant.get(key) ?? []), item]);
    }
    const external = new Set<ScopedJob>();
    for (const group of byTenant.values()) for (const item of await this.#runTogether(group)) external.add(item);
    const later = this.#runExternals([...external]);
    return items.map((item) => {
      const done = later.get(item);
      // Awaited by the job's own `submit`; marked handled here so a failure is not reported before it is.
      done?.catch(() => {});
      return done ? { later: done } : {};
    });
  }

  /** Jobs whose step calls out: executions side by side, the jobs of one execution one after the other. */
  #runExternals(items: readonly ScopedJob[]): Map<ScopedJob, Promise<void>> {
    const runs = new Map<ScopedJob, Promise<void>>();
    const last = new Map<string, Promise<void>>();
    for (const item of items) {
      const before = last.get(item.job.executionId) ?? Promise.resolve();
      const run = before.catch(() => {}).then(() => this.#runExternal(item.scope, item.job));
      last.set(item.job.executionId, run);
      runs.set(item, run);
    }
    return runs;
  }

  /**
   * Runs step jobs of one tenant in one transaction: the executions are locked together (in id
   * order), each job that is still current runs its step and then, inline, the steps after it while
   * they are internal (condition, send_message, a wait whose time has come, end, …), up to
   * INLINE_STEPS. Executions run side by side (their sends share messaging's batched checks); the
   * jobs of one execution one after the other. The messages sent are written with one statement
   * (messaging's SendBatch); the step rows, events, execution updates and the jobs of what is left
   * (a later wait, an external node) with one more (ExecutionRows.write). A job whose
   * step calls out (http_request, contact changes, agent) runs on its own afterwards, the call
   * before its transaction.
   */
  async runSteps(items: readonly ScopedJob[]): Promise<void> {
    await Promise.all(this.#runExternals(await this.#runTogether(items)).values());
  }

  /** The transaction of `runSteps`; returns the jobs whose step calls out (not run yet). */
  async #runTogether(items: readonly ScopedJob[]): Promise<ScopedJob[]> {
    const external: ScopedJob[] = [];
    if (items.length === 0) return external;
    const sends = this.#d.nodes.sendBatch();
    const tenant = items[0]!.scope;
    await tenantEm(this.#d.orm, tenant).transactional(async (tx) => {
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      const perExecution = new Map<string, ScopedJob[]>();
      for (const item of items) perExecution.set(item.job.executionId, [...(perExecution.get(item.job.executionId) ?? []), item]);
      const locked = await this.#rows.executions(trx, tenant, [...perExecution.keys()]);
      const queue: StepEntry[] = [];
      const writes = stepWrites();
      await Promise.all(locked.map(async (ex) => {
        for (const { scope, job } of perExecution.get(ex.id) ?? []) {
          if (!this.#current(ex, job)) continue;
          const compiled = await this.definition(tx, ex.flowId, ex.flowVersion);
          const node = ex.currentNodeId ? compiled.byId.get(ex.currentNodeId) : undefined;
          if (node && !job.resume && EXTERNAL.has(node.type) && ex.stepsCount < this.#d.maxSteps) {
            external.push({ scope, job });
            continue;
          }
          await this.#advance(tx, writes, scope, compiled, await this.#state(ex), job, undefined, sends, queue);
        }
      }));
      await sends.commit(tx);
      await this.#rows.write(trx, writes, queue, STEP_JOB);
    });
    sends.committed();
    return external;
  }

  /** A step that calls out: the call first (with the step's idempotency key), then its outcome and the steps after it, if the execution is still there. */
  async #runExternal(scope: Scope, job: StepJob): Promise<void> {
    const em = tenantEm(this.#d.orm, scope);
    const [ex] = await this.#rows.executions(sqlClient(this.#d.orm), scope, [job.executionId], false);
    if (!ex || !this.#current(ex, job)) return;
    const compiled = await this.definition(em, ex.flowId, ex.flowVersion);
    const node = ex.currentNodeId ? compiled.byId.get(ex.currentNodeId) : undefined;
    // What the nodes do is caused by this execution: messages they send and contact changes they make carry the next depth (Scope.chainDepth).
    const started = this.#d.clock.now();
    const early = node && !job.resume && EXTERNAL.has(node.type) && ex.stepsCount < this.#d.maxSteps
      ? { outcome: await this.#d.nodes.external({ ...scope, chainDepth: ex.depth + 1 }, await this.#state(ex), compiled.def, node, `${ex.id}:${job.seq}`), started } : undefined;
    const sends = this.#d.nodes.sendBatch();
    await em.transactional(async (tx) => {
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      const [cur] = await this.#rows.executions(trx, scope, [job.executionId]);
      if (!cur || !this.#current(cur, job)) return;
      const queue: StepEntry[] = [];
      const writes = stepWrites();
      await this.#advance(tx, writes, scope, compiled, await this.#state(cur), job, early, sends, queue);
      await sends.commit(tx);
      await this.#rows.write(trx, writes, queue, STEP_JOB);
    });
    sends.committed();
  }

  /**
   * Runs the job's step, then the steps after it in this transaction while they are internal and
   * fewer than INLINE_STEPS ran (a wait whose time has come resumes at once); what is left becomes
   * a job in `queue` (the next step, or the wait's resume at its time).
   */
  async #advance(tx: EntityManager, writes: StepWrites, scope: Scope, compiled: Compiled, state: RunState, job: StepJob, early: { outcome: Outcome; started: Date } | undefined, sends: SendBatch, queue: StepEntry[]): Promise<void> {
    const { def, byId } = compiled;
    const { ex } = state;
    const acting: Scope = { ...scope, chainDepth: ex.depth + 1 };
    let seq = job.seq;
    let resume: Pick<StepJob, 'resume' | 'reply'> | undefined = job.resume ? { resume: job.resume, reply: job.reply } : undefined;
    let waiting: FlowStep | undefined;
    for (let ran = 1; ; ran++) {
      const node = ex.currentNodeId ? byId.get(ex.currentNodeId) : undefined;
      if (!node) {
        this.#finish(writes, state, 'completed', null);
        return;
      }
      const started = early?.started ?? this.#d.clock.now();
      let outcome: Outcome;
      if (resume) outcome = resumed(resume, ex);
      else if (ex.stepsCount >= this.#d.maxSteps) outcome = { kind: 'fail', error: { code: 'STEP_LIMIT', message: `executions run at most ${this.#d.maxSteps} steps` } };
      else if (early) outcome = early.outcome;
      else outcome = await this.#d.nodes.internal(tx, acting, state, def, node, seq, sends);
      const then = await this.#apply(tx, writes, state, def, node, seq, outcome, started, resume !== undefined, waiting);
      early = undefined;
      resume = undefined;
      waiting = undefined;
      if (then.kind === 'done') return;
      const more = ran < INLINE_STEPS;
      if (then.kind === 'wait') {
        if (more && then.resume === 'timer' && then.until.getTime() <= this.#d.clock.now().getTime()) {
          resume = { resume: 'timer' };
          waiting = then.step;
          continue;
        }
        queue.push({ data: { executionId: ex.id, seq, resume: then.resume }, scope, startAfter: then.until, id: stepJobId(ex.id, seq, then.resume) });
        return;
      }
      seq = then.seq;
      const upcoming = byId.get(ex.currentNodeId ?? '');
      if (more && !(upcoming && EXTERNAL.has(upcoming.type))) continue;
      queue.push({ data: { executionId: ex.id, seq }, scope, id: stepJobId(ex.id, seq) });
      return;
    }
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

  /** Records a step's outcome and moves the execution on; says what comes next (the caller runs it inline or enqueues its job). */
  async #apply(tx: EntityManager, writes: StepWrites, state: RunState, def: FlowDefinition, node: FlowNode, seq: number, o: Outcome, started: Date, resumed: boolean, pending: FlowStep | undefined): Promise<Then> {
    const { ex, codec } = state;
    const now = this.#d.clock.now();
    // Only a resumed wait has a row already (written when it started waiting, or just now inline).
    let step = pending ?? (resumed ? await this.#resumedStep(tx, writes, ex, seq) : null);
    if (!step) {
      step = {
        id: newId('fst', now.getTime()), organizationId: ex.organizationId, mode: ex.mode, executionId: ex.id, seq, nodeId: node.id, nodeType: node.type,
        status: 'completed', input: null, output: null, error: null, phi: null, startedAt: started, finishedAt: null, durationMs: null,
      };
    }
    writes.steps.set(step.id, step);
    writes.executions.add(ex);
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
      this.#stepEvent(writes, ex, step, now);
      return { kind: 'wait', until: o.until, resume: o.resume, step };
    }
    step.finishedAt = now;
    step.durationMs = Math.max(0, now.getTime() - step.startedAt.getTime());
    ex.stepsCount += 1;
    if (o.kind === 'fail') {
      step.status = 'failed';
      log.error = { node: node.id, ...o.error };
      this.#storeStep(step, log, codec);
      this.#stepEvent(writes, ex, step, now);
      this.#finish(writes, state, 'failed', { node: node.id, ...o.error });
      return { kind: 'done' };
    }
    step.status = 'completed';
    log.output = { ...(log.output ?? {}), ...o.output };
    this.#storeStep(step, log, codec);
    state.ctx = { ...state.ctx, steps: { ...(state.ctx.steps as Record<string, unknown> | undefined), [node.id]: o.output } };
    ex.waiting = null;
    const next = o.kind === 'next' ? nextNode(def, node.id, o.branch) : undefined;
    if (!next) {
      this.#stepEvent(writes, ex, step, now);
      this.#finish(writes, state, 'completed', null);
      return { kind: 'done' };
    }
    ex.status = 'running';
    ex.cursor = seq + 1;
    ex.currentNodeId = next;
    ex.sequence += 1;
    ex.updatedAt = now;
    this.#storeExecution(state, null);
    this.#stepEvent(writes, ex, step, now);
    return { kind: 'step', seq: seq + 1 };
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

  /** A waiting step being resumed, read from its table (and written back as an update). */
  async #resumedStep(tx: EntityManager, writes: StepWrites, ex: FlowExecution, seq: number): Promise<FlowStep | null> {
    const step = await this.#rows.step(tx.getTransactionContext<Transaction<unknown>>()!, ex, seq);
    if (step) writes.loaded.add(step.id);
    return step;
  }

  /** Ends an execution (completed, failed or cancelled) with its event. */
  #finish(writes: StepWrites, state: RunState, status: 'completed' | 'failed' | 'cancelled', error: ExecutionError | null): void {
    const { ex } = state;
    writes.executions.add(ex);
    const now = this.#d.clock.now();
    ex.status = status;
    const stored = this.#storeExecution(state, error);
    ex.waiting = null;
    ex.currentNodeId = null;
    ex.finishedAt = now;
    ex.updatedAt = now;
    ex.sequence += 1;
    addEvent(writes, ex, {
      type: `flow.execution.${status}`, resourceType: 'flow_execution', resourceId: ex.id, sequence: ex.sequence,
      data: { execution_id: ex.id, flow_id: ex.flowId, flow_version: ex.flowVersion, status, steps: ex.stepsCount, ...(stored ? { error: stored } : {}), depth: ex.depth + 1 },
    }, now);
  }

  #stepEvent(writes: StepWrites, ex: FlowExecution, step: FlowStep, now: Date): void {
    addEvent(writes, ex, {
      type: 'flow.execution.step', resourceType: 'flow_execution', resourceId: ex.id, sequence: ex.sequence,
      data: { execution_id: ex.id, flow_id: ex.flowId, step_id: step.id, seq: step.seq, node_id: step.nodeId, node_type: step.nodeType, step_status: step.status, status: ex.status },
    }, now);
  }

  /** Cancels an active execution: its pending step jobs then find it cancelled and do nothing. */
  async cancel(tenant: TenantRef, executionId: string): Promise<FlowExecution | null> {
    return tenantEm(this.#d.orm, tenant).transactional(async (tx) => {
      const trx = tx.getTransactionContext<Transaction<unknown>>()!;
      const [ex] = await this.#rows.executions(trx, tenant, [executionId]);
      if (!ex) return null;
      if (ACTIVE.has(ex.status)) {
        const writes = stepWrites();
        this.#finish(writes, await this.#state(ex), 'cancelled', null);
        await this.#rows.write(trx, writes, [], STEP_JOB);
      }
      return ex;
    });
  }
}

/** The outcome of a resumed wait: the timer went off, the reply timed out, or the reply came. */
function resumed(job: Pick<StepJob, 'resume' | 'reply'>, ex: FlowExecution): Outcome {
  if (job.resume === 'reply' && job.reply) return { kind: 'next', output: { replied: true, message: job.reply }, branch: 'reply' };
  if (job.resume === 'timeout') return { kind: 'next', output: { replied: false, waited_for: ex.waiting?.address ?? null }, branch: 'timeout' };
  return { kind: 'next', output: { waited_until: ex.waiting?.until ?? null } };
}
