/**
 * Per-organization limits of flows (FLOWS_MAX_ACTIVE_EXECUTIONS, FLOWS_MAX_STEPS): starts over the
 * concurrency limit are refused (the api trigger with 429 QUOTA_EXCEEDED, outbox triggers with a
 * failed execution that says why) while other organizations go on; a loop stops at the step limit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventuallyHolds } from './helpers/assertions.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  t = await startTestApp({ workers: true, clock: systemClock, env: { FLOWS_MAX_ACTIVE_EXECUTIONS: '2', FLOWS_MAX_STEPS: '5', SANDBOX_SEND_LATENCY_MS: '0' } });
  org = await t.createOrg('enterprise', 'Busy org');
  other = await t.createOrg('enterprise', 'Quiet org');
});
afterAll(async () => { await t?.close(); });

const waitFlow = (trigger: object) => ({
  name: 'Long wait', trigger,
  definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'w', type: 'wait', config: { seconds: 3600 } }], edges: [{ from: 't', to: 'w' }] },
});

const until = <T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> => eventuallyHolds('the flow', read, ok, ms);

describe('flow limits', () => {
  it('refuses starts over the concurrent-execution limit per organization', async () => {
    const flow = (await t.rest('POST', '/v1/flows', { key: org.testKey, body: waitFlow({ type: 'api' }) })).body.data;
    for (let i = 0; i < 2; i++) expect((await t.rest('POST', `/v1/flows/${flow.id}/executions`, { key: org.testKey, body: {} })).status).toBe(201);
    const refused = await t.rest('POST', `/v1/flows/${flow.id}/executions`, { key: org.testKey, body: {} });
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: 'QUOTA_EXCEEDED', details: { limit: 2, active: 2 } });

    // An outbox trigger over the limit leaves a failed execution that says why.
    const onContact = (await t.rest('POST', '/v1/flows', { key: org.testKey, body: waitFlow({ type: 'event', event: 'contact.created' }) })).body.data;
    await t.rest('POST', '/v1/contacts', { key: org.testKey, body: { phone: '+14155550199' } });
    const list = await until(() => t.rest('GET', `/v1/flows/executions?flow_id=${onContact.id}`, { key: org.testKey }).then((r) => r.body.data), (l: any[]) => l.length > 0);
    expect(list[0]).toMatchObject({ status: 'failed', error: { code: 'QUOTA_EXCEEDED' } });

    // Another organization is not held back.
    const theirs = (await t.rest('POST', '/v1/flows', { key: other.testKey, body: waitFlow({ type: 'api' }) })).body.data;
    expect((await t.rest('POST', `/v1/flows/${theirs.id}/executions`, { key: other.testKey, body: {} })).status).toBe(201);

    // Cancelling one makes room again.
    const running = (await t.rest('GET', `/v1/flows/executions?flow_id=${flow.id}`, { key: org.testKey })).body.data;
    await t.rest('POST', `/v1/flows/${flow.id}/executions/${running[0].id}/cancel`, { key: org.testKey });
    expect((await t.rest('POST', `/v1/flows/${flow.id}/executions`, { key: org.testKey, body: {} })).status).toBe(201);
  });

  it('concurrent starts of one organization never overshoot the limit', async () => {
    const o = await t.createOrg('enterprise', 'Racing starts');
    const flow = (await t.rest('POST', '/v1/flows', { key: o.testKey, body: waitFlow({ type: 'api' }) })).body.data;
    const answers = await Promise.all(Array.from({ length: 12 }, () => t.rest('POST', `/v1/flows/${flow.id}/executions`, { key: o.testKey, body: {} })));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 201, ...Array(10).fill(429)]);
    const { rows } = await t.db.query(`select count(*)::int as c from flow_executions where organization_id = $1 and status in ('running','waiting')`, [o.orgId]);
    expect(rows[0].c).toBe(2);
  });

  it('stops a loop at the step limit', async () => {
    const flow = (await t.rest('POST', '/v1/flows', {
      key: other.testKey,
      body: {
        name: 'Loop', trigger: { type: 'api' },
        definition: {
          nodes: [{ id: 't', type: 'trigger' }, { id: 'w', type: 'wait', config: { seconds: 0 } }, { id: 'c', type: 'condition', config: { rules: { field: 'input.go', op: 'eq', value: true } } }],
          edges: [{ from: 't', to: 'w' }, { from: 'w', to: 'c' }, { from: 'c', to: 'w', branch: 'true' }],
        },
      },
    })).body.data;
    const id = (await t.rest('POST', `/v1/flows/${flow.id}/executions`, { key: other.testKey, body: { input: { go: true } } })).body.data.id;
    const ex = await until(() => t.rest('GET', `/v1/flows/${flow.id}/executions/${id}`, { key: other.testKey }).then((r) => r.body.data), (e: any) => e.status === 'failed');
    expect(ex.error).toMatchObject({ code: 'STEP_LIMIT' });
    expect(ex.steps_count).toBe(6);
  });
});
