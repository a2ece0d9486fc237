/**
 * Agents end to end over HTTP (REST and GraphQL) against the real database, with the sandbox model:
 * CRUD and the lifecycle table (with number binding), the marketplace, idle conversations and the
 * channel port (agentTurns). The other agents-*.test.ts files cover the rest; shared setup is in
 * helpers/agents.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentTurns } from '../src/modules/agents/turns.port.ts';
import type { TestApp, TestOrg } from './helpers/testApp.ts';
import { BASE, expectError, until, startAgentsApp, agentsHelpers, type AgentsApp } from './helpers/agents.ts';

let app: AgentsApp;
let t: TestApp;
let org: TestOrg;
let other: TestOrg;
let hookUrl: string;

beforeAll(async () => {
  ({ t, org, other, hookUrl } = app = await startAgentsApp());
});

afterAll(async () => {
  await app?.close();
});

const { clock, call, gql, createAgent, deployedAgent, chat } = agentsHelpers(() => t, () => org);

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
    // The update schema is the create schema made optional: a required field cannot be nulled, and nothing changes.
    expectError(await call('PATCH', `/v1/agents/${a.id}`, { body: { name: null, description: 'Changed' } }), 422, 'VALIDATION_ERROR');
    expect((await call('GET', `/v1/agents/${a.id}`)).body.data).toMatchObject({ name: 'Renamed', description: 'Desk' });
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
    const sub = await call('POST', '/v1/marketplace/agents', { body: { agent_id: a.id, published_fields: ['system_prompt'], listing: { title: 'Plant helper', description: 'Answers plant questions', category: 'hobby', pricing: { model: 'free' } } } });
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

  it('the publisher confirms what becomes public; a copy taken at submission is published, and later edits of the agent never leak', async () => {
    const tool = { name: 'crm', description: 'Internal CRM', endpoint: `${hookUrl}/internal-crm` };
    const a = await createAgent({ system_prompt: 'You help with orchids.', tools: [tool], guardrails: { blocked_topics: ['pricing'] }, channels: ['sms'] });
    const listings = async () => (await t.db.query('select count(*)::int as n from agent_marketplace_listings where agent_id = $1', [a.id])).rows[0].n as number;
    const listing = { title: 'Orchid helper', description: 'Answers orchid questions', category: 'hobby' };
    // No confirmation, or one without the system prompt: refused, nothing listed.
    const missing = await call('POST', '/v1/marketplace/agents', { body: { agent_id: a.id, listing } });
    expectError(missing, 422, 'MISSING_REQUIRED_FIELD');
    expect(missing.body.error.details.field).toBe('published_fields');
    const noPrompt = await call('POST', '/v1/marketplace/agents', { body: { agent_id: a.id, published_fields: ['tools'], listing } });
    expectError(noPrompt, 422, 'VALIDATION_ERROR');
    expect(noPrompt.body.error.details.field).toBe('published_fields');
    expectError(await call('POST', '/v1/marketplace/agents', { body: { agent_id: a.id, published_fields: ['system_prompt', 'instructions'], listing } }), 422, 'VALIDATION_ERROR');
    expect((await gql('mutation($id: ID!) { submitMarketplaceAgent(agentId: $id, listing: { title: "x", description: "x", category: "x" }) { id } }', { id: a.id })).body.errors?.[0]?.extensions.code).toBe('VALIDATION_ERROR');
    expect(await listings()).toBe(0);

    // The system prompt only: the tools (an internal endpoint) and guardrails stay private; the response shows what is public.
    const sub = await call('POST', '/v1/marketplace/agents', { body: { agent_id: a.id, published_fields: ['system_prompt'], listing } });
    expect(sub.status, sub.text).toBe(201);
    expect(sub.body.data.published).toEqual({ fields: ['system_prompt'], type: 'conversational', model: 'sandbox-1', system_prompt: 'You help with orchids.', tools: [], channels: ['sms'], guardrails: {} });
    const id = sub.body.data.id;
    // Edited while under review and after approval: neither version becomes public.
    expect((await call('PATCH', `/v1/agents/${a.id}`, { body: { system_prompt: 'SECRET v2: the wholesale price is 3 USD.' } })).status).toBe(200);
    await until(async () => ((await t.db.query('select status from agent_marketplace_listings where id = $1', [id])).rows[0].status === 'approved' ? true : undefined));
    expect((await call('PATCH', `/v1/agents/${a.id}`, { body: { system_prompt: 'SECRET v3', tools: [{ ...tool, name: 'crm2' }] } })).status).toBe(200);
    const catalog = await call('GET', '/v1/marketplace/agents', { key: other.testKey });
    const entry = catalog.body.data.find((x: any) => x.id === id);
    expect(entry).toMatchObject({ system_prompt: 'You help with orchids.', tools: [], guardrails: {}, channels: ['sms'] });
    expect(catalog.text).not.toContain('SECRET');
    expect(catalog.text).not.toContain('internal-crm');
    const inst = await call('POST', `/v1/marketplace/agents/${id}/install`, { key: other.testKey, body: {} });
    expect(inst.status, inst.text).toBe(201);
    expect(inst.body.data).toMatchObject({ system_prompt: 'You help with orchids.', tools: [], guardrails: {} });
    const g = await gql('{ marketplaceAgents }', {}, other.testKey);
    expect(JSON.stringify(g.body.data)).not.toContain('SECRET');

    // GraphQL: the same confirmation, here with the tools.
    const b = await createAgent({ system_prompt: 'You help with cacti.', tools: [tool] });
    const viaGql = await gql('mutation($id: ID!) { submitMarketplaceAgent(agentId: $id, publishedFields: [system_prompt, tools], listing: { title: "Cactus", description: "Cacti", category: "hobby" }) { id published } }', { id: b.id });
    expect(viaGql.body.data?.submitMarketplaceAgent.published, viaGql.text).toMatchObject({ fields: ['system_prompt', 'tools'], system_prompt: 'You help with cacti.', tools: [expect.objectContaining({ name: 'crm' })] });
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
