/**
 * Flow executions whose worker died mid-batch (issue 44 §2, the reliability half of the flows
 * bench): every one completes, with exactly one message and one provider send. Executions are
 * started through the API while no worker runs; their step jobs are then left as a worker killed
 * with SIGKILL leaves them, in the three ways the bench's kills produced:
 * - held: `active` under the dead worker, its heartbeat stale (pg-boss's supervisor hands it back);
 * - spent: `failed`, its retries used up by earlier kills and expiries (the execution is `running`
 *   with no job left to move it: the stranded-execution sweep, `flows.sweep`, enqueues it again);
 * - gone: no job at all (deleted by pg-boss's retention: the sweep again).
 * Then, after every execution completed, the jobs of some are handed back once more as if their
 * worker had died after its transaction committed but before pg-boss recorded the job complete:
 * the retried job finds the execution past its step and sends nothing again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventuallyHolds } from './helpers/assertions.ts';

const EXECUTIONS = 12;
let gateway: TestApp;
let workers: TestApp | undefined;
let org: TestOrg;

const env = { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '0', SANDBOX_READ_AFTER_MS: '0', FLOWS_STEP_EXPIRE_SECONDS: '5', LOG_LEVEL: 'silent' };

beforeAll(async () => {
  gateway = await startTestApp({ clock: systemClock, workers: false, env });
  org = await gateway.createOrg('enterprise', 'Flows recovery');
});
afterAll(async () => {
  await workers?.close();
  await gateway?.close();
});

const FLOW = {
  name: 'Recovery',
  trigger: { type: 'api' },
  definition: {
    nodes: [
      { id: 'start', type: 'trigger' },
      { id: 'has_phone', type: 'condition', config: { rules: { field: 'input.phone', op: 'exists' } } },
      { id: 'greet', type: 'send_message', config: { channel: 'sms', to: '{{input.phone}}', body: 'Welcome back' } },
      { id: 'pause', type: 'wait', config: { seconds: 0 } },
      { id: 'done', type: 'end' },
    ],
    edges: [
      { from: 'start', to: 'has_phone' }, { from: 'has_phone', to: 'greet', branch: 'true' }, { from: 'has_phone', to: 'done', branch: 'false' },
      { from: 'greet', to: 'pause' }, { from: 'pause', to: 'done' },
    ],
  },
};

/** Per execution: its status (read through the API), messages written and provider sends. */
async function outcomes(flowId: string, ids: readonly string[]): Promise<{ id: string; status: string; messages: number; sends: number }[]> {
  const counts = await gateway.db.query<{ id: string; messages: number; sends: number }>(
    `select e.id,
            (select count(*)::int from messages m where m.metadata->>'flow_execution_id' = e.id) as messages,
            (select count(*)::int from messages m join sandbox_sends s on s.idempotency_key = m.id where m.metadata->>'flow_execution_id' = e.id) as sends
       from flow_executions e where e.id = any($1::text[])`, [ids]);
  const byId = new Map(counts.rows.map((r) => [r.id, r]));
  return Promise.all(ids.map(async (id) => {
    const r = await gateway.rest('GET', `/v1/flows/${flowId}/executions/${id}`, { key: org.testKey });
    return { id, status: r.body.data.status as string, messages: byId.get(id)?.messages ?? 0, sends: byId.get(id)?.sends ?? 0 };
  }));
}

const allDone = (rows: { status: string; sends: number }[]) => rows.every((r) => r.status === 'completed' && r.sends >= 1);

describe('executions whose worker died mid-batch', () => {
  it('all complete, each with exactly one message and one provider send', async () => {
    const created = await gateway.rest('POST', '/v1/flows', { key: org.testKey, body: FLOW });
    expect(created.status, created.text).toBe(201);
    const flowId: string = created.body.data.id;
    const ids: string[] = [];
    for (let i = 0; i < EXECUTIONS; i++) {
      const r = await gateway.rest('POST', `/v1/flows/${flowId}/executions`, { key: org.testKey, body: { input: { phone: `+1415555${String(2000 + i)}` } } });
      expect(r.status, r.text).toBe(201);
      ids.push(r.body.data.id);
    }
    const jobOf = async (id: string) => (await gateway.db.query<{ id: string }>(
      `select id from pgboss.job where name = 'flows.step' and data->'data'->>'executionId' = $1`, [id])).rows.map((r) => r.id);
    const third = EXECUTIONS / 3;
    const held = ids.slice(0, third);
    const spent = ids.slice(third, 2 * third);
    const gone = ids.slice(2 * third);
    for (const id of ids) expect(await jobOf(id)).toHaveLength(1);
    await gateway.db.query(
      `update pgboss.job set state = 'active', started_on = now() - interval '30 seconds', heartbeat_on = now() - interval '30 seconds'
        where name = 'flows.step' and data->'data'->>'executionId' = any($1::text[])`, [held]);
    await gateway.db.query(
      `update pgboss.job set state = 'failed', retry_count = retry_limit, completed_on = now()
        where name = 'flows.step' and data->'data'->>'executionId' = any($1::text[])`, [spent]);
    await gateway.db.query(`delete from pgboss.job where name = 'flows.step' and data->'data'->>'executionId' = any($1::text[])`, [gone]);
    // Started a while ago: past the step lease (FLOWS_STEP_EXPIRE_SECONDS).
    await gateway.db.query(`update flow_executions set updated_at = now() - interval '1 minute' where id = any($1::text[])`, [ids]);

    workers = await startTestApp({ clock: systemClock, workers: true, sameDatabaseAs: gateway, env });
    // The minute's sweep, run now (pg-boss runs the same job every minute).
    await workers.app.jobs.enqueue('flows.sweep', {});
    const done = await eventuallyHolds('every execution completed and sent', () => outcomes(flowId, ids), allDone, 60_000);
    expect(done.filter((r) => r.status !== 'completed')).toEqual([]);
    expect(done.filter((r) => r.messages !== 1 || r.sends !== 1)).toEqual([]);
    // The stranded ones were each enqueued once more by the sweep; the held ones were retried, not enqueued again.
    for (const id of [...spent, ...gone]) expect((await jobOf(id)).length).toBeGreaterThanOrEqual(1);
    for (const id of held) expect(await jobOf(id)).toHaveLength(1);

    // Workers that died after their transaction committed, before pg-boss recorded the jobs complete.
    await gateway.db.query(
      `update pgboss.job set state = 'active', started_on = now() - interval '30 seconds', heartbeat_on = now() - interval '30 seconds', completed_on = null
        where name = 'flows.step' and data->'data'->>'executionId' = any($1::text[])`, [ids.slice(0, 4)]);
    await eventuallyHolds('the handed-back jobs ran again', async () => (await gateway.db.query<{ n: number }>(
      `select count(*)::int as n from pgboss.job where name = 'flows.step' and state = 'active' and data->'data'->>'executionId' = any($1::text[])`, [ids])).rows[0]!.n,
    (n) => n === 0, 60_000);
    // Nothing is stranded now: a sweep finds nothing to enqueue.
    expect(await workers.app.services.flowStranded.sweep()).toBe(0);
    const after = await outcomes(flowId, ids);
    expect(after.filter((r) => r.status !== 'completed' || r.messages !== 1 || r.sends !== 1)).toEqual([]);
  }, 150_000);
});
