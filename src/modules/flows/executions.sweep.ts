/**
 * The stranded-execution sweep (`flows.sweep`, every minute): the backstop of the engine's promise
 * that every execution moves on. A running execution is moved by the step job at its cursor; that
 * job is retried when its worker dies (pg-boss heartbeats) or its handler runs past its lease, but
 * a job can still end without moving the execution: its retries used up by repeated kills or
 * expiries under load (the flows bench kills its workers every few seconds), or gone with pg-boss's
 * retention. Such an execution would stay `running` forever with no job to resume it.
 *
 * The sweep finds running executions not moved for longer than the step lease
 * (FLOWS_STEP_EXPIRE_SECONDS) that have no step job still to run (created, retry or active), in
 * one statement (the execution and job tables read in one snapshot: a step's transaction inserts
 * the next job with the execution's update, so a committed cursor always has its job visible), and
 * enqueues the job of the step at the cursor again. Its id is keyed by the cursor and the minute,
 * so sweeps of several instances in one minute enqueue it once. Running it again is harmless: a
 * step job does nothing unless the execution is still at its step (under the execution's row lock),
 * so whichever job gets there first moves it and the other finds the cursor moved; the step's
 * effects stay exactly once.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Clock } from '../../platform/clock.ts';
import { systemScope } from '../../platform/auth/scope.ts';
import { sqlClient, sqlQuery } from '../../platform/db/sql.ts';
import { PGBOSS_SCHEMA } from '../../platform/db/orm.ts';
import type { Mode } from '../../platform/db/tenant.ts';
import type { Jobs } from '../../platform/jobs/jobs.ts';
import type { Plan } from '../../platform/tenancy/tenancy.entities.ts';
import { STEP_JOB, stepJobId, type StepJob } from './executions.engine.ts';

export const SWEEP_JOB = 'flows.sweep';
/** Executions re-enqueued per sweep at most (the rest wait for the next minute). */
const SWEEP_BATCH = 5000;

export class StrandedExecutions {
  readonly #orm: MikroORM;
  readonly #clock: Clock;
  readonly #jobs: Pick<Jobs, 'insertStatement'>;
  readonly #leaseSeconds: number;

  constructor(deps: { orm: MikroORM; clock: Clock; jobs: Pick<Jobs, 'insertStatement'>; leaseSeconds: number }) {
    this.#orm = deps.orm;
    this.#clock = deps.clock;
    this.#jobs = deps.jobs;
    this.#leaseSeconds = deps.leaseSeconds;
  }

  /** Enqueues the step job of every stranded running execution again; returns how many. */
  async sweep(): Promise<number> {
    const now = this.#clock.now();
    const db = sqlClient(this.#orm);
    const rows = await sqlQuery<{ id: string; organization_id: string; mode: Mode; cursor: number; plan: Plan }>(db,
      `select e.id, e.organization_id, e.mode, e.cursor, case when e.mode = 'test' then coalesce(o.test_plan, o.plan) else o.plan end as plan
         from flow_executions e join organizations o on o.id = e.organization_id
        where e.status = 'running' and e.updated_at < $1
          and not exists (select 1 from ${PGBOSS_SCHEMA}.job j
                           where j.name = $2 and j.state in ('created', 'retry', 'active') and j.data->'data'->>'executionId' = e.id)
        order by e.id limit $3`,
      [new Date(now.getTime() - this.#leaseSeconds * 1000), STEP_JOB, SWEEP_BATCH]);
    if (rows.length === 0) return 0;
    const minute = Math.floor(now.getTime() / 60_000);
    const entries = rows.map((r) => ({
      data: { executionId: r.id, seq: r.cursor } satisfies StepJob,
      scope: systemScope(r.organization_id, r.mode, r.plan, `flows_sweep_${minute}`),
      id: stepJobId(r.id, r.cursor, `swept@${minute}`),
    }));
    const statement = await this.#jobs.insertStatement(STEP_JOB, entries);
    await sqlQuery(db, statement.text, [statement.value]);
    return rows.length;
  }
}
