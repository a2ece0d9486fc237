/**
 * Agents end to end over HTTP (REST and GraphQL) against the real database, with the sandbox model:
 * CRUD and the lifecycle table, chat with conversations, measured tokens and latency and recorded
 * usage, provider failures that write nothing, context limits, webhook tools (signed, through the
 * safe HTTP client), built-in tools, guardrails, streaming over SSE (and a client leaving mid-stream),
 * the agentChat subscription, knowledge upload and retrieval, the test endpoint, the marketplace.
 */
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../src/platform/clock.ts';
import { agentTurns } from '../src/modules/agents/agents.turns.ts';
import { startTestApp, type CallOptions, type HttpResponse, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let hook: http.Server;
let hookUrl: string;
const hookCalls: { headers: http.IncomingHttpHeaders; body: string }[] = [];

beforeAll(async () => {
  hook = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      hookCalls.push({ headers: req.headers, body });
      if (req.url === '/fail') {
        res.writeHead(500).end('{"error":"down"}');
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ order: 'A-42', status: 'shipped' }));
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
  t = await startTestApp({
    workers: true,
    env: { WEBHOOKS_ALLOW_LOOPBACK: '1', SANDBOX_LLM_FIRST_TOKEN_MS: '5', SANDBOX_LLM_CHUNK_MS: '3', SANDBOX_MARKETPLACE_REVIEW_MS: '0' },
  });
  org = await t.createOrg('enterprise', 'Agents org');
  other = await t.createOrg('enterprise', 'Other org');
});

afterAll(async () => {
  await t?.close();
  await new Promise((r) => hook?.close(r));
});

const clock = () => t.clock as ManualClock;
async function call<T = any>(method: string, path: string, o: CallOptions = {}): Promise<HttpResponse<T>> {
  clock().advance(20);
  return t.rest<T>(method, path, { key: org.testKey, ...o });
}
async function gql(query: string, variables?: Record<string, unknown>, key = org.testKey) {
  clock().advance(20);
  return t.gql<any>(query, variables, { key });
}
function expectError(r: HttpResponse, status: number, code: string) {
  expect({ status: r.status, code: r.body?.error?.code }).toEqual({ status, code });
}

const BASE = { name: 'Helper', type: 'conversational', model: 'sandbox-1', system_prompt: 'You are a helpful assistant.' };
async function createAgent(extra: Record<string, unknown> = {}, key = org.testKey) {
  const r = await call('POST', '/v1/agents', { key, body: { ...BASE, ...extra } });
  expect(r.status, r.text).toBe(201);
  return r.body.data;
}
async function deployedAgent(extra: Record<string, unknown> = {}) {
  const a = await createAgent({ channels: ['web'], ...extra });
  const d = await call('POST', `/v1/agents/${a.id}/deploy`, { body: {} });
  expect(d.status, d.text).toBe(200);
  return a;
}
const chat = (id: string, body: Record<string, unknown>) => call('POST', `/v1/agents/${id}/chat`, { body });

/** Reads an SSE response into events (name + parsed data). */
async function readSse(res: Response, stopAfter?: number): Promise<{ event: string; data: any }[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const events: { event: string; data: any }[] = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    let i: number;
    while ((i = text.indexOf('\n\n')) >= 0) {
      const frame = text.slice(0, i);
      text = text.slice(i + 2);
      const event = /^event: (.*)$/m.exec(frame)?.[1] ?? 'message';
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      events.push({ event, data: data ? JSON.parse(data) : null });
    }
    if (stopAfter !== undefined && events.length >= stopAfter) {
      await reader.cancel();
      break;
    }
  }
  return events;
}
const streamChat = (id: string, body: Record<string, unknown>, signal?: AbortSignal) => {
  clock().advance(20);
  return fetch(`${t.baseUrl}/v1/agents/${id}/chat`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': org.testKey }, body: JSON.stringify({ ...body, stream: true }), signal,
  });
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until<T>(f: () => Promise<T | undefined>, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await sleep(50);
  }
}

describe('agent configuration', () => {
  it('creates a draft agent with defaults and the create result of the spec', async () => {
    const a = await createAgent({ tools: [{ name: 'lookup', description: 'Find', endpoint: `${hookUrl}/ok`, parameters: { q: { type: 'string', description: 'query' } } }] });
    expect(a).toMatchObject({ name: 'Helper', type: 'conversational', model: 'sandbox-1', status: 'draft', channels: [], tools_count: 1, temperature: 0.7, max_tokens: 4096 });
    expect(a.id).toMatch(/^agt_/);
    expect(a.created_at).toMatch(/Z$/);
    expect(a.tool_signing_secret).toMatch(/^whsec_/);
    expect(a.tools[0]).toMatchObject({ name: 'lookup', type: 'webhook', method: 'POST' });
    const got = await call('GET', `/v1/agents/${a.id}`);
    expect(got.body.data.tool_signing_secret).toBeUndefined();
    expect(got.body.data.guardrails).toEqual({});
  });

  it('validates required fields and limits', async () => {
    expectError(await call('POST', '/v1/agents', { body: { name: 'x', type: 'task', model: 'm' } }), 422, 'MISSING_REQUIRED_FIELD');
    expectError(await call('POST', '/v1/agents', { body: { ...BASE, temperature: 2.5 } }), 422, 'VALIDATION_ERROR');
    expectError(await call('POST', '/v1/agents', { body: { ...BASE, type: 'robot' } }), 422, 'VALIDATION_ERROR');
    expectError(await call('POST', '/v1/agents', { body: { ...BASE, channels: [{ type: 'sms', phone_number: '12' }] } }), 422, 'INVALID_PHONE_NUMBER');
    expectError(await call('POST', '/v1/agents', { body: { ...BASE, knowledge_base_ids: ['kb_nope'] } }), 404, 'NOT_FOUND');
  });

  it('PUT replaces tools, PATCH takes channel objects, description and instructions; lists filter by status', async () => {
    const a = await createAgent({ tools: [{ name: 'a1', description: 'x', endpoint: `${hookUrl}/ok` }] });
    const put = await call('PUT', `/v1/agents/${a.id}`, { body: { name: 'Renamed', tools: [{ name: 'human_handoff', description: 'escalate' }] } });
    expect(put.body.data).toMatchObject({ name: 'Renamed', tools_count: 1 });
    expect(put.body.data.tools[0]).toMatchObject({ name: 'human_handoff', type: 'human_handoff' });
    const patch = await call('PATCH', `/v1/agents/${a.id}`, { body: { description: 'Desk', instructions: 'Be brief', channels: [{ type: 'sms', phone_number: '+14155550100' }, 'web'] } });
    expect(patch.body.data).toMatchObject({ description: 'Desk', instructions: 'Be brief', channels: ['sms', 'web'] });
    expect(patch.body.data.channel_settings).toEqual([{ type: 'sms', phone_number: '+14155550100' }, { type: 'web' }]);
    expectError(await call('POST', `/v1/agents/${a.id}/tools`, { body: { name: 'human_handoff' } }), 409, 'ALREADY_EXISTS');
    const added = await call('POST', `/v1/agents/${a.id}/tools`, { body: { name: 'kb', type: 'knowledge_base' } });
    expectError(added, 422, 'VALIDATION_ERROR');
    expect((await call('POST', `/v1/agents/${a.id}/tools`, { body: { name: 'knowledge_base', description: 'docs' } })).body.data.tools_count).toBe(2);

    await createAgent();
    await createAgent();
    const drafts = await call('GET', '/v1/agents?status=draft&limit=2');
    expect(drafts.body.data).toHaveLength(2);
    expect(drafts.body.meta.pagination.has_more).toBe(true);
    const next = await call('GET', `/v1/agents?status=draft&limit=2&cursor=${drafts.body.meta.pagination.cursor}`);
    expect(next.body.data[0].id < drafts.body.data[1].id, JSON.stringify([drafts.body.data.map((x: any) => x.id), next.body.data.map((x: any) => x.id)])).toBe(true);
    expect((await call('GET', `/v1/agents/${a.id}`, { key: other.testKey })).status).toBe(404);
    expect((await call('GET', `/v1/agents/${a.id}`, { key: org.liveKey })).status).toBe(404);
  });
});

describe('lifecycle', () => {
  it('follows the state table: draft → active → paused → active; chat only while active', async () => {
    const a = await createAgent();
    expectError(await chat(a.id, { message: 'hi' }), 422, 'AGENT_NOT_DEPLOYED');
    expectError(await call('POST', `/v1/agents/${a.id}/deploy`, { body: {} }), 422, 'VALIDATION_ERROR');
    expectError(await call('POST', `/v1/agents/${a.id}/pause`), 409, 'CONFLICT');
    const d = await call('POST', `/v1/agents/${a.id}/deploy`, { body: { channels: ['web'] } });
    expect(d.body.data).toMatchObject({ id: a.id, status: 'active', deployed_channels: ['web'], bound_number: null });
    expect(d.body.data.deployed_at).toMatch(/Z$/);
    expectError(await call('POST', `/v1/agents/${a.id}/deploy`, { body: {} }), 409, 'CONFLICT');
    expect((await call('POST', `/v1/agents/${a.id}/pause`)).body.data.status).toBe('paused');
    const paused = await chat(a.id, { message: 'hi' });
    expectError(paused, 422, 'AGENT_NOT_DEPLOYED');
    expect(paused.body.error.details.status).toBe('paused');
    expect((await call('POST', `/v1/agents/${a.id}/resume`)).body.data.status).toBe('active');
    expect((await chat(a.id, { message: 'hi' })).status).toBe(200);
  });

  it('binds the first number the organization owns, or number_id, and records the agent on the number', async () => {
    const listing = (await call('GET', '/v1/numbers/available?country=US&limit=2')).body.data;
    const n1 = (await call('POST', '/v1/numbers', { body: { number: listing[0].number } })).body.data;
    const n2 = (await call('POST', '/v1/numbers', { body: { number: listing[1].number } })).body.data;
    const a = await createAgent({ channels: ['sms'] });
    const d = await call('POST', `/v1/agents/${a.id}/deploy`, { body: {} });
    expect(d.body.data).toMatchObject({ status: 'active', deployed_channels: ['sms'], bound_number: n1.number });
    expect((await call('GET', `/v1/numbers/${n1.id}`)).body.data.agent_id).toBe(a.id);
    await call('POST', `/v1/agents/${a.id}/pause`);
    const again = await call('POST', `/v1/agents/${a.id}/deploy`, { body: { number_id: n2.id, channels: ['sms', 'voice'] } });
    expect(again.body.data).toMatchObject({ bound_number: n2.number, deployed_channels: ['sms', 'voice'] });
    expect((await call('GET', `/v1/numbers/${n1.id}`)).body.data.agent_id).toBeNull();
    expect((await call('GET', `/v1/numbers/${n2.id}`)).body.data.agent_id).toBe(a.id);
    await call('POST', `/v1/agents/${a.id}/pause`);
    expectError(await call('POST', `/v1/agents/${a.id}/deploy`, { body: { number_id: 'num_01jd0000000000000000000000' } }), 404, 'NOT_FOUND');
  });

  it('an invalid configuration found at deploy moves the agent to error with a reason', async () => {
    const a = await createAgent({ channels: ['web'], tools: [{ name: 'bad', endpoint: 'http://10.1.2.3/hook' }] });
    const d = await call('POST', `/v1/agents/${a.id}/deploy`, { body: {} });
    expectError(d, 422, 'VALIDATION_ERROR');
    const got = (await call('GET', `/v1/agents/${a.id}`)).body.data;
    expect(got.status).toBe('error');
    expect(got.error_reason).toContain('bad');
    expectError(await chat(a.id, { message: 'hi' }), 422, 'AGENT_NOT_DEPLOYED');
  });

  it('DELETE answers 204 and ends active conversations as completed', async () => {
    const a = await deployedAgent();
    const c = (await chat(a.id, { message: 'hello' })).body.data;
    const del = await call('DELETE', `/v1/agents/${a.id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await call('GET', `/v1/agents/${a.id}`)).status).toBe(404);
    const row = await t.db.query('select status, ended_reason from agent_conversations where id = $1', [c.conversation_id]);
    expect(row.rows[0]).toEqual({ status: 'completed', ended_reason: 'agent_deleted' });
  });
});

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

describe('streaming', () => {
  it('streams chunk, tool_call, tool_result and done events over SSE', async () => {
    const a = await deployedAgent({ tools: [{ name: 'order_status', endpoint: `${hookUrl}/ok` }] });
    const res = await streamChat(a.id, { message: '#tool:order_status{"order":"A-42"}' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events = await readSse(res);
    expect(events[0]).toEqual({ event: 'tool_call', data: { tool: 'order_status', input: { order: 'A-42' } } });
    expect(events[1]).toEqual({ event: 'tool_result', data: { tool: 'order_status', output: { order: 'A-42', status: 'shipped' } } });
    const chunks = events.filter((e) => e.event === 'chunk');
    expect(chunks.length).toBeGreaterThan(3);
    const done = events.at(-1)!;
    expect(done.event).toBe('done');
    expect(done.data.tokens_used.output).toBeGreaterThan(0);
    const msg = await t.db.query('select content from agent_messages where id = $1', [done.data.message_id]);
    expect(msg.rows[0].content).toBe(chunks.map((c) => c.data.content).join(''));
    expect(done.data.conversation_id).toMatch(/^conv_/);
  });

  it('errors before the stream are HTTP errors; errors during it are an error event', async () => {
    const draft = await createAgent();
    const r = await streamChat(draft.id, { message: 'hi' });
    expect(r.status).toBe(422);
    expect((await r.json()).error.code).toBe('AGENT_NOT_DEPLOYED');
    const a = await deployedAgent({ guardrails: { content_filter: true } });
    const events = await readSse(await streamChat(a.id, { message: '#blocked-output' }));
    expect(events.map((e) => e.event)).not.toContain('done');
    expect(events.at(-1)).toMatchObject({ event: 'error', data: { code: 'GUARDRAIL_VIOLATION' } });
    // The blocked words never left.
    expect(events.filter((e) => e.event === 'chunk').map((e) => e.data.content).join('')).not.toMatch(/damn/i);
  });

  it('a client that leaves mid-stream leaves the partial answer stored and marked', async () => {
    const a = await deployedAgent();
    const controller = new AbortController();
    const res = await streamChat(a.id, { message: 'explain #long-reply' }, controller.signal);
    const first = await readSse(res, 3);
    expect(first.every((e) => e.event === 'chunk')).toBe(true);
    controller.abort();
    const row = await until(async () => (await t.db.query('select content, partial from agent_messages where agent_id = $1 and role = $2', [a.id, 'assistant'])).rows[0]);
    expect(row.partial).toBe(true);
    expect(row.content.length).toBeGreaterThan(0);
    expect(row.content.length).toBeLessThan(2000);
  });
});

describe('GraphQL', () => {
  it('creates, deploys, chats and lists through the twins', async () => {
    const created = await gql(`mutation($i: AgentInput!) { createAgent(input: $i) { toolSigningSecret agent { id status toolsCount channels temperature } } }`,
      { i: { name: 'G', type: 'task', model: 'sandbox-1', systemPrompt: 'Be brief', channels: ['web'], tools: [{ name: 'human_handoff' }] } });
    const agent = created.body.data.createAgent.agent;
    expect(agent).toMatchObject({ status: 'draft', toolsCount: 1, channels: ['web'], temperature: 0.7 });
    const dep = await gql('mutation($id: ID!) { deployAgent(id: $id) { status deployedChannels } }', { id: agent.id });
    expect(dep.body.data.deployAgent).toEqual({ status: 'active', deployedChannels: ['web'] });
    const c = await gql('mutation($id: ID!) { chatWithAgent(agentId: $id, message: "hello") { conversationId content tokensUsed { input output } latencyMs } }', { id: agent.id });
    expect(c.body.data.chatWithAgent.content).toContain('hello');
    const list = await gql('query($id: ID!) { agentConversations(agentId: $id) { edges { node { id turns } } } agent(id: $id) { name } }', { id: agent.id });
    expect(list.body.data.agentConversations.edges[0].node).toEqual({ id: c.body.data.chatWithAgent.conversationId, turns: 1 });
    const paused = await gql('mutation($id: ID!) { pauseAgent(id: $id) { status } }', { id: agent.id });
    expect(paused.body.data.pauseAgent.status).toBe('paused');
    const refused = await gql('mutation($id: ID!) { chatWithAgent(agentId: $id, message: "hello") { content } }', { id: agent.id });
    expect(refused.body.errors?.[0].extensions.code).toBe('AGENT_NOT_DEPLOYED');
  });

  it('streams a turn as the agentChat subscription over SSE', async () => {
    const a = await deployedAgent();
    clock().advance(20);
    const res = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', 'X-API-Key': org.testKey },
      body: JSON.stringify({ query: 'subscription($id: ID!) { agentChat(agentId: $id, message: "stream me") { event content conversationId tokensUsed { output } } }', variables: { id: a.id } }),
    });
    expect(res.status).toBe(200);
    const events = (await readSse(res)).filter((e) => e.event === 'next').map((e) => e.data.data.agentChat);
    expect(events.filter((e) => e.event === 'chunk').map((e) => e.content).join('')).toContain('stream me');
    expect(events.at(-1)).toMatchObject({ event: 'done', conversationId: expect.stringMatching(/^conv_/) });
  });
});

describe('knowledge', () => {
  it('indexes an uploaded file and the knowledge_base tool cites the ranked chunks', async () => {
    const a = await deployedAgent({ tools: [{ name: 'knowledge_base', description: 'docs' }] });
    const form = new FormData();
    const text = `# Policies\n\nShipping takes three to five business days within the US.\n\nRefunds are issued within 14 days of the return reaching our warehouse. ${'Filler sentence about nothing. '.repeat(80)}\n\nWarranty covers manufacturing defects for two years.`;
    form.append('file', new Blob([text], { type: 'text/markdown' }), 'policies.md');
    form.append('type', 'md');
    clock().advance(20);
    const up = await fetch(`${t.baseUrl}/v1/agents/${a.id}/knowledge`, { method: 'POST', headers: { 'X-API-Key': org.testKey }, body: form });
    const body = await up.json();
    expect(up.status, JSON.stringify(body)).toBe(201);
    expect(body.data).toMatchObject({ filename: 'policies.md', type: 'md', status: 'indexed' });
    expect(body.data.chunks).toBeGreaterThan(1);
    expect(body.data.knowledge_base_ids).toEqual([body.data.id]);
    const r = (await chat(a.id, { message: '#tool:knowledge_base{"query":"refund warehouse"}' })).body.data;
    expect(r.tool_calls[0].output.results[0].content).toContain('Refunds are issued within 14 days');
    expect(r.tool_calls[0].sources[0]).toMatchObject({ document_id: body.data.id, filename: 'policies.md' });
    // Another agent may attach the same knowledge base by id.
    const b = await createAgent({ knowledge_base_ids: [body.data.id] });
    expect(b.knowledge_base_ids).toEqual([body.data.id]);
  });

  it('refuses unknown types, empty files and non-multipart files with clear errors', async () => {
    const a = await createAgent();
    const form = new FormData();
    form.append('file', new Blob(['x']), 'a.exe');
    clock().advance(20);
    const bad = await fetch(`${t.baseUrl}/v1/agents/${a.id}/knowledge`, { method: 'POST', headers: { 'X-API-Key': org.testKey }, body: form });
    expect((await bad.json()).error).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'type' } });
    expectError(await call('POST', `/v1/agents/${a.id}/knowledge`, { body: { type: 'txt', content: '' } }), 422, 'VALIDATION_ERROR');
    const json = await call('POST', `/v1/agents/${a.id}/knowledge`, { body: { type: 'csv', filename: 'faq.csv', content: 'q,a\nopening hours,9 to 5\n' } });
    expect(json.status, json.text).toBe(201);
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

describe('marketplace', () => {
  it('lists at least five templates and installs one as an editable draft agent', async () => {
    const cat = await call('GET', '/v1/marketplace/agents');
    expect(cat.body.data.length).toBeGreaterThanOrEqual(5);
    expect(cat.body.data.map((x: any) => x.id)).toEqual(expect.arrayContaining(['appointment-reminder', 'support-triage', 'lead-qualification', 'order-status', 'customer-survey']));
    const inst = await call('POST', '/v1/marketplace/agents/appointment-reminder/install', { body: { name: 'Clinic bot', channels: [{ type: 'sms' }], customizations: { business_name: 'Acme Dental', temperature: 0.2 } } });
    expect(inst.status, inst.text).toBe(201);
    expect(inst.body.data).toMatchObject({ name: 'Clinic bot', status: 'draft', template_id: 'appointment-reminder', channels: ['sms'], temperature: 0.2 });
    expect(inst.body.data.system_prompt).toContain('Acme Dental');
    const edited = await call('PATCH', `/v1/agents/${inst.body.data.id}`, { body: { name: 'Edited' } });
    expect(edited.body.data.name).toBe('Edited');
    expectError(await call('POST', '/v1/marketplace/agents/nope/install', { body: {} }), 404, 'NOT_FOUND');
  });

  it('a submitted listing is pending until the review job approves it; then others can install it', async () => {
    const a = await createAgent({ name: 'Shared', system_prompt: 'You help with plants.' });
    const sub = await call('POST', '/v1/marketplace/agents', { body: { agent_id: a.id, listing: { title: 'Plant helper', description: 'Answers plant questions', category: 'hobby', pricing: { model: 'free' } } } });
    expect(sub.status, sub.text).toBe(201);
    expect(sub.body.data).toMatchObject({ status: 'pending_review', agent_id: a.id });
    const id = sub.body.data.id;
    await until(async () => ((await t.db.query('select status from agent_marketplace_listings where id = $1', [id])).rows[0].status === 'approved' ? true : undefined));
    const seen = await call('GET', '/v1/marketplace/agents', { key: other.testKey });
    expect(seen.body.data.find((x: any) => x.id === id)).toMatchObject({ name: 'Plant helper', source: 'community' });
    const inst = await call('POST', `/v1/marketplace/agents/${id}/install`, { key: other.testKey, body: {} });
    expect(inst.status, inst.text).toBe(201);
    expect(inst.body.data.system_prompt).toBe('You help with plants.');
  });
});

describe('conversations and the channel port', () => {
  it('the sweep marks conversations idle past the timeout abandoned', async () => {
    const a = await deployedAgent();
    const c = (await chat(a.id, { message: 'hello' })).body.data;
    expect(await t.app.services.conversations.abandonIdle()).toBe(0);
    clock().advance(t.config.agents.conversationIdleSeconds * 1000 + 1000);
    expect(await t.app.services.conversations.abandonIdle()).toBeGreaterThanOrEqual(1);
    const conv = (await call('GET', `/v1/agents/${a.id}/conversations?status=abandoned`)).body.data;
    expect(conv.map((x: any) => x.conversation_id)).toContain(c.conversation_id);
    expectError(await chat(a.id, { message: 'still there?', conversation_id: c.conversation_id }), 409, 'CONFLICT');
  });

  it('agentTurns: a channel checks the agent and takes turns; a blocked answer becomes the replacement', async () => {
    const s = t.app.services;
    const port = agentTurns({ orm: t.app.orm, chat: s.chat, conversations: s.conversations });
    const tenant = { organizationId: org.orgId, mode: 'test' as const };
    const a = await deployedAgent({ guardrails: { content_filter: true } });
    expect(await port.agentExists(tenant, a.id)).toBe(true);
    expect(await port.agentDeployed(tenant, a.id)).toBe(true);
    expect(await port.agentExists({ organizationId: other.orgId, mode: 'test' }, a.id)).toBe(false);
    const first = await port.replyTurn(tenant, { agentId: a.id, text: 'Hi, I am calling about my bill', channel: 'voice', contactAddress: '+14155550142' });
    expect(first.text).toContain('calling about my bill');
    const blocked = await port.replyTurn(tenant, { agentId: a.id, conversationId: first.conversationId, text: '#blocked-output', channel: 'voice' });
    expect(blocked.text).toMatch(/can’t share that/);
    await port.endConversation(tenant, first.conversationId, 'call_ended');
    const conv = (await call('GET', `/v1/agents/${a.id}/conversations?status=completed`)).body.data.find((x: any) => x.id === first.conversationId);
    expect(conv).toMatchObject({ channel: 'voice', contact_address: '+14155550142', ended_reason: 'call_ended', turns: 2 });
  });
});
