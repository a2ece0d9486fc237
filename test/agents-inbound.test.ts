/**
 * A deployed agent bound to a number answers inbound SMS on that number, end to end over HTTP with
 * the workers and the sandbox model: one conversation per contact and channel (a second message
 * continues it), the answer sent from the bound number to the contact, exactly once per inbound
 * message even when its job runs again; a paused agent and another number get no answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

let t: TestApp;
let org: TestOrg;
let bound: string;
let other: string;
let agentId: string;

const call = (method: string, path: string, body?: unknown) => t.rest(method, path, { key: org.testKey, ...(body !== undefined ? { body } : {}) });
const repliesTo = async (to: string) => (await t.db.query(
  `select id, "from", body, metadata from messages where organization_id = $1 and direction = 'outbound' and "to" = $2 order by created_at`, [org.orgId, to])).rows;
const inbound = async (from: string, to: string, body: string) => {
  const r = await call('POST', '/v1/sandbox/inbound', { channel: 'sms', from, to, body });
  expect(r.status, r.text).toBe(201);
  return r.body.data.id as string;
};

beforeAll(async () => {
  t = await startTestApp({ workers: true, clock: systemClock, env: { SANDBOX_SEND_LATENCY_MS: '0', SANDBOX_LLM_FIRST_TOKEN_MS: '0', SANDBOX_LLM_CHUNK_MS: '0' } });
  org = await t.createOrg('enterprise', 'Inbound agents');
  const listing = (await call('GET', '/v1/numbers/available?country=US&limit=2')).body.data;
  const boundNumber = (await call('POST', '/v1/numbers', { number: listing[0].number })).body.data;
  bound = boundNumber.number;
  other = (await call('POST', '/v1/numbers', { number: listing[1].number })).body.data.number;
  const a = await call('POST', '/v1/agents', { name: 'Front desk', type: 'conversational', model: 'sandbox-1', system_prompt: 'You answer questions about opening hours.', channels: ['sms'] });
  expect(a.status, a.text).toBe(201);
  agentId = a.body.data.id;
  const d = await call('POST', `/v1/agents/${agentId}/deploy`, { number_id: boundNumber.id });
  expect(d.status, d.text).toBe(200);
  expect(d.body.data.bound_number).toBe(bound);
});
afterAll(async () => { await t?.close(); });

describe('agents on their bound number', () => {
  it('answers an inbound SMS from the bound number, in one conversation per contact that a second message continues', async () => {
    const contact = '+14155558801';
    const first = await inbound(contact, bound, 'When do you open on Saturday?');
    const [reply] = await eventually('the agent reply', async () => ((await repliesTo(contact)).length === 1 ? repliesTo(contact) : undefined), 20_000);
    expect(reply.from).toBe(bound);
    expect(reply.body.length).toBeGreaterThan(0);
    expect(reply.metadata).toMatchObject({ agent_id: agentId, in_reply_to: first });
    const conversations = (await call('GET', `/v1/agents/${agentId}/conversations`)).body.data;
    expect(conversations).toHaveLength(1);
    expect(conversations[0]).toMatchObject({ channel: 'sms', contact_address: contact, status: 'active' });

    await inbound(contact, bound, 'And on Sunday?');
    await eventually('the second reply', async () => ((await repliesTo(contact)).length === 2 ? true : undefined), 20_000);
    const again = (await call('GET', `/v1/agents/${agentId}/conversations`)).body.data;
    expect(again).toHaveLength(1);
    const messages = (await call('GET', `/v1/agents/${agentId}/conversations/${again[0].id}/messages`)).body.data;
    expect(messages.filter((m: any) => m.role === 'user').map((m: any) => m.content).sort()).toEqual(['And on Sunday?', 'When do you open on Saturday?']);

    // Another contact: its own conversation.
    await inbound('+14155558802', bound, 'Hello?');
    await eventually('the other contact reply', async () => ((await repliesTo('+14155558802')).length === 1 ? true : undefined), 20_000);
    expect((await call('GET', `/v1/agents/${agentId}/conversations`)).body.data).toHaveLength(2);
  });

  it('a reply job run again sends nothing twice', async () => {
    const contact = '+14155558803';
    const id = await inbound(contact, bound, 'Are you open today?');
    await eventually('the reply', async () => ((await repliesTo(contact)).length === 1 ? true : undefined), 20_000);
    const scope = systemScope(org.orgId, 'test', 'enterprise', 'rerun');
    await t.app.services.agentInbound.reply(scope, { messageId: id, agentId, channel: 'sms', from: contact, to: bound });
    expect(await repliesTo(contact)).toHaveLength(1);
  });

  it('no answer on another number or from a paused agent', async () => {
    await inbound('+14155558804', other, 'Anyone there?');
    expect((await call('POST', `/v1/agents/${agentId}/pause`)).status).toBe(200);
    await inbound('+14155558805', bound, 'Hello while paused');
    // The relay and workers run every second: give them time to (not) answer.
    await new Promise((r) => setTimeout(r, 3000));
    expect(await repliesTo('+14155558804')).toHaveLength(0);
    expect(await repliesTo('+14155558805')).toHaveLength(0);
    const { rows } = await t.db.query(`select count(*)::int as c from pgboss.job where name = 'agents.inbound-reply' and data->'data'->>'from' = '+14155558804'`);
    expect(rows[0].c).toBe(0);
  });
});
