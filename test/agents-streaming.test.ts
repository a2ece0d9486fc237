/**
 * Agents end to end over HTTP (REST and GraphQL) against the real database, with the sandbox model:
 * streaming over SSE (and a client leaving mid-stream), the GraphQL twins and the agentChat
 * subscription, knowledge upload and retrieval. The other agents-*.test.ts files cover the rest;
 * shared setup is in helpers/agents.ts.
 */
import { registerTelemetry } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp, TestOrg } from './helpers/testApp.ts';
import { expectError, readSse, until, startAgentsApp, agentsHelpers, type AgentsApp } from './helpers/agents.ts';

let app: AgentsApp;
let t: TestApp;
let org: TestOrg;
let hookUrl: string;

beforeAll(async () => {
  ({ t, org, hookUrl } = app = await startAgentsApp());
});

afterAll(async () => {
  await app?.close();
});

const { clock, call, gql, createAgent, deployedAgent, chat, streamChat } = agentsHelpers(() => t, () => org);

describe('AI SDK telemetry', () => {
  it('turns report nothing to AI SDK telemetry integrations (the service traces with its own spans)', async () => {
    const seen: string[] = [];
    const integration = { onStart: () => { seen.push('start'); }, onLanguageModelCallStart: () => { seen.push('model call'); }, onEnd: () => { seen.push('end'); } };
    registerTelemetry(integration);
    try {
      const a = await deployedAgent();
      const r = await chat(a.id, { message: 'What are your hours?' });
      expect(r.status, r.text).toBe(200);
      const events = await readSse(await streamChat(a.id, { message: 'What are your hours?' }));
      expect(events.at(-1)!.event).toBe('done');
    } finally {
      const list = (globalThis as { AI_SDK_TELEMETRY_INTEGRATIONS?: unknown[] }).AI_SDK_TELEMETRY_INTEGRATIONS ?? [];
      list.splice(list.indexOf(integration), 1);
    }
    expect(seen).toEqual([]);
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
