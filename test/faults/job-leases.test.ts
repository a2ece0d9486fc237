/**
 * Fault scenario 1 (quick form): a worker killed while it held a delivery. A delivery is a row of
 * messaging's delivery queue: claimed, it is due again once its lease lapses, and another worker
 * sends it (once: the sandbox provider is idempotent by message id). The pg-boss form below is a
 * delivery job enqueued before the queue (an upgrade with sends in flight), for which, before job
 * heartbeats, such a job stayed `active` until its 300 s lease expired (the fault harness saw
 * deliveries stall for 5–6 minutes after a kill -9); now the supervisor hands it back once its
 * heartbeat is JOB_HEARTBEAT_SECONDS old, and another worker delivers the message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import { JOB_HEARTBEAT_SECONDS } from '../../src/platform/jobs/jobs.ts';
import { systemScope } from '../../src/platform/auth/scope.ts';
import { startTestApp, type TestApp } from '../helpers/testApp.ts';

let gateway: TestApp;
let workers: TestApp | undefined;
beforeAll(async () => {
  gateway = await startTestApp({ clock: systemClock, workers: false });
});
afterAll(async () => {
  await workers?.close();
  await gateway?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


/** The message's status once it is `wanted` or the deadline passed (polled every 200 ms). */
async function statusBy(messageId: string, wanted: string, deadline: number): Promise<string> {
  let status = 'queued';
  while (Date.now() < deadline && status !== wanted) {
    await sleep(200);
    status = (await gateway.db.query<{ status: string }>('select status from messages where id = $1', [messageId])).rows[0]!.status;
  }
  return status;
}
describe('a delivery held by a worker that died', () => {
  it('is due again once its lease lapses, and the message is delivered once', async () => {
    const org = await gateway.createOrg('enterprise');
    const sent = await gateway.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550101', body: 'claimed by a dead worker' } });
    expect(sent.status, sent.text).toBe(201);
    const messageId: string = sent.body.data.id;
    // A worker claimed it (attempt 1, the lease 3 s ahead) and was killed.
    const { rowCount } = await gateway.db.query(`update messaging_deliveries set attempts = 1, due_at = now() + interval '3 seconds' where message_id = $1`, [messageId]);
    expect(rowCount).toBe(1);
    workers = await startTestApp({ clock: systemClock, workers: true, sameDatabaseAs: gateway, env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '0' } });
    await sleep(1000);
    // Still leased: nobody sends it before the lease lapses.
    expect((await gateway.db.query('select status from messages where id = $1', [messageId])).rows[0].status).toBe('queued');
    const deadline = Date.now() + 30_000;
    expect(await statusBy(messageId, 'delivered', deadline)).toBe('delivered');
    let left = 1;
    while (Date.now() < deadline && left > 0) {
      left = (await gateway.db.query('select 1 from messaging_deliveries where message_id = $1', [messageId])).rowCount ?? 0;
      if (left > 0) await sleep(100);
    }
    expect(left).toBe(0);
    const { rows: [sends] } = await gateway.db.query<{ n: number }>('select count(*)::int as n from sandbox_sends where idempotency_key = $1', [messageId]);
    expect(sends!.n).toBe(1);
  }, 60_000);
});

describe('a delivery job (from before the delivery queue) held by a worker that died', () => {
  it('is handed back by its stale heartbeat, long before its lease expires, and the message is delivered', async () => {
    // No worker runs while the job is set up as a dead worker left it.
    await workers?.close();
    workers = undefined;
    const org = await gateway.createOrg('enterprise');
    const sent = await gateway.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'held by a dead worker' } });
    expect(sent.status, sent.text).toBe(201);
    const messageId: string = sent.body.data.id;
    // The send as it was queued before the delivery queue: a job instead of a row.
    await gateway.db.query('delete from messaging_deliveries where message_id = $1', [messageId]);
    await gateway.app.jobs.enqueue('messaging.deliver', { messageId }, { scope: systemScope(org.orgId, 'test', 'enterprise', 'req_test_lease') });
    const { rows: [job] } = await gateway.db.query<{ id: string; heartbeat_seconds: number | null; expire_seconds: number }>(
      `select id, heartbeat_seconds, expire_seconds from pgboss.job where name = 'messaging.deliver' and data->'data'->>'messageId' = $1`, [messageId]);
    expect(job).toMatchObject({ heartbeat_seconds: JOB_HEARTBEAT_SECONDS, expire_seconds: 300 });

    // A worker claimed it 30 s ago and was killed: active, its lease far from expired, its heartbeat stale.
    await gateway.db.query(
      `update pgboss.job set state = 'active', started_on = now() - interval '30 seconds', heartbeat_on = now() - interval '30 seconds' where id = $1`, [job!.id]);

    workers = await startTestApp({ clock: systemClock, workers: true, sameDatabaseAs: gateway, env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '0' } });
    const deadline = Date.now() + 60_000;
    expect(await statusBy(messageId, 'delivered', deadline)).toBe('delivered');
    // The same job, handed back (one retry) and completed: not a second job, not a second send.
    // (The sandbox's report can make the message delivered before the job's completion commits.)
    const jobNow = async () => (await gateway.db.query<{ state: string; retry_count: number }>('select state, retry_count from pgboss.job where id = $1', [job!.id])).rows[0]!;
    let after = await jobNow();
    while (Date.now() < deadline && after.state === 'active') {
      await sleep(200);
      after = await jobNow();
    }
    expect(after).toMatchObject({ state: 'completed', retry_count: 1 });
    const { rows: [sends] } = await gateway.db.query<{ n: number }>('select count(*)::int as n from sandbox_sends where idempotency_key = $1', [messageId]);
    expect(sends!.n).toBe(1);
  }, 90_000);
});
