/**
 * HIPAA mode for flows, end to end over HTTP and GraphQL against the real database and workers:
 * what an execution carries (an API payload, an inbound message, an HTTP response, rendered
 * messages, custom event data, error details) is stored sealed (no marker in any row of any table
 * or in any log line); reads follow the PHI access rules (owner; developer with a reason code;
 * viewer and a developer without one see it redacted) and are logged; retention on an injected
 * clock purges finished executions' content; the backfill seals what was stored before the mode.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { OFFICER, tablesHolding, tickingCallers } from './helpers/phi.ts';
import { eventually } from './helpers/assertions.ts';
import { startReceiver } from './helpers/voice.ts';

const clock = new ManualClock(Date.now());
const logs: string[] = [];
let t: TestApp;
let org: TestOrg;
let hooks: Awaited<ReturnType<typeof startReceiver>>;
/** Answers every request with `{ echo: <the request body> }`: an HTTP step's output then carries the marker. */
let echo: http.Server;
let echoUrl: string;
const keys: Record<'developer' | 'viewer', string> = { developer: '', viewer: '' };
const MARK = `PHIMARK${randomBytes(6).toString('hex')}`;

const { rest, gql } = tickingCallers(() => t, clock, () => org.testKey);

async function enable(o: TestOrg) {
  expect((await rest('PUT', '/v1/settings/hipaa/baa', { key: o.liveKey, body: { status: 'signed', signed_date: '2026-11-01' } })).status).toBe(200);
  const on = await rest('PUT', '/v1/settings/hipaa', { key: o.liveKey, body: { enabled: true, compliance_officer: OFFICER } });
  expect(on.status, on.text).toBe(200);
}

const triage = (name = 'Triage') => ({
  name, trigger: { type: 'api' },
  definition: {
    nodes: [
      { id: 't', type: 'trigger' },
      { id: 'lookup', type: 'http_request', config: { url: `${echoUrl}/patients`, body: { note: '{{input.note}}' } } },
      { id: 'tell', type: 'send_message', config: { channel: 'sms', to: '{{input.phone}}', body: 'About {{input.note}}: {{steps.lookup.body.echo}}' } },
      { id: 'shout', type: 'webhook_event', config: { event: 'triaged', data: { note: '{{input.note}}' } } },
      { id: 'e', type: 'end', config: { output: { note: '{{input.note}}' } } },
    ],
    edges: [{ from: 't', to: 'lookup' }, { from: 'lookup', to: 'tell', branch: 'success' }, { from: 'tell', to: 'shout' }, { from: 'shout', to: 'e' }],
  },
});

async function createFlow(o: TestOrg, body: unknown): Promise<string> {
  const r = await rest('POST', '/v1/flows', { key: o.testKey, body });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id;
}

async function run(o: TestOrg, flowId: string, input: Record<string, unknown>): Promise<any> {
  const started = await rest('POST', `/v1/flows/${flowId}/executions`, { key: o.testKey, body: { input } });
  expect(started.status, started.text).toBe(201);
  return eventually('the execution finished', async () => {
    const e = (await rest('GET', `/v1/flows/${flowId}/executions/${started.body.data.id}`, { key: o.testKey })).body.data;
    return ['completed', 'failed'].includes(e.status) ? e : undefined;
  }, 30_000);
}

beforeAll(async () => {
  hooks = await startReceiver();
  echo = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ echo: body }));
    });
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
  echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
  t = await startTestApp({
    clock, workers: true,
    env: {
      LOG_LEVEL: 'debug', HIPAA_MODE_CACHE_MS: '0', HIPAA_RETENTION_BATCH_SIZE: '2', WEBHOOKS_ALLOW_LOOPBACK: '1',
      SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', SANDBOX_READ_AFTER_MS: '50',
    },
    logStream: { write: (line) => { logs.push(line); } },
  });
  org = await t.createOrg('business', 'Clinic flows');
  for (const role of Object.keys(keys) as (keyof typeof keys)[]) keys[role] = await t.createKey(org.orgId, role);
  await enable(org);
  const hook = await rest('POST', '/v1/webhooks', { body: { url: `${hooks.url}/hooks`, events: ['flow.custom_event', 'flow.execution.completed', 'flow.execution.failed'] } });
  expect(hook.status, hook.text).toBe(201);
});
afterAll(async () => {
  hooks?.close();
  echo?.close();
  await t?.close();
});

describe('executions in HIPAA mode', () => {
  let flowId: string;
  let ex: any;

  beforeAll(async () => {
    flowId = await createFlow(org, triage());
    ex = await run(org, flowId, { note: `rash ${MARK}`, phone: '+14155550101' });
  }, 60_000);

  it('runs on the sealed context: templates, conditions and HTTP steps see the content; the owner reads it all', async () => {
    expect(ex.status, JSON.stringify(ex.steps)).toBe('completed');
    expect(ex.input).toEqual({ note: `rash ${MARK}`, phone: '+14155550101' });
    const byNode = Object.fromEntries(ex.steps.map((s: any) => [s.node_id, s]));
    expect(byNode.lookup.output.body.echo).toContain(MARK);
    expect(byNode.tell.input.body).toBe(`About rash ${MARK}: ${JSON.stringify({ note: `rash ${MARK}` })}`);
    expect(byNode.shout.output.data).toEqual({ note: `rash ${MARK}` });
    expect(byNode.e.output).toEqual({ note: `rash ${MARK}` });
    // The message went out with the rendered body (sealed in messages.phi, opened for the owner).
    const m = (await rest('GET', `/v1/messages/${byNode.tell.output.message_id}`)).body.data;
    expect(m.body).toContain(MARK);
  });

  it('stores the context and every step sealed, bound to its row', async () => {
    const { rows: [row] } = await t.db.query('select context, phi, error from flow_executions where id = $1', [ex.id]);
    expect(Object.keys(row.context)).toEqual(['execution']);
    expect(row.phi).toMatch(/^phi1:1:/);
    const { rows: steps } = await t.db.query('select input, output, phi from flow_execution_steps where execution_id = $1 order by seq', [ex.id]);
    expect(steps).toHaveLength(5);
    expect(steps.every((s) => s.input === null && s.output === null && /^phi1:1:/.test(s.phi))).toBe(true);
    // A sealed step moved onto another row does not open.
    await t.db.query('update flow_execution_steps set phi = $1 where execution_id = $2 and seq = 1', [steps[2].phi, ex.id]);
    const moved = await rest('GET', `/v1/flows/${flowId}/executions/${ex.id}`);
    expect(moved.status).toBe(500);
    await t.db.query('update flow_execution_steps set phi = $1 where execution_id = $2 and seq = 1', [steps[1].phi, ex.id]);
    expect((await rest('GET', `/v1/flows/${flowId}/executions/${ex.id}`)).status).toBe(200);
  });

  it('the custom event leaves without its data; the receiver reads the step', async () => {
    const hit = await eventually('the custom event delivered', () => hooks.hits.find((h) => h.json?.type === 'flow.custom_event'), 20_000);
    expect(hit.json.data).toMatchObject({ event: 'triaged', data: null, data_sealed: true, execution_id: ex.id, node_id: 'shout' });
    expect(hit.body).not.toContain(MARK);
  });

  it('reads: a developer with a reason code sees the content; without one, and a viewer, see it redacted; every disclosure is logged', async () => {
    const path = `/v1/flows/${flowId}/executions/${ex.id}`;
    const withReason = (await rest('GET', path, { key: keys.developer, headers: { 'X-PHI-Reason': 'treatment' } })).body.data;
    expect(withReason.input.note).toBe(`rash ${MARK}`);
    for (const key of [keys.developer, keys.viewer]) {
      const r = (await rest('GET', path, { key })).body.data;
      expect(r.input).toEqual({ note: '[REDACTED]', phone: '[REDACTED]' });
      expect(JSON.stringify(r)).not.toContain(MARK);
      expect(r.steps.find((s: any) => s.node_id === 'lookup').output).toMatchObject({ status: 200, body: { echo: '[REDACTED]' } });
    }
    const listed = (await rest('GET', `/v1/flows/executions?flow_id=${flowId}`, { key: keys.viewer })).body.data;
    expect(listed[0].input.note).toBe('[REDACTED]');
    const q = `query($id: ID!) { flowExecution(id: $id) { input steps { nodeId input output } } }`;
    const viewer = await gql(q, { id: ex.id }, { key: keys.viewer });
    expect(JSON.stringify(viewer.body)).not.toContain(MARK);
    expect(viewer.body.data.flowExecution.input.note).toBe('[REDACTED]');
    const owner = await gql(q, { id: ex.id });
    expect(owner.body.data.flowExecution.steps.find((s: any) => s.nodeId === 'e').output).toEqual({ note: `rash ${MARK}` });
    const log = (await t.db.query(`select role, reason, resource_type, resource_ids from phi_access_log where organization_id = $1 and resource_type like 'flow%'`, [org.orgId])).rows;
    expect(log.some((l) => l.role === 'developer' && l.reason === 'treatment' && l.resource_ids.includes(ex.id))).toBe(true);
    expect(log.some((l) => l.role === 'owner' && l.resource_type === 'flow_execution')).toBe(true);
    expect(log.some((l) => l.role === 'viewer')).toBe(false);
  });

  it('a failed step: its error detail is sealed (the clear error keeps node and code), opened for the owner', async () => {
    const id = await createFlow(org, {
      name: 'Bad number', trigger: { type: 'api' },
      definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 's', type: 'send_message', config: { channel: 'sms', to: '{{input.phone}}', body: 'hi' } }], edges: [{ from: 't', to: 's' }] },
    });
    const failed = await run(org, id, { phone: `call-${MARK}` });
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ node: 's', code: 'INVALID_PHONE_NUMBER' });
    expect(failed.error.message).toContain(MARK);
    const viewer = (await rest('GET', `/v1/flows/${id}/executions/${failed.id}`, { key: keys.viewer })).body.data;
    expect(viewer.error).toMatchObject({ node: 's', code: 'INVALID_PHONE_NUMBER' });
    expect(JSON.stringify(viewer)).not.toContain(MARK);
    const hit = await eventually('the failed event', () => hooks.hits.find((h) => h.json?.type === 'flow.execution.failed' && h.json.data.execution_id === failed.id), 20_000);
    expect(hit.json.data.error.code).toBe('INVALID_PHONE_NUMBER');
  });

  it('an inbound message starts a flow with its body sealed in the execution', async () => {
    const id = await createFlow(org, {
      name: 'Inbound', trigger: { type: 'inbound_message', channel: 'sms', keyword: 'help' },
      definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'e', type: 'end', config: { output: { said: '{{input.body}}' } } }], edges: [{ from: 't', to: 'e' }] },
    });
    expect((await rest('POST', '/v1/sandbox/inbound', { body: { channel: 'sms', from: '+14155550177', body: `HELP ${MARK}` } })).status).toBeLessThan(300);
    const listed = await eventually('the inbound execution', async () => {
      const l = (await rest('GET', `/v1/flows/executions?flow_id=${id}`)).body.data;
      return l[0]?.status === 'completed' ? l[0] : undefined;
    }, 30_000);
    expect(listed.input.body).toBe(`HELP ${MARK}`);
    const full = (await rest('GET', `/v1/flows/${id}/executions/${listed.id}`)).body.data;
    expect(full.steps.at(-1).output).toEqual({ said: `HELP ${MARK}` });
  });

  it('no marker in any row of any table (outbox, jobs, webhook log, idempotency) or in the logs', async () => {
    expect(await tablesHolding(t, [MARK])).toEqual([]);
    expect(logs.length).toBeGreaterThan(10);
    expect(logs.filter((l) => l.includes(MARK))).toEqual([]);
  });
});

describe('retention and backfill', () => {
  it('finished executions past the retention period lose their content, in batches, idempotently; newer ones keep it', async () => {
    expect((await rest('PUT', '/v1/settings/hipaa', { key: org.liveKey, body: { retention_days: 30 } })).status).toBe(200);
    const old = (await t.db.query(`select id, flow_id from flow_executions where organization_id = $1 and finished_at is not null`, [org.orgId])).rows;
    expect(old.length).toBeGreaterThanOrEqual(3);
    clock.advance(31 * 86_400_000);
    const flowId = (await rest('GET', '/v1/flows')).body.data.find((f: any) => f.name === 'Triage').id;
    const fresh = await run(org, flowId, { note: `fresh ${MARK}`, phone: '+14155550102' });
    expect(fresh.status).toBe('completed');
    const { flowRetention } = t.app.services;
    const purged = await Promise.all([flowRetention.purgeExpired(), flowRetention.purgeExpired()]);
    const steps = (await t.db.query(`select count(*)::int as c from flow_execution_steps where execution_id = any($1)`, [old.map((o) => o.id)])).rows[0].c;
    expect(purged[0] + purged[1]).toBe(old.length + steps);
    expect(await flowRetention.purgeExpired()).toBe(0);
    const gone = (await rest('GET', `/v1/flows/${old[0].flow_id}/executions/${old[0].id}`)).body.data;
    expect(gone.input).toEqual({});
    expect(gone.steps.every((s: any) => s.input === null && s.output === null)).toBe(true);
    const kept = (await rest('GET', `/v1/flows/${flowId}/executions/${fresh.id}`)).body.data;
    expect(kept.input.note).toBe(`fresh ${MARK}`);
  });

  it('executions stored before the mode was on are sealed by the backfill, once', async () => {
    const o = await t.createOrg('enterprise', 'Backfill flows');
    const flowId = await createFlow(o, triage('Before'));
    const before = await run(o, flowId, { note: `before ${MARK}`, phone: '+14155550103' });
    expect(before.status).toBe('completed');
    expect((await t.db.query('select count(*)::int as c from flow_execution_steps where execution_id = $1 and phi is null and output is not null', [before.id])).rows[0].c).toBe(5);
    await enable(o);
    clock.advance(1000);
    expect(await t.app.services.flowRetention.sealBackfill()).toBe(6);
    const { rows: [row] } = await t.db.query('select context, phi from flow_executions where id = $1', [before.id]);
    expect(Object.keys(row.context)).toEqual(['execution']);
    expect(row.phi).toMatch(/^phi1:1:/);
    expect((await t.db.query('select count(*)::int as c from flow_execution_steps where execution_id = $1 and (phi is null or output is not null)', [before.id])).rows[0].c).toBe(0);
    const read = (await rest('GET', `/v1/flows/${flowId}/executions/${before.id}`, { key: o.testKey })).body.data;
    expect(read.input.note).toBe(`before ${MARK}`);
    expect(read.steps.find((s: any) => s.node_id === 'e').output).toEqual({ note: `before ${MARK}` });
    expect(await t.app.services.flowRetention.sealBackfill()).toBe(0);
  });
});
