/**
 * Flows end to end over HTTP and GraphQL against the real database with pg-boss workers and the
 * sandbox providers: CRUD with versions and optimistic concurrency (concurrent updates with one
 * expected version: exactly one wins), every version readable, save-time validation with exact
 * `details.node` / `details.field`, executions through the api trigger with their step log, branch
 * outcomes, failures, cancel, DELETE letting a running execution finish, a re-run step sending
 * nothing twice, and the event, inbound_message (+ wait_for_reply), webhook and schedule triggers.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { startTestApp, type CallOptions, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventuallyHolds } from './helpers/assertions.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  t = await startTestApp({ workers: true, clock: systemClock, env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50', SANDBOX_READ_AFTER_MS: '50', WEBHOOKS_ALLOW_LOOPBACK: '1', LOG_LEVEL: process.env.FLOWS_TEST_LOG ?? 'silent' } });
  org = await t.createOrg('enterprise', 'Flows org');
  other = await t.createOrg('enterprise', 'Other org');
});
afterAll(async () => { await t?.close(); });

const rest = (method: string, path: string, body?: unknown, o: CallOptions = {}) => t.rest(method, path, { key: org.testKey, ...(body !== undefined ? { body } : {}), ...o });
let phoneSeq = 0;
const phone = () => `+1415555${String(1000 + ++phoneSeq).slice(-4)}`;

const smsFlow = (extra: Record<string, unknown> = {}) => ({
  name: 'Welcome',
  trigger: { type: 'api' },
  definition: {
    nodes: [
      { id: 'start', type: 'trigger' },
      { id: 'vip', type: 'condition', config: { rules: { all: [{ field: 'input.vip', op: 'eq', value: true }] } } },
      { id: 'greet', type: 'send_message', config: { channel: 'sms', to: '{{input.phone}}', body: 'Welcome {{input.name}}!' } },
      { id: 'pause', type: 'wait', config: { seconds: 0 } },
      { id: 'done', type: 'end' },
    ],
    edges: [
      { from: 'start', to: 'vip' }, { from: 'vip', to: 'greet', branch: 'true' }, { from: 'vip', to: 'done', branch: 'false' },
      { from: 'greet', to: 'pause' }, { from: 'pause', to: 'done' },
    ],
  },
  ...extra,
});

const until = <T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> => eventuallyHolds('the flow', read, ok, ms);
const execution = (flowId: string, id: string) => rest('GET', `/v1/flows/${flowId}/executions/${id}`).then((r) => r.body.data);
const finished = (flowId: string, id: string) => until(() => execution(flowId, id), (e) => ['completed', 'failed', 'cancelled'].includes(e.status));
const messagesTo = async (to: string) => (await t.db.query('select id, body, status from messages where "to" = $1 and direction = $2', [to, 'outbound'])).rows;

describe('flow CRUD and versions', () => {
  it('creates, reads, lists and updates with an incrementing version; every version stays readable', async () => {
    const created = await rest('POST', '/v1/flows', smsFlow());
    expect(created.status).toBe(201);
    const flow = created.body.data;
    expect(flow).toMatchObject({ name: 'Welcome', trigger_type: 'api', version: 1 });
    expect(flow.id).toMatch(/^flw_/);
    expect((await rest('GET', `/v1/flows/${flow.id}`)).body.data.definition.nodes).toHaveLength(5);
    const list = await rest('GET', '/v1/flows?limit=100');
    expect(list.body.data.map((f: any) => f.id)).toContain(flow.id);

    const renamed = await rest('PUT', `/v1/flows/${flow.id}`, { name: 'Welcome v2', expected_version: 1 });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data.version).toBe(2);
    const stale = await rest('PUT', `/v1/flows/${flow.id}`, { name: 'Lost update', expected_version: 1 });
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatchObject({ code: 'CONFLICT', details: { current_version: 2 } });

    const v1 = await rest('GET', `/v1/flows/${flow.id}/versions/1`);
    expect(v1.body.data).toMatchObject({ version: 1, name: 'Welcome' });
    const versions = await rest('GET', `/v1/flows/${flow.id}/versions`);
    expect(versions.body.data.map((v: any) => v.version)).toEqual([2, 1]);
    expect((await t.rest('GET', `/v1/flows/${flow.id}`, { key: other.testKey })).status).toBe(404);
  });

  it('of concurrent updates with the same expected version exactly one wins', async () => {
    const flow = (await rest('POST', '/v1/flows', smsFlow())).body.data;
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => rest('PUT', `/v1/flows/${flow.id}`, { name: `Racer ${i}`, expected_version: 1 })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 409, 409, 409, 409, 409]);
    const winner = results.find((r) => r.status === 200)!.body.data;
    const now = (await rest('GET', `/v1/flows/${flow.id}`)).body.data;
    expect(now).toMatchObject({ version: 2, name: winner.name });
    for (const r of results.filter((x) => x.status === 409)) expect(r.body.error.details.current_version).toBe(2);
  });

  it('validates at save time with the exact node and field', async () => {
    const dangling = smsFlow();
    dangling.definition.edges[3] = { from: 'greet', to: 'ghost' };
    const r1 = await rest('POST', '/v1/flows', dangling);
    expect(r1.status).toBe(422);
    expect(r1.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { node: 'greet', field: 'definition.edges.3.to' } });

    const badConfig = smsFlow();
    (badConfig.definition.nodes[2] as any).config = { channel: 'sms', to: '{{input.phone}}' };
    expect((await rest('POST', '/v1/flows', badConfig)).body.error.details).toEqual({ node: 'greet', field: 'definition.nodes.2.config.body' });

    const missingList = smsFlow();
    missingList.definition.nodes[3] = { id: 'pause', type: 'add_to_list', config: { contact_id: '{{input.contact_id}}', list_id: 'lst_01jd0000000000000000000000' } } as any;
    expect((await rest('POST', '/v1/flows', missingList)).body.error.details).toMatchObject({ node: 'pause', field: 'definition.nodes.3.config.list_id' });

    const missingTemplate = smsFlow();
    (missingTemplate.definition.nodes[2] as any).config = { channel: 'sms', to: '{{input.phone}}', template_id: 'tpl_01jd0000000000000000000000' };
    expect((await rest('POST', '/v1/flows', missingTemplate)).body.error.details).toMatchObject({ node: 'greet', field: 'definition.nodes.2.config.template_id' });

    const agent = smsFlow();
    agent.definition.nodes[3] = { id: 'pause', type: 'agent', config: { agent_id: 'agt_01jd0000000000000000000000' } } as any;
    expect((await rest('POST', '/v1/flows', agent)).body.error.details).toMatchObject({ node: 'pause', field: 'definition.nodes.3.config.agent_id' });

    const ssrf = smsFlow();
    ssrf.definition.nodes[3] = { id: 'pause', type: 'http_request', config: { url: 'https://169.254.169.254/latest' } } as any;
    ssrf.definition.edges[4] = { from: 'pause', to: 'done', branch: 'success' } as any;
    expect((await rest('POST', '/v1/flows', ssrf)).body.error.details).toMatchObject({ node: 'pause', field: 'definition.nodes.3.config.url' });

    expect((await rest('POST', '/v1/flows', { ...smsFlow(), trigger: { type: 'event', event: 'no.such' } })).body.error.details.field).toBe('trigger.event');
    expect((await rest('POST', '/v1/flows', { ...smsFlow(), trigger: { type: 'schedule', cron: '61 * * * *' } })).body.error.details.field).toBe('trigger.cron');
  });
});

describe('executions', () => {
  it('runs a flow started by the api trigger step by step and records the step log', async () => {
    const flow = (await rest('POST', '/v1/flows', smsFlow())).body.data;
    const to = phone();
    const started = await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: to, name: 'Ada' } });
    expect(started.status).toBe(201);
    expect(started.body.data).toMatchObject({ flow_id: flow.id, flow_version: 1, status: 'running', trigger_type: 'api' });
    const ex = await finished(flow.id, started.body.data.id);
    expect(ex.status).toBe('completed');
    expect(ex.steps.map((s: any) => [s.seq, s.node_id, s.status])).toEqual([
      [0, 'start', 'completed'], [1, 'vip', 'completed'], [2, 'greet', 'completed'], [3, 'pause', 'completed'], [4, 'done', 'completed'],
    ]);
    expect(ex.steps[1].output).toEqual({ result: true });
    const sent = await messagesTo(to);
    expect(sent).toHaveLength(1);
    expect(sent[0].body).toBe('Welcome Ada!');
    expect(ex.steps[2].output.message_id).toBe(sent[0].id);
    const events = await t.db.query('select type from events where resource_id = $1 order by id', [ex.id]);
    expect(events.rows.map((r) => r.type)).toContain('flow.execution.completed');

    // The false branch skips the send.
    const other = phone();
    const skipped = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: false, phone: other } })).body.data.id);
    expect(skipped.steps.map((s: any) => s.node_id)).toEqual(['start', 'vip', 'done']);
    expect(await messagesTo(other)).toHaveLength(0);

    const list = await rest('GET', `/v1/flows/executions?flow_id=${flow.id}&status=completed`);
    expect(list.body.data.map((e: any) => e.id)).toEqual([skipped.id, ex.id]);
  });

  it('send_message on rcs and viber', async () => {
    const flow = (await rest('POST', '/v1/flows', {
      name: 'Rich', trigger: { type: 'api' },
      definition: {
        nodes: [
          { id: 't', type: 'trigger' },
          { id: 'rcs', type: 'send_message', config: { channel: 'rcs', to: '{{input.phone}}', body: 'RCS hello {{input.name}}' } },
          { id: 'viber', type: 'send_message', config: { channel: 'viber', to: '{{input.phone}}', body: 'Viber hello {{input.name}}' } },
          { id: 'e', type: 'end' },
        ],
        edges: [{ from: 't', to: 'rcs' }, { from: 'rcs', to: 'viber' }, { from: 'viber', to: 'e' }],
      },
    })).body.data;
    expect(flow?.id, 'flow created').toBeTruthy();
    const to = phone();
    const ex = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { phone: to, name: 'Lin' } })).body.data.id);
    expect(ex.status, JSON.stringify(ex.steps)).toBe('completed');
    const sent = (await t.db.query('select channel, body from messages where "to" = $1 order by id', [to])).rows;
    expect(sent).toEqual([{ channel: 'rcs', body: 'RCS hello Lin' }, { channel: 'viber', body: 'Viber hello Lin' }]);
    expect(ex.steps[1].input).toMatchObject({ channel: 'rcs', body: 'RCS hello Lin' });
  });

  it('runs the internal steps of one execution inline in one job, the wait of 0 s included, with every step event', async () => {
    const flow = (await rest('POST', '/v1/flows', smsFlow())).body.data;
    const to = phone();
    const ex = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: to } })).body.data.id);
    expect(ex.status).toBe('completed');
    // Step 1's job ran vip, greet, pause (waiting, then resumed at once) and done: no other job was enqueued.
    const jobs = await t.db.query("select id from pgboss.job where name = 'flows.step' and data->'data'->>'executionId' = $1", [ex.id]);
    expect(jobs.rows).toHaveLength(1);
    const steps = await t.db.query("select data->>'node_id' as node, data->>'step_status' as status from events where resource_id = $1 and type = 'flow.execution.step' order by id", [ex.id]);
    expect(steps.rows.map((r) => `${r.node}:${r.status}`)).toEqual(['vip:completed', 'greet:completed', 'pause:waiting', 'pause:completed', 'done:completed']);
    expect(await messagesTo(to)).toHaveLength(1);
  });

  it('step jobs gathered in one batch (the same job twice, other executions) move each execution once and send once', async () => {
    const slow = smsFlow();
    (slow.definition.nodes[3] as any).config = { seconds: 3600 };
    const flow = (await rest('POST', '/v1/flows', slow)).body.data;
    const targets = [phone(), phone(), phone()];
    const ids: string[] = [];
    for (const to of targets) ids.push((await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: to } })).body.data.id);
    for (const id of ids) expect((await until(() => execution(flow.id, id), (e) => e.status === 'waiting')).status).toBe('waiting');
    const scope = systemScope(org.orgId, 'test', 'enterprise', 'test');
    const engine = t.app.services.flowEngine;
    // Every execution waits at step 3: resume them all together, the first one twice in the batch.
    await engine.runSteps([ids[0]!, ...ids].map((id) => ({ scope, job: { executionId: id, seq: 3, resume: 'timer' as const } })));
    for (const [i, id] of ids.entries()) {
      const ex = await execution(flow.id, id);
      expect(ex.status).toBe('completed');
      expect(ex.steps.map((s: any) => `${s.node_id}:${s.status}`)).toEqual(['start:completed', 'vip:completed', 'greet:completed', 'pause:completed', 'done:completed']);
      expect(await messagesTo(targets[i]!)).toHaveLength(1);
    }
  });

  it('a step run again after it completed sends nothing twice', async () => {
    const flow = (await rest('POST', '/v1/flows', smsFlow())).body.data;
    const to = phone();
    const ex = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: to } })).body.data.id);
    const scope = systemScope(org.orgId, 'test', 'enterprise', 'test');
    const engine = t.app.services.flowEngine;
    await Promise.all([engine.runStep(scope, { executionId: ex.id, seq: 2 }), engine.runStep(scope, { executionId: ex.id, seq: 2 })]);
    expect(await messagesTo(to)).toHaveLength(1);
    expect((await execution(flow.id, ex.id)).steps).toHaveLength(5);
  });

  it('fails with the node and reason, and cancels a waiting execution', async () => {
    const flow = (await rest('POST', '/v1/flows', smsFlow())).body.data;
    const failed = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: 'not a phone' } })).body.data.id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ node: 'greet', code: 'INVALID_PHONE_NUMBER' });
    expect(failed.steps[2]).toMatchObject({ node_id: 'greet', status: 'failed' });

    // Consent is enforced by messaging: an opted-out recipient fails the step and gets nothing.
    const optedOut = phone();
    const contact = (await rest('POST', '/v1/contacts', { phone: optedOut })).body.data;
    expect((await rest('PUT', `/v1/contacts/${contact.id}/preferences`, { sms: 'opted_out' })).status).toBe(200);
    const refused = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: optedOut } })).body.data.id);
    expect(refused.error).toMatchObject({ node: 'greet', code: 'RECIPIENT_OPTED_OUT' });
    expect(await messagesTo(optedOut)).toHaveLength(0);

    const slow = smsFlow();
    (slow.definition.nodes[3] as any).config = { seconds: 3600 };
    const slowFlow = (await rest('POST', '/v1/flows', slow)).body.data;
    const id = (await rest('POST', `/v1/flows/${slowFlow.id}/executions`, { input: { vip: true, phone: phone() } })).body.data.id;
    expect((await until(() => execution(slowFlow.id, id), (e) => e.status === 'waiting')).status).toBe('waiting');
    const cancelled = await rest('POST', `/v1/flows/${slowFlow.id}/executions/${id}/cancel`);
    expect(cancelled.body.data.status).toBe('cancelled');
    expect((await rest('POST', `/v1/flows/${slowFlow.id}/executions/${id}/cancel`)).status).toBe(409);
  });

  it('DELETE lets a running execution finish and starts no new ones', async () => {
    const slow = smsFlow();
    (slow.definition.nodes[3] as any).config = { seconds: 1 };
    const flow = (await rest('POST', '/v1/flows', slow)).body.data;
    const id = (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: phone() } })).body.data.id;
    await until(() => execution(flow.id, id), (e) => e.status === 'waiting');
    expect((await rest('DELETE', `/v1/flows/${flow.id}`)).status).toBe(204);
    expect((await rest('GET', `/v1/flows/${flow.id}`)).status).toBe(404);
    expect((await rest('POST', `/v1/flows/${flow.id}/executions`, { input: {} })).status).toBe(404);
    expect((await finished(flow.id, id)).status).toBe('completed');
  });

  it('runs an execution on the version that started it', async () => {
    const slow = smsFlow();
    (slow.definition.nodes[3] as any).config = { seconds: 1 };
    const flow = (await rest('POST', '/v1/flows', slow)).body.data;
    const to = phone();
    const id = (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: to, name: 'V1' } })).body.data.id;
    const v2 = smsFlow();
    (v2.definition.nodes[2] as any).config.body = 'changed';
    expect((await rest('PUT', `/v1/flows/${flow.id}`, { definition: v2.definition, expected_version: 1 })).body.data.version).toBe(2);
    const ex = await finished(flow.id, id);
    expect(ex.flow_version).toBe(1);
    expect((await messagesTo(to))[0].body).toBe('Welcome V1!');
  });
});

describe('triggers', () => {
  it('event: contact.created starts the flow, which tags the contact', async () => {
    const flow = (await rest('POST', '/v1/flows', {
      name: 'Tag new contacts',
      trigger: { type: 'event', event: 'contact.created', filter: { field: 'data.phone', op: 'starts_with', value: '+1415' } },
      definition: {
        nodes: [{ id: 't', type: 'trigger' }, { id: 'tag', type: 'add_tag', config: { contact_id: '{{input.contact_id}}', tags: ['from-flow'] } }],
        edges: [{ from: 't', to: 'tag' }],
      },
    })).body.data;
    const contact = (await rest('POST', '/v1/contacts', { phone: phone() })).body.data;
    const found = await until(() => rest('GET', `/v1/flows/executions?flow_id=${flow.id}`).then((r) => r.body.data), (l: any[]) => l.some((e) => e.status === 'completed'));
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ trigger_type: 'event', input: { contact_id: contact.id } });
    expect((await rest('GET', `/v1/contacts/${contact.id}`)).body.data.tags).toContain('from-flow');
    // Another tenant's contact starts nothing here.
    await t.rest('POST', '/v1/contacts', { key: other.testKey, body: { phone: phone() } });
    await new Promise((r) => setTimeout(r, 500));
    expect((await rest('GET', `/v1/flows/executions?flow_id=${flow.id}`)).body.data).toHaveLength(1);
  });

  it('inbound_message with a keyword, then wait_for_reply takes the reply branch', async () => {
    const flow = (await rest('POST', '/v1/flows', {
      name: 'Join',
      trigger: { type: 'inbound_message', channel: 'sms', keyword: 'join' },
      definition: {
        nodes: [
          { id: 't', type: 'trigger' },
          { id: 'ask', type: 'send_message', config: { channel: 'sms', to: '{{input.from}}', body: 'Your name?' } },
          { id: 'reply', type: 'wait_for_reply', config: { from: '{{input.from}}', timeout_seconds: 600 } },
          { id: 'thanks', type: 'send_message', config: { channel: 'sms', to: '{{input.from}}', body: 'Thanks {{steps.reply.message.body}}' } },
          { id: 'late', type: 'end' },
        ],
        edges: [{ from: 't', to: 'ask' }, { from: 'ask', to: 'reply' }, { from: 'reply', to: 'thanks', branch: 'reply' }, { from: 'reply', to: 'late', branch: 'timeout' }],
      },
    })).body.data;
    const from = phone();
    await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from, body: 'hello' });
    await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from, body: 'JOIN please' });
    const waiting = await until(() => rest('GET', `/v1/flows/executions?flow_id=${flow.id}`).then((r) => r.body.data), (l: any[]) => l[0]?.status === 'waiting');
    expect(waiting).toHaveLength(1);
    expect(waiting[0].input).toMatchObject({ from, body: 'JOIN please' });
    await rest('POST', '/v1/sandbox/inbound', { channel: 'sms', from, body: 'Grace' });
    const ex = await finished(flow.id, waiting[0].id);
    expect(ex.status).toBe('completed');
    expect(ex.steps.map((s: any) => s.node_id)).toEqual(['t', 'ask', 'reply', 'thanks']);
    expect((await messagesTo(from)).map((m: any) => m.body).sort()).toEqual(['Thanks Grace', 'Your name?']);
  });

  it('webhook: a signed call starts the flow with the body as input; a bad signature is refused', async () => {
    const created = await rest('POST', '/v1/flows', { ...smsFlow(), trigger: { type: 'webhook' } });
    const flow = created.body.data;
    expect(flow.webhook_url).toBe('/v1/providers/flows/callbacks');
    expect(flow.webhook_secret).toMatch(/^whsec_/);
    expect((await rest('GET', `/v1/flows/${flow.id}`)).body.data.webhook_secret).toBeUndefined();
    const body = JSON.stringify({ vip: false, phone: phone() });
    const ts = Math.floor(Date.now() / 1000);
    const sig = createHmac('sha256', flow.webhook_secret).update(`dlv_1.${ts}.${body}`).digest('hex');
    const ok = await t.rest('POST', '/v1/providers/flows/callbacks', { rawBody: body, headers: { 'Content-Type': 'application/json', 'X-Provider-Signature': `t=${ts},flow=${flow.id},id=dlv_1,v1=${sig}` } });
    expect(ok.status).toBe(200);
    const ex = await finished(flow.id, ok.body.data.execution_id);
    expect(ex).toMatchObject({ status: 'completed', trigger_type: 'webhook', input: { vip: false } });
    const bad = await t.rest('POST', '/v1/providers/flows/callbacks', { rawBody: body, headers: { 'X-Provider-Signature': `t=${ts},flow=${flow.id},id=dlv_2,v1=${'0'.repeat(64)}` } });
    expect(bad.status).toBe(401);
  });

  it('schedule: a pg-boss schedule keyed by the flow, moved on update and removed on delete; a tick starts one execution', async () => {
    const flow = (await rest('POST', '/v1/flows', { ...smsFlow(), trigger: { type: 'schedule', cron: '0 9 * * 1', timezone: 'Europe/Istanbul' } })).body.data;
    const schedule = () => t.app.jobs.boss.getSchedule('flows.schedule', flow.id);
    expect(await schedule()).toMatchObject({ cron: '0 9 * * 1', timezone: 'Europe/Istanbul' });
    await rest('PUT', `/v1/flows/${flow.id}`, { trigger: { type: 'schedule', cron: '30 8 * * *' } });
    expect(await schedule()).toMatchObject({ cron: '30 8 * * *', timezone: 'UTC' });
    const ex = await t.app.services.flowExecutions.startScheduled(flow.id, new Date());
    expect(ex).toMatchObject({ triggerType: 'schedule', status: 'running' });
    expect((await finished(flow.id, ex!.id)).status).toBe('completed');
    await rest('DELETE', `/v1/flows/${flow.id}`);
    expect(await schedule()).toBeNull();
    expect(await t.app.services.flowExecutions.startScheduled(flow.id, new Date())).toBeNull();
  });
});

describe('GraphQL', () => {
  it('creates and updates flows with the same rules, and reads executions with their steps', async () => {
    const created = await t.gql<any>('mutation($input: CreateFlowInput!) { createFlow(input: $input) { id version triggerType } }',
      { input: smsFlow() }, { key: org.testKey });
    const id = created.body.data.createFlow.id;
    expect(created.body.data.createFlow).toMatchObject({ version: 1, triggerType: 'api' });
    const conflict = await t.gql('mutation($id: ID!) { updateFlow(id: $id, input: { name: "x", expectedVersion: 7 }) { version } }', { id }, { key: org.testKey });
    expect(conflict.body.errors?.[0].extensions).toMatchObject({ code: 'CONFLICT', details: { current_version: 1 } });
    const started = await t.gql<any>('mutation($id: ID!) { startFlowExecution(flowId: $id, input: { vip: false }) { id status } }', { id }, { key: org.testKey });
    const exId = started.body.data.startFlowExecution.id;
    await finished(id, exId);
    const read = await t.gql<any>('query($f: ID!, $id: ID!) { flowExecution(flowId: $f, id: $id) { status steps { seq nodeId status } } }', { f: id, id: exId }, { key: org.testKey });
    expect(read.body.data.flowExecution).toEqual({ status: 'completed', steps: [
      { seq: 0, nodeId: 'start', status: 'completed' }, { seq: 1, nodeId: 'vip', status: 'completed' }, { seq: 2, nodeId: 'done', status: 'completed' },
    ] });
  });
});

describe('node types calling out', () => {
  it('http_request (idempotency key, response in context), update_contact, add_to_list and webhook_event', async () => {
    const { createServer } = await import('node:http');
    const calls: { path: string; key: string | undefined; body: any }[] = [];
    const server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => { raw += c; });
      req.on('end', () => {
        calls.push({ path: req.url ?? '', key: req.headers['idempotency-key'] as string | undefined, body: JSON.parse(raw) });
        res.writeHead(req.url === '/fail' ? 500 : 200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ tier: 'gold', name: 'Lovelace' }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const contact = (await rest('POST', '/v1/contacts', { phone: phone() })).body.data;
      const list = (await rest('POST', '/v1/contacts/lists', { name: 'Gold' })).body.data;
      const definition = (path: string) => ({
        nodes: [
          { id: 't', type: 'trigger' },
          { id: 'score', type: 'http_request', config: { url: `http://127.0.0.1:${port}${path}`, body: { contact: '{{input.contact_id}}' } } },
          { id: 'gold', type: 'condition', config: { rules: { field: 'steps.score.body.tier', op: 'eq', value: 'gold' } } },
          { id: 'name', type: 'update_contact', config: { contact_id: '{{input.contact_id}}', fields: { last_name: '{{steps.score.body.name}}', metadata: { tier: '{{steps.score.body.tier}}' } } } },
          { id: 'list', type: 'add_to_list', config: { contact_id: '{{input.contact_id}}', list_id: list.id } },
          { id: 'emit', type: 'webhook_event', config: { event: 'lead.scored', data: { tier: '{{steps.score.body.tier}}' } } },
          { id: 'oops', type: 'end', config: { output: { failed: true } } },
        ],
        edges: [
          { from: 't', to: 'score' }, { from: 'score', to: 'gold', branch: 'success' }, { from: 'score', to: 'oops', branch: 'error' },
          { from: 'gold', to: 'name', branch: 'true' }, { from: 'name', to: 'list' }, { from: 'list', to: 'emit' },
        ],
      });
      const flow = (await rest('POST', '/v1/flows', { name: 'Score', trigger: { type: 'api' }, definition: definition('/score') })).body.data;
      expect(flow.id).toMatch(/^flw_/);
      const ex = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { contact_id: contact.id } })).body.data.id);
      expect(ex.status).toBe('completed');
      expect(ex.steps.map((s: any) => s.node_id)).toEqual(['t', 'score', 'gold', 'name', 'list', 'emit']);
      expect(calls[0]).toEqual({ path: '/score', key: `${ex.id}:1`, body: { contact: contact.id } });
      expect(ex.steps[1].output).toMatchObject({ status: 200, body: { tier: 'gold' } });
      const after = (await rest('GET', `/v1/contacts/${contact.id}`)).body.data;
      expect(after).toMatchObject({ last_name: 'Lovelace', metadata: { tier: 'gold' } });
      const members = (await rest('GET', `/v1/contacts/lists/${list.id}/members`)).body.data;
      expect(members.map((m: any) => m.id)).toEqual([contact.id]);
      const custom = await t.db.query("select data from events where type = 'flow.custom_event' and resource_id = $1", [ex.id]);
      expect(custom.rows[0].data).toMatchObject({ event: 'lead.scored', data: { tier: 'gold' }, flow_id: flow.id });

      await rest('PUT', `/v1/flows/${flow.id}`, { definition: definition('/fail') });
      const failed = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { contact_id: contact.id } })).body.data.id);
      expect(failed.steps.map((s: any) => s.node_id)).toEqual(['t', 'score', 'oops']);
      expect(failed.steps[1].output.status).toBe(500);
    } finally {
      server.close();
    }
  });

  it('http_request with GET (no body, query from the context) and PUT', async () => {
    const { createServer } = await import('node:http');
    const seen: { method: string; path: string; type: string | undefined; length: string | undefined; body: string }[] = [];
    const server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => { raw += c; });
      req.on('end', () => {
        seen.push({ method: req.method ?? '', path: req.url ?? '', type: req.headers['content-type'], length: req.headers['content-length'], body: raw });
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ ok: req.method }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const created = await rest('POST', '/v1/flows', {
        name: 'Methods', trigger: { type: 'api' },
        definition: {
          nodes: [
            { id: 't', type: 'trigger' },
            { id: 'get', type: 'http_request', config: { method: 'GET', url: `http://127.0.0.1:${port}/lookup?id={{input.id}}` } },
            { id: 'put', type: 'http_request', config: { method: 'PUT', url: `http://127.0.0.1:${port}/items/{{input.id}}`, body: { seen: '{{steps.get.body.ok}}' } } },
            { id: 'e', type: 'end' },
          ],
          edges: [{ from: 't', to: 'get' }, { from: 'get', to: 'put', branch: 'success' }, { from: 'put', to: 'e', branch: 'success' }],
        },
      });
      expect(created.status, created.text).toBe(201);
      const flow = created.body.data;
      const ex = await finished(flow.id, (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { id: 'a7' } })).body.data.id);
      expect(ex.status, JSON.stringify(ex.steps)).toBe('completed');
      expect(seen).toEqual([
        { method: 'GET', path: '/lookup?id=a7', type: undefined, length: undefined, body: '' },
        { method: 'PUT', path: '/items/a7', type: 'application/json', length: String('{"seen":"GET"}'.length), body: '{"seen":"GET"}' },
      ]);
      expect(ex.steps[1].input).toMatchObject({ method: 'GET', body: null });
      expect((await rest('POST', '/v1/flows', { name: 'Bad', trigger: { type: 'api' }, definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'h', type: 'http_request', config: { method: 'TRACE', url: 'https://example.com' } }], edges: [{ from: 't', to: 'h' }] } })).status).toBe(422);
    } finally {
      server.close();
    }
  });
});

describe('live steps', () => {
  it('the flowExecutionSteps subscription streams the step log and ends with the execution', async () => {
    const { createClient } = await import('graphql-ws');
    const { default: WebSocket } = await import('ws');
    const slow = smsFlow();
    (slow.definition.nodes[3] as any).config = { seconds: 3 };
    const flow = (await rest('POST', '/v1/flows', slow)).body.data;
    const id = (await rest('POST', `/v1/flows/${flow.id}/executions`, { input: { vip: true, phone: phone() } })).body.data.id;
    const client = createClient({ url: `${t.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: org.testKey }, retryAttempts: 0, lazy: true });
    const seen: { nodeId: string; status: string }[] = [];
    await new Promise<void>((resolve, reject) => {
      client.subscribe({ query: 'subscription($id: ID!) { flowExecutionSteps(executionId: $id) { nodeId status } }', variables: { id } }, {
        next: (v: any) => seen.push(v.data.flowExecutionSteps), error: reject, complete: resolve,
      });
    });
    await client.dispose();
    expect(seen.map((s) => `${s.nodeId}:${s.status}`)).toEqual(['start:completed', 'vip:completed', 'greet:completed', 'pause:waiting', 'pause:completed', 'done:completed']);
  });
});
