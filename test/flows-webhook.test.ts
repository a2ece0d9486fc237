/**
 * The webhook trigger's signature against replays (issue 43), over HTTP against the real database:
 * `X-Provider-Signature: t=<unix seconds>,flow=<flow id>,id=<delivery id>,v1=<hex HMAC-SHA256 of
 * "<id>.<t>.<raw body>">` (computed here with node:crypto, as a sender would). A replay of a
 * delivery (or a retry with the same id) starts nothing new and answers with the first execution,
 * also when the copies arrive at once; a call signed outside the tolerance
 * (FLOWS_WEBHOOK_TOLERANCE_SECONDS, 120 here), the previous unsigned-time format, a wrong
 * signature or a missing delivery id are refused with 401 and start nothing.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
let flow: { id: string; webhook_secret: string };

beforeAll(async () => {
  t = await startTestApp({ workers: true, clock: systemClock, env: { FLOWS_WEBHOOK_TOLERANCE_SECONDS: '120' } });
  org = await t.createOrg('enterprise', 'Webhook flows org');
  const created = await t.rest('POST', '/v1/flows', {
    key: org.testKey,
    body: { name: 'Hooked', trigger: { type: 'webhook' }, definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'done', type: 'end', config: { output: { got: '{{input.n}}' } } }], edges: [{ from: 't', to: 'done' }] } },
  });
  expect(created.status, created.text).toBe(201);
  flow = created.body.data;
});
afterAll(async () => { await t?.close(); });

const now = () => Math.floor(Date.now() / 1000);
const sign = (id: string, ts: number, body: string, secret = flow.webhook_secret) => createHmac('sha256', secret).update(`${id}.${ts}.${body}`).digest('hex');
const call = (body: string, signature: string) =>
  t.rest('POST', '/v1/providers/flows/callbacks', { rawBody: body, headers: { 'Content-Type': 'application/json', 'X-Provider-Signature': signature } });
const header = (id: string, ts: number, body: string) => `t=${ts},flow=${flow.id},id=${id},v1=${sign(id, ts, body)}`;
const executions = async () => (await t.db.query<{ id: string; delivery_id: string | null }>('select id, delivery_id from flow_executions where flow_id = $1 order by id', [flow.id])).rows;

describe('webhook trigger replays', () => {
  it('a replayed or retried delivery starts one execution and answers with it', async () => {
    const body = JSON.stringify({ n: 1 });
    const ts = now();
    const first = await call(body, header('dlv_a', ts, body));
    expect(first.status, first.text).toBe(200);
    expect(first.body.data).toMatchObject({ flow_id: flow.id, status: 'running' });
    const executionId = first.body.data.execution_id;

    // The same request again (a replay), and a retry signed later with the same delivery id.
    const replay = await call(body, header('dlv_a', ts, body));
    expect(replay.status).toBe(200);
    expect(replay.body.data).toMatchObject({ execution_id: executionId, flow_id: flow.id });
    const retry = await call(body, header('dlv_a', ts + 5, body));
    expect(retry.body.data.execution_id).toBe(executionId);
    expect(await executions()).toEqual([{ id: executionId, delivery_id: 'dlv_a' }]);

    // The execution ran with the body as input.
    const ex = await t.rest('GET', `/v1/flows/${flow.id}/executions/${executionId}`, { key: org.testKey });
    expect(ex.body.data).toMatchObject({ trigger_type: 'webhook', input: { n: 1 } });

    // Another delivery id is another execution.
    const second = await call(body, header('dlv_b', now(), body));
    expect(second.status).toBe(200);
    expect(second.body.data.execution_id).not.toBe(executionId);
    expect(await executions()).toHaveLength(2);
  });

  it('copies of one delivery arriving at once start one execution', async () => {
    const body = JSON.stringify({ n: 2 });
    const signature = header('dlv_burst', now(), body);
    const answers = await Promise.all(Array.from({ length: 6 }, () => call(body, signature)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200));
    expect(new Set(answers.map((a) => a.body.data.execution_id)).size).toBe(1);
    expect((await executions()).filter((e) => e.delivery_id === 'dlv_burst')).toHaveLength(1);
  });

  it('refuses calls signed outside the tolerance, the old format, a wrong signature and a missing delivery id; none starts anything', async () => {
    const before = (await executions()).length;
    const body = JSON.stringify({ n: 3 });
    const old = await call(body, header('dlv_old', now() - 200, body));
    expect(old.status).toBe(401);
    expect(old.body.error).toMatchObject({ code: 'UNAUTHORIZED', details: { tolerance_seconds: 120 } });
    const ahead = await call(body, header('dlv_ahead', now() + 200, body));
    expect(ahead.body.error).toMatchObject({ code: 'UNAUTHORIZED', details: { tolerance_seconds: 120 } });
    // Within the tolerance: accepted.
    expect((await call(body, header('dlv_recent', now() - 60, body))).status).toBe(200);

    const bodyOnly = createHmac('sha256', flow.webhook_secret).update(body).digest('hex');
    const legacy = await call(body, `${flow.id}.${bodyOnly}`);
    expect(legacy.status).toBe(401);
    expect(legacy.body.error.message).toMatch(/t=<unix seconds>,flow=<flow id>,id=<delivery id>,v1=/);
    const ts = now();
    expect((await call(body, `t=${ts},flow=${flow.id},v1=${sign('', ts, body)}`)).status).toBe(401);
    expect((await call(body, `t=${ts},flow=${flow.id},id=dlv_x,v1=${sign('dlv_x', ts, body, 'whsec_wrong')}`)).status).toBe(401);
    // The signature covers the timestamp: a fresh `t` on an old signature does not match.
    const stale = now() - 200;
    expect((await call(body, `t=${now()},flow=${flow.id},id=dlv_old,v1=${sign('dlv_old', stale, body)}`)).status).toBe(401);
    expect(await executions()).toHaveLength(before + 1);
  });
});
