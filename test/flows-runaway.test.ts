/**
 * Flows that would run away (issue 43): a flow triggered by what it does itself. Over HTTP against
 * the real database with the workers and the sandbox providers:
 * - a flow on `message.queued` that sends an SMS (its filter lets its own messages through): one
 *   SMS starts a chain that stops at FLOWS_MAX_CHAIN_DEPTH (5): six executions, six messages, then
 *   one execution recorded `failed` with CHAIN_DEPTH_EXCEEDED and its `flow.execution.failed`
 *   event, and nothing more; every message a flow sent, and its events, carry the chain's depth;
 *   the same through contact changes (a flow on `contact.updated` that tags the contact);
 * - a trigger that certainly matches what the flow's own nodes emit is refused at save (422);
 * - FLOWS_MAX_EXECUTIONS_PER_MINUTE per flow: the api trigger answers 429 RATE_LIMIT_EXCEEDED over
 *   it, outbox triggers record `failed` executions with that code; other flows go on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventuallyHolds } from './helpers/assertions.ts';

let t: TestApp;
let org: TestOrg;

beforeAll(async () => {
  // The cap is low for its test, above the six executions of the chain test's one flow.
  t = await startTestApp({ workers: true, clock: systemClock, env: { FLOWS_MAX_EXECUTIONS_PER_MINUTE: '8', SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_DELIVERED_AFTER_MS: '50' } });
  org = await t.createOrg('enterprise', 'Runaway org');
});
afterAll(async () => { await t?.close(); });

const rest = (method: string, path: string, body?: unknown) => t.rest(method, path, { key: org.testKey, ...(body !== undefined ? { body } : {}) });

const until = <T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> => eventuallyHolds('the flow', read, ok, ms);
const executionsOf = async (flowId: string): Promise<any[]> => {
  const all: any[] = [];
  let cursor: string | undefined;
  do {
    const r = await rest('GET', `/v1/flows/executions?flow_id=${flowId}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    all.push(...r.body.data);
    cursor = r.body.meta.pagination.has_more ? r.body.meta.pagination.cursor : undefined;
  } while (cursor);
  return all;
};
const messagesTo = async (to: string) => (await t.db.query<{ id: string; chain_depth: number | null }>(
  'select id, chain_depth from messages where organization_id = $1 and "to" = $2 and direction = $3 order by id', [org.orgId, to, 'outbound'])).rows;

const echo = (trigger: Record<string, unknown>) => ({
  name: 'Echo', trigger,
  definition: {
    nodes: [{ id: 't', type: 'trigger' }, { id: 'send', type: 'send_message', config: { channel: 'sms', to: '{{input.to}}', body: 'again' } }],
    edges: [{ from: 't', to: 'send' }],
  },
});

describe('a flow triggered by its own messages', () => {
  it('stops at the chain depth: a bounded number of executions and messages, the last start failed with the reason and its event', async () => {
    // The filter is no guard against itself (the flow sends SMS), so the save-time check lets it through: the runtime limit must stop it.
    const created = await rest('POST', '/v1/flows', echo({ type: 'event', event: 'message.queued', filter: { field: 'data.channel', op: 'eq', value: 'sms' } }));
    expect(created.status, created.text).toBe(201);
    const flowId: string = created.body.data.id;
    const to = '+14155550142';
    expect((await rest('POST', '/v1/messages/sms', { to, body: 'first' })).status).toBe(201);

    const refusedOf = (list: any[]) => list.filter((e) => e.status === 'failed' && e.error?.code === 'CHAIN_DEPTH_EXCEEDED');
    const list = await until(() => executionsOf(flowId), (l) => refusedOf(l).length > 0 && l.every((e) => e.status !== 'running'));
    expect(refusedOf(list)).toHaveLength(1);
    // Nothing more happens afterwards (a short bounded wait).
    await new Promise((r) => setTimeout(r, 1_500));
    const after = await executionsOf(flowId);
    // Depths 0..5 ran (the API's SMS started depth 0), the start at depth 6 was refused.
    expect(after).toHaveLength(7);
    expect(after.filter((e) => e.status === 'completed')).toHaveLength(6);
    const refused = refusedOf(after)[0];
    expect(refused).toMatchObject({ status: 'failed', error: { node: null, code: 'CHAIN_DEPTH_EXCEEDED' }, steps_count: 1 });
    expect(refused.error.message).toMatch(/FLOWS_MAX_CHAIN_DEPTH/);
    const messages = await messagesTo(to);
    expect(messages.map((m) => m.chain_depth)).toEqual([null, 1, 2, 3, 4, 5, 6]);

    // Every event of a flow's message carries its depth; the refusal has its failed event.
    const { rows: queued } = await t.db.query<{ data: any }>(`select data from events where organization_id = $1 and type = 'message.queued' and data->>'to' = $2 order by id`, [org.orgId, to]);
    expect(queued.map((e) => e.data.depth ?? null)).toEqual([null, 1, 2, 3, 4, 5, 6]);
    const delivered = await until(async () => (await t.db.query<{ data: any }>(`select data from events where organization_id = $1 and type = 'message.delivered' and data->>'message_id' = $2`, [org.orgId, messages[3]!.id])).rows, (r) => r.length > 0);
    expect(delivered[0]!.data.depth).toBe(3);
    const { rows: failed } = await t.db.query<{ data: any }>(`select data from events where organization_id = $1 and type = 'flow.execution.failed' and resource_id = $2`, [org.orgId, refused.id]);
    expect(failed).toHaveLength(1);
    expect(failed[0]!.data).toMatchObject({ execution_id: refused.id, flow_id: flowId, status: 'failed', error: { code: 'CHAIN_DEPTH_EXCEEDED' }, depth: 7 });
  }, 60_000);

  it('stops at the chain depth when the loop goes through contact changes', async () => {
    const created = await rest('POST', '/v1/flows', {
      name: 'Retag', trigger: { type: 'event', event: 'contact.updated', filter: { field: 'data.phone', op: 'starts_with', value: '+1' } },
      definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'tag', type: 'add_tag', config: { contact_id: '{{input.contact_id}}', tags: ['seen'] } }], edges: [{ from: 't', to: 'tag' }] },
    });
    expect(created.status, created.text).toBe(201);
    const contact = (await rest('POST', '/v1/contacts', { phone: '+14155550177' })).body.data;
    expect((await rest('PUT', `/v1/contacts/${contact.id}`, { first_name: 'Ada' })).status).toBe(200);
    const refusedOf = (list: any[]) => list.filter((e) => e.error?.code === 'CHAIN_DEPTH_EXCEEDED');
    await until(() => executionsOf(created.body.data.id), (l) => refusedOf(l).length > 0 && l.every((e) => e.status !== 'running'));
    await new Promise((r) => setTimeout(r, 1_500));
    const after = await executionsOf(created.body.data.id);
    expect(after).toHaveLength(7);
    expect(refusedOf(after)).toHaveLength(1);
    const { rows } = await t.db.query<{ depth: number | null }>(`select (data->>'depth')::int as depth from events where type = 'contact.updated' and resource_id = $1 order by id`, [contact.id]);
    expect(rows.map((r) => r.depth)).toEqual([null, 1, 2, 3, 4, 5, 6]);
  }, 60_000);
});

describe('a trigger matching what the flow itself causes', () => {
  const count = async () => (await t.db.query<{ n: number }>('select count(*)::int as n from flows where organization_id = $1', [org.orgId])).rows[0]!.n;

  it('is refused at create and update (REST and GraphQL) with the node that causes it; a filtered one is accepted', async () => {
    const before = await count();
    for (const event of ['message.queued', 'message.delivered', 'message.failed']) {
      const r = await rest('POST', '/v1/flows', echo({ type: 'event', event }));
      expect(r.status, r.text).toBe(422);
      expect(r.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'trigger.event', node: 'send', value: event, reason: 'self_trigger' } });
      expect(r.body.error.message).toMatch(/data\.depth/);
    }
    const tagger = await rest('POST', '/v1/flows', {
      name: 'Tagger', trigger: { type: 'event', event: 'contact.updated' },
      definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'tag', type: 'add_tag', config: { contact_id: '{{input.contact_id}}', tags: ['seen'] } }], edges: [{ from: 't', to: 'tag' }] },
    });
    expect(tagger.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'trigger.event', node: 'tag' } });
    const done = { nodes: [{ id: 't', type: 'trigger' }, { id: 'end', type: 'end' }], edges: [{ from: 't', to: 'end' }] };
    const onCompleted = await rest('POST', '/v1/flows', { name: 'After any flow', trigger: { type: 'event', event: 'flow.execution.completed' }, definition: done });
    expect(onCompleted.status).toBe(422);
    expect(onCompleted.body.error.details).toMatchObject({ field: 'trigger.event', value: 'flow.execution.completed' });
    const gql = await t.gql('mutation($input: CreateFlowInput!) { createFlow(input: $input) { id } }', { input: echo({ type: 'event', event: 'message.sent' }) }, { key: org.testKey });
    expect(gql.body.errors?.[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'trigger.event', node: 'send' } });
    expect(await count()).toBe(before);

    // Filtered: accepted (the filter may leave the flow's own events out).
    const filtered = await rest('POST', '/v1/flows', echo({ type: 'event', event: 'message.queued', filter: { field: 'data.depth', op: 'not_exists' } }));
    expect(filtered.status, filtered.text).toBe(201);
    const afterOther = await rest('POST', '/v1/flows', { name: 'After another flow', trigger: { type: 'event', event: 'flow.execution.completed', filter: { field: 'data.flow_id', op: 'eq', value: filtered.body.data.id } }, definition: done });
    expect(afterOther.status, afterOther.text).toBe(201);

    // Update: a new trigger, or a new definition under the trigger kept, that would make the flow start itself.
    const api = (await rest('POST', '/v1/flows', echo({ type: 'api' }))).body.data;
    const retrigger = await rest('PUT', `/v1/flows/${api.id}`, { trigger: { type: 'event', event: 'message.queued' } });
    expect(retrigger.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'trigger.event', node: 'send' } });
    const onSent = (await rest('POST', '/v1/flows', { name: 'On sent', trigger: { type: 'event', event: 'message.sent' }, definition: done })).body.data;
    const redefine = await rest('PUT', `/v1/flows/${onSent.id}`, { definition: echo({}).definition });
    expect(redefine.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'trigger.event', node: 'send' } });
    const gqlUpdate = await t.gql('mutation($id: ID!, $input: UpdateFlowInput!) { updateFlow(id: $id, input: $input) { version } }',
      { id: api.id, input: { trigger: { type: 'event', event: 'message.delivered' } } }, { key: org.testKey });
    expect(gqlUpdate.body.errors?.[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'trigger.event' } });
    expect((await rest('GET', `/v1/flows/${api.id}`)).body.data.version).toBe(1);
    expect((await rest('GET', `/v1/flows/${onSent.id}`)).body.data.version).toBe(1);
  });
});

describe('executions per flow per minute (FLOWS_MAX_EXECUTIONS_PER_MINUTE = 8 here)', () => {
  const waitFlow = (trigger: object) => ({
    name: 'Long wait', trigger,
    definition: { nodes: [{ id: 't', type: 'trigger' }, { id: 'w', type: 'wait', config: { seconds: 3600 } }], edges: [{ from: 't', to: 'w' }] },
  });

  it('the api trigger answers 429 RATE_LIMIT_EXCEEDED over the cap; another flow goes on', async () => {
    const flow = (await rest('POST', '/v1/flows', waitFlow({ type: 'api' }))).body.data;
    for (let i = 0; i < 8; i++) expect((await rest('POST', `/v1/flows/${flow.id}/executions`, {})).status).toBe(201);
    const over = await rest('POST', `/v1/flows/${flow.id}/executions`, {});
    expect(over.status).toBe(429);
    expect(over.body.error).toMatchObject({ code: 'RATE_LIMIT_EXCEEDED', details: { limit: 8, window: '60s', flow_id: flow.id } });
    expect(over.body.error.details.retry_after).toBeGreaterThan(0);
    expect(over.body.error.details.retry_after).toBeLessThanOrEqual(60);
    expect(over.headers.get('retry-after')).toBe(String(over.body.error.details.retry_after));
    const gql = await t.gql('mutation($id: ID!) { startFlowExecution(flowId: $id, input: {}) { id } }', { id: flow.id }, { key: org.testKey });
    expect(gql.body.errors?.[0].extensions).toMatchObject({ code: 'RATE_LIMIT_EXCEEDED', details: { limit: 8 } });
    expect(await executionsOf(flow.id)).toHaveLength(8);

    const another = (await rest('POST', '/v1/flows', waitFlow({ type: 'api' }))).body.data;
    expect((await rest('POST', `/v1/flows/${another.id}/executions`, {})).status).toBe(201);
  });

  it('an event trigger over the cap records failed executions that say why, with their event', async () => {
    const flow = (await rest('POST', '/v1/flows', waitFlow({ type: 'event', event: 'contact.created' }))).body.data;
    for (let i = 0; i < 10; i++) expect((await rest('POST', '/v1/contacts', { phone: `+1415555${String(2000 + i)}` })).status).toBe(201);
    await until(() => executionsOf(flow.id), (l) => l.length >= 10);
    await new Promise((r) => setTimeout(r, 500));
    const all = await executionsOf(flow.id);
    expect(all).toHaveLength(10);
    const over = all.filter((e) => e.status === 'failed');
    expect(over).toHaveLength(2);
    expect(all.filter((e) => e.status === 'waiting' || e.status === 'running')).toHaveLength(8);
    for (const e of over) {
      expect(e.error).toMatchObject({ node: null, code: 'RATE_LIMIT_EXCEEDED' });
      expect(e.error.message).toMatch(/FLOWS_MAX_EXECUTIONS_PER_MINUTE/);
    }
    const { rows } = await t.db.query<{ n: number }>(`select count(*)::int as n from events where type = 'flow.execution.failed' and resource_id = any($1::text[]) and data->'error'->>'code' = 'RATE_LIMIT_EXCEEDED'`, [over.map((e) => e.id)]);
    expect(rows[0]!.n).toBe(2);
  });
});
