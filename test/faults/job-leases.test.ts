/**
 * Fault scenario 1 (quick form): a worker killed while it held a delivery job. Before job
 * heartbeats, such a job stayed `active` until its 300 s lease expired (the fault harness saw
 * deliveries stall for 5–6 minutes after a kill -9); now the supervisor hands it back once its
 * heartbeat is JOB_HEARTBEAT_SECONDS old, and another worker delivers the message.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/platform/clock.ts';
import { JOB_HEARTBEAT_SECONDS } from '../../src/platform/jobs/jobs.ts';
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

describe('a job held by a worker that died', () => {
  it('is handed back by its stale heartbeat, long before its lease expires, and the message is delivered', async () => {
    const org = await gateway.createOrg('enterprise');
    const sent = await gateway.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'held by a dead worker' } });
    expect(sent.status, sent.text).toBe(201);
    const messageId: string = sent.body.data.id;
    const { rows: [job] } = await gateway.db.query<{ id: string; heartbeat_seconds: number | null; expire_seconds: number }>(
      `select id, heartbeat_seconds, expire_seconds from pgboss.job where name = 'messaging.deliver' and data->'data'->>'messageId' = $1`, [messageId]);
    expect(job).toMatchObject({ heartbeat_seconds: JOB_HEARTBEAT_SECONDS, expire_seconds: 300 });

    // A worker claimed it 30 s ago and was killed: active, its lease far from expired, its heartbeat stale.
    await gateway.db.query(
      `update pgboss.job set state = 'active', started_on = now() - interval '30 seconds', heartbeat_on = now() - interval '30 seconds' where id = $1`, [job!.id]);

    workers = await startTestApp({ clock: systemClock, workers: true, sameDatabaseAs: gateway, env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '0' } });
    const deadline = Date.now() + 60_000;
    let status = 'queued';
    while (Date.now() < deadline && status !== 'delivered') {
      await sleep(200);
      status = (await gateway.db.query<{ status: string }>('select status from messages where id = $1', [messageId])).rows[0]!.status;
    }
    expect(status).toBe('delivered');
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
