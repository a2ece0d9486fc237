/**
 * Agents end to end over HTTP (REST and GraphQL) against the real database, with the sandbox model:
 * chat with conversations, measured tokens and latency and recorded usage, provider failures that
 * write nothing, context limits, webhook tools (signed, through the safe HTTP client), built-in
 * tools, guardrails and the test endpoint. The other agents-*.test.ts files cover the rest; shared
 * setup is in helpers/agents.ts.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp, TestOrg } from './helpers/testApp.ts';
import { expectError, startAgentsApp, agentsHelpers, type AgentsApp } from './helpers/agents.ts';

let app: AgentsApp;
let t: TestApp;
let org: TestOrg;
let hookUrl: string;
let hookCalls: AgentsApp['hookCalls'];

beforeAll(async () => {
  ({ t, org, hookUrl, hookCalls } = app = await startAgentsApp());
});

afterAll(async () => {
  await app?.close();
});

const { call, createAgent, deployedAgent, chat } = agentsHelpers(() => t, () => org);

describe('chat', () => {
  it('answers with the spec shape, continues a conversation, stores messages and records usage', async () => {
    const a = await deployedAgent();
    const r = await chat(a.id, { message: 'Where is my order?', context: { customer: 'Ann' } });
    expect(r.status, r.text).toBe(200);
    const d = r.body.data;
    expect(d).toMatchObject({ role: 'assistant', tool_calls: [] });
    expect(d.conversation_id).toMatch(/^conv_/);
    expect(d.message_id).toMatch(/^amsg_/);
    expect(d.content).toContain('Where is my order?');
    expect(d.tokens_used.input).toBeGreaterThan(5);
    expect(d.tokens_used.output).toBeGreaterThan(5);
    expect(d.latency_ms).toBeGreaterThanOrEqual(5);
    const second = (await chat(a.id, { message: 'Thanks', conversation_id: d.conversation_id })).body.data;
    expect(second.conversation_id).toBe(d.conversation_id);
    // The history goes to the model: the second prompt is longer.
    expect(second.tokens_used.input).toBeGreaterThan(d.tokens_used.input);

    const msgs = await call('GET', `/v1/agents/${a.id}/conversations/${d.conversation_id}/messages`);
    expect(msgs.body.data.map((m: any) => m.role)).toEqual(['assistant', 'user', 'assistant', 'user']);
    expect(msgs.body.data[3]).toMatchObject({ content: 'Where is my order?', role: 'user' });
    expect(msgs.body.data[2].tokens_used).toEqual(d.tokens_used);
    const convs = await call('GET', `/v1/agents/${a.id}/conversations?status=active`);
    expect(convs.body.data).toHaveLength(1);
    expect(convs.body.data[0]).toMatchObject({ conversation_id: d.conversation_id, status: 'active', turns: 2, channel: 'api', context: { customer: 'Ann' } });

    const usage = await t.db.query(`select kind, sum(quantity)::int as q from usage_entries where organization_id = $1 and resource_id = $2 group by kind order by kind`, [org.orgId, a.id]);
    expect(usage.rows).toEqual([
      { kind: 'agent.invocation', q: 2 },
      { kind: 'agent.tokens.input', q: d.tokens_used.input + second.tokens_used.input },
      { kind: 'agent.tokens.output', q: d.tokens_used.output + second.tokens_used.output },
    ]);
  });

  it('provider errors answer 502 LLM_PROVIDER_ERROR and write nothing', async () => {
    const a = await deployedAgent();
    const r = await chat(a.id, { message: 'please #provider-error' });
    expectError(r, 502, 'LLM_PROVIDER_ERROR');
    const n = await t.db.query('select count(*)::int as n from agent_messages where agent_id = $1', [a.id]);
    expect(n.rows[0].n).toBe(0);
  });

  it('checks the context window before the call, and maps a provider refusal to CONTEXT_TOO_LONG', async () => {
    const small = await deployedAgent({ model: 'sandbox-small' });
    const long = await chat(small.id, { message: 'word '.repeat(3000) });
    expectError(long, 422, 'CONTEXT_TOO_LONG');
    expect(long.body.error.details).toMatchObject({ limit: 2048 });
    const a = await deployedAgent();
    expectError(await chat(a.id, { message: 'hi #context-overflow' }), 422, 'CONTEXT_TOO_LONG');
    expectError(await chat(a.id, { message: 'hi', conversation_id: 'conv_01jd0000000000000000000000' }), 404, 'NOT_FOUND');
  });

  it('max_tokens cuts a long answer', async () => {
    const a = await deployedAgent({ max_tokens: 20 });
    const r = (await chat(a.id, { message: 'tell me everything #long-reply' })).body.data;
    expect(r.tokens_used.output).toBeLessThanOrEqual(20);
  });
});

describe('tools', () => {
  it('calls a webhook tool with a signed POST and returns its output in tool_calls', async () => {
    const a = await createAgent({ channels: ['web'], tools: [{ name: 'order_status', description: 'Look up an order', endpoint: `${hookUrl}/ok`, method: 'POST', parameters: { order: { type: 'string', description: 'number' } } }] });
    await call('POST', `/v1/agents/${a.id}/deploy`, { body: {} });
    hookCalls.length = 0;
    const r = await chat(a.id, { message: '#tool:order_status{"order":"A-42"} where is it' });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data.tool_calls).toEqual([{ tool: 'order_status', input: { order: 'A-42' }, output: { order: 'A-42', status: 'shipped' } }]);
    expect(r.body.data.content).toContain('shipped');
    expect(hookCalls).toHaveLength(1);
    const sent = JSON.parse(hookCalls[0]!.body);
    expect(sent).toMatchObject({ tool: 'order_status', input: { order: 'A-42' }, agent_id: a.id, conversation_id: r.body.data.conversation_id });
    expect(hookCalls[0]!.headers['x-service-signature']).toBe(createHmac('sha256', a.tool_signing_secret).update(hookCalls[0]!.body).digest('hex'));
  });

  it('each turn of an agent reaches its tools as its own turn (tool objects are kept per agent)', async () => {
    const a = await createAgent({ channels: ['web'], tools: [{ name: 'order_status', description: 'Look up an order', endpoint: `${hookUrl}/ok`, method: 'POST', parameters: { order: { type: 'string' } } }] });
    await call('POST', `/v1/agents/${a.id}/deploy`, { body: {} });
    expect((await chat(a.id, { message: '#tool:order_status{"order":"A-0"}' })).status).toBe(200); // the agent is now held by the cache
    hookCalls.length = 0;
    // Turns at once on the same agent: each webhook call names its own turn's conversation.
    const turns = await Promise.all(['A-1', 'A-2', 'A-3', 'A-4'].map((order) => chat(a.id, { message: `#tool:order_status{"order":"${order}"}` })));
    expect(turns.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const sent = hookCalls.map((h) => JSON.parse(h.body) as { input: { order: string }; conversation_id: string });
    expect(sent).toHaveLength(4);
    for (const [i, r] of turns.entries()) {
      expect(sent.find((x) => x.input.order === `A-${i + 1}`)?.conversation_id).toBe(r.body.data.conversation_id);
    }
    expect(new Set(sent.map((x) => x.conversation_id)).size).toBe(4);
  });

  it('a failing tool is a tool result with the error; unrecovered it is TOOL_EXECUTION_FAILED', async () => {
    const a = await deployedAgent({ tools: [{ name: 'flaky', endpoint: `${hookUrl}/fail` }, { name: 'collect_payment', description: 'pay' }] });
    const recovered = await chat(a.id, { message: '#tool:flaky try' });
    expect(recovered.status).toBe(200);
    expect(recovered.body.data.tool_calls[0]).toMatchObject({ tool: 'flaky', error: 'flaky answered HTTP 500' });
    expect(recovered.body.data.content).toContain('could not use flaky');
    expectError(await chat(a.id, { message: '#tool:flaky try #no-recover' }), 500, 'TOOL_EXECUTION_FAILED');
    const pay = (await chat(a.id, { message: '#tool:collect_payment{"amount":500}' })).body.data;
    expect(pay.tool_calls[0].error).toContain('not configured');
  });

  it('human_handoff marks the conversation for a human and emits conversation.handoff', async () => {
    const a = await deployedAgent({ tools: [{ name: 'human_handoff', description: 'escalate' }] });
    const r = (await chat(a.id, { message: '#tool:human_handoff{"reason":"angry"}' })).body.data;
    expect(r.handoff).toBe(true);
    const ev = await t.db.query(`select data from events where type = 'conversation.handoff' and resource_id = $1`, [r.conversation_id]);
    expect(ev.rows[0].data).toMatchObject({ reason: 'angry', agent_id: a.id });
  });

  it('send_message sends through messaging (consent enforced by messaging)', async () => {
    const a = await deployedAgent({ tools: [{ name: 'send_message', description: 'text the customer' }] });
    const r = (await chat(a.id, { message: '#tool:send_message{"to":"+14155550188","body":"Your code is ready"}' })).body.data;
    expect(r.tool_calls[0].output.message_id).toMatch(/^msg_/);
    const m = await call('GET', `/v1/messages/${r.tool_calls[0].output.message_id}`);
    expect(m.body.data).toMatchObject({ to: '+14155550188', channel: 'sms' });
  });
});

describe('guardrails', () => {
  it('a blocked answer is GUARDRAIL_VIOLATION; the decision and the replacement are stored', async () => {
    const a = await deployedAgent();
    await call('PATCH', `/v1/agents/${a.id}/guardrails`, { body: { content_filter: true } });
    const r = await chat(a.id, { message: 'say it #blocked-output' });
    expectError(r, 422, 'GUARDRAIL_VIOLATION');
    expect(r.body.error.details.guardrail).toBe('content_filter');
    const msg = await t.db.query('select content, guardrails from agent_messages where id = $1', [r.body.error.details.message_id]);
    expect(msg.rows[0].content).not.toContain('4111');
    expect(msg.rows[0].guardrails).toEqual([{ guardrail: 'content_filter', action: 'blocked', detail: 'damn' }]);
  });

  it('PII is redacted in what is stored and sent; escalation keywords hand off; max_turns ends the conversation', async () => {
    const a = await deployedAgent({ guardrails: { pii_redaction: true, escalation_keywords: ['lawyer'], max_turns: 2 } });
    const r = (await chat(a.id, { message: 'I am ann@example.com, card 4111 1111 1111 1111' })).body.data;
    expect(r.content).toContain('[email]');
    expect(r.content).not.toContain('ann@example.com');
    const stored = await t.db.query(`select content, guardrails from agent_messages where conversation_id = $1 and role = 'user'`, [r.conversation_id]);
    expect(stored.rows[0].content).toBe('I am [email], card [card]');
    expect(stored.rows[0].guardrails[0]).toMatchObject({ guardrail: 'pii_redaction', action: 'redacted' });
    const esc = (await chat(a.id, { message: 'I will call my lawyer', conversation_id: r.conversation_id })).body.data;
    expect(esc.handoff).toBe(true);
    expect(esc.conversation_ended).toBe(true);
    expect(esc.guardrails.map((g: any) => g.guardrail)).toEqual(['escalation_keywords']);
    expectError(await chat(a.id, { message: 'hello?', conversation_id: r.conversation_id }), 409, 'CONFLICT');
    const conv = (await call('GET', `/v1/agents/${a.id}/conversations?status=completed`)).body.data[0];
    expect(conv).toMatchObject({ conversation_id: r.conversation_id, ended_reason: 'max_turns', handoff: true });
  });
});

describe('test endpoint', () => {
  it('runs scripted turns with expectations; nothing is sent and usage is test usage', async () => {
    const a = await createAgent({ tools: [{ name: 'send_message', description: 'text' }], guardrails: { escalation_keywords: ['manager'] } });
    const before = (await t.db.query(`select count(*)::int as n from messages where organization_id = $1`, [org.orgId])).rows[0].n;
    const r = await call('POST', `/v1/agents/${a.id}/test`, { body: { turns: [
      { message: 'hello there', expect: { contains: 'hello there' } },
      { message: '#tool:send_message{"to":"+14155550199","body":"hi"}', expect: { tool: 'send_message' } },
      { message: 'get me a manager', expect: { handoff: true } },
    ] } });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data.passed).toBe(true);
    expect(r.body.data.simulated).toBe(true);
    expect(r.body.data.turns[1].tool_calls[0].output).toMatchObject({ simulated: true });
    expect(r.body.data.turns[2].guardrails[0]).toMatchObject({ guardrail: 'escalation_keywords' });
    const after = (await t.db.query(`select count(*)::int as n from messages where organization_id = $1`, [org.orgId])).rows[0].n;
    expect(after).toBe(before);
    const kinds = (await t.db.query(`select distinct kind from usage_entries where resource_id = $1`, [a.id])).rows.map((x) => x.kind);
    expect(kinds).toContain('agent.test_invocation');
    expect(kinds).not.toContain('agent.invocation');
    const failing = await call('POST', `/v1/agents/${a.id}/test`, { body: { message: 'hi', turns: [{ message: 'x' }] } });
    expectError(failing, 422, 'VALIDATION_ERROR');
    const unmet = await call('POST', `/v1/agents/${a.id}/test`, { body: { turns: [{ message: 'hi', expect: { contains: 'banana' } }] } });
    expect(unmet.body.data.passed).toBe(false);
  });
});
