/**
 * HIPAA mode for agent conversations and voice, end to end over HTTP against the real database and
 * workers: chat turns (plain, streamed, with a webhook tool) and a voice call with PHI metadata, a
 * recording and a transcribed voicemail are stored sealed (nothing in clear in any table or log
 * line); reads follow the PHI access rules (owner/admin; developer with a reason code; viewer
 * redacted) and are logged; continuing a conversation needs PHI access; recordings are served only
 * with PHI access; retention on an injected clock purges what is older; the backfill seals what was
 * stored before the mode (conversations, call metadata).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/platform/clock.ts';
import { agentTurns } from '../src/modules/agents/turns.port.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { OFFICER, tablesHolding, tickingCallers } from './helpers/phi.ts';
import { eventually } from './helpers/assertions.ts';
import { buyVoiceNumber, startReceiver, VOICE_ENV } from './helpers/voice.ts';

const clock = new ManualClock(Date.now());
const logs: string[] = [];
let t: TestApp;
let org: TestOrg;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let from: string;
const keys: Record<'admin' | 'developer' | 'viewer', string> = { admin: '', developer: '', viewer: '' };
/** The unique marker every piece of PHI in this file carries. */
const MARK = `PHIMARK${randomBytes(6).toString('hex')}`;
/** What the sandbox transcriber writes: PHI too (it cannot carry the marker). */
const TRANSCRIPT = 'Sandbox transcription:';

const { rest, gql } = tickingCallers(() => t, clock, () => org.testKey);
const reason = (r: string) => ({ headers: { 'X-PHI-Reason': r } });

async function enable(o: TestOrg) {
  expect((await rest('PUT', '/v1/settings/hipaa/baa', { key: o.liveKey, body: { status: 'signed', signed_date: '2026-11-01' } })).status).toBe(200);
  const on = await rest('PUT', '/v1/settings/hipaa', { key: o.liveKey, body: { enabled: true, compliance_officer: OFFICER, phi_metadata_fields: ['diagnosis'] } });
  expect(on.status, on.text).toBe(200);
}

async function deployedAgent(o: TestOrg, tools: unknown[] = []) {
  const a = await rest('POST', '/v1/agents', {
    key: o.testKey, body: { name: 'Nurse line', type: 'conversational', model: 'sandbox-1', system_prompt: 'You help patients.', channels: ['web'], tools },
  });
  expect(a.status, a.text).toBe(201);
  expect((await rest('POST', `/v1/agents/${a.body.data.id}/deploy`, { key: o.testKey, body: {} })).status).toBe(200);
  return a.body.data.id as string;
}

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestApp({
    clock, workers: true,
    env: {
      ...VOICE_ENV, LOG_LEVEL: 'debug', HIPAA_MODE_CACHE_MS: '0', HIPAA_RETENTION_BATCH_SIZE: '2',
      SANDBOX_LLM_FIRST_TOKEN_MS: '5', SANDBOX_LLM_CHUNK_MS: '2',
    },
    logStream: { write: (line) => { logs.push(line); } },
  });
  org = await t.createOrg('business', 'Clinic');
  for (const role of Object.keys(keys) as (keyof typeof keys)[]) keys[role] = await t.createKey(org.orgId, role);
  await enable(org);
  from = await buyVoiceNumber(t, org.testKey, '332');
  const hook = await rest('POST', '/v1/webhooks', { body: { url: `${receiver.url}/hooks`, events: ['conversation.started', 'conversation.handoff', 'call.initiated', 'call.completed', 'voicemail.received'] } });
  expect(hook.status, hook.text).toBe(201);
});
afterAll(async () => {
  receiver?.close();
  await t?.close();
});

describe('agent conversations', () => {
  let agentId: string;
  let conversationId: string;

  beforeAll(async () => {
    agentId = await deployedAgent(org, [{ name: 'lookup', description: 'Find a patient', endpoint: `${receiver.url}/tool`, parameters: { patient: { type: 'string' } } }]);
  });

  it('a developer without a reason code chats: the reply is theirs, in clear; stored sealed', async () => {
    const r = await rest('POST', `/v1/agents/${agentId}/chat`, { key: keys.developer, body: { message: `I have ${MARK} symptoms`, context: { patient: `Pat ${MARK}` } } });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data.content).toContain(MARK);
    conversationId = r.body.data.conversation_id;
    const { rows } = await t.db.query('select role, content, phi, tool_calls from agent_messages where conversation_id = $1 order by id', [conversationId]);
    expect(rows.map((x) => x.role)).toEqual(['user', 'assistant']);
    for (const row of rows) {
      expect(row.content).toBe('');
      expect(row.phi).toMatch(/^phi1:1:/);
    }
    const conv = (await t.db.query('select context, phi from agent_conversations where id = $1', [conversationId])).rows[0];
    expect(conv.context).toEqual({});
    expect(conv.phi).toMatch(/^phi1:1:/);
  });

  it('continuing a conversation discloses its history: a developer needs a reason code (403 without), and it is logged', async () => {
    const refused = await rest('POST', `/v1/agents/${agentId}/chat`, { key: keys.developer, body: { conversation_id: conversationId, message: 'What did I say?' } });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body.error).toMatchObject({ code: 'FORBIDDEN', details: { reason: 'phi_access_required', header: 'X-PHI-Reason' } });
    // Streamed: refused before the stream starts, the same way.
    const refusedStream = await rest('POST', `/v1/agents/${agentId}/chat`, { key: keys.developer, body: { conversation_id: conversationId, message: 'x', stream: true } });
    expect(refusedStream.status).toBe(403);
    // With a reason code: a tool call carrying PHI, streamed.
    const tool = await rest('POST', `/v1/agents/${agentId}/chat`, {
      key: keys.developer, ...reason('treatment'), body: { conversation_id: conversationId, message: `#tool:lookup{"patient":"${MARK}"}`, stream: true },
    });
    expect(tool.status, tool.text).toBe(200);
    expect(tool.text).toContain('event: tool_call');
    expect(tool.text).toContain(MARK);
    expect(tool.text).toContain('event: done');
    const log = (await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=20', { key: keys.admin })).body.data;
    const entries = log.filter((x: any) => x.operation === 'agents.chat');
    // One entry for the streamed turn (its precheck logs; the stream does not log again).
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ resource_type: 'agent_conversation', resource_ids: [conversationId], role: 'developer', reason: 'treatment', fields: ['history'] });
    // The owner continues without a reason code; GraphQL twin.
    const owner = await gql('mutation($a: ID!, $c: String, $m: String!) { chatWithAgent(agentId: $a, conversationId: $c, message: $m) { content } }',
      { a: agentId, c: conversationId, m: `again ${MARK}` });
    expect(owner.body.errors, JSON.stringify(owner.body)).toBeUndefined();
    expect(owner.body.data.chatWithAgent.content).toContain(MARK);
    // A test run's turns continue its own conversation (the caller's script): no reason code needed.
    const run = await rest('POST', `/v1/agents/${agentId}/test`, { key: keys.developer, body: { turns: [{ message: `one ${MARK}` }, { message: 'two', expect: { contains: 'two' } }] } });
    expect(run.status, run.text).toBe(200);
    expect(run.body.data).toMatchObject({ passed: true, turns: [{ error: null }, { error: null }] });
  });

  it('reads: owner and admin see content, tool calls and context; a developer with a reason code; viewer and a developer without one see them redacted', async () => {
    const path = `/v1/agents/${agentId}/conversations/${conversationId}/messages?limit=20`;
    const owner = (await rest('GET', path)).body.data;
    expect(owner.length).toBeGreaterThanOrEqual(6);
    expect(owner.some((m: any) => m.content.includes(MARK))).toBe(true);
    const toolCall = owner.flatMap((m: any) => m.tool_calls).find((c: any) => c.tool === 'lookup');
    expect(toolCall.input).toEqual({ patient: MARK });
    expect((await rest('GET', path, { key: keys.admin })).body.data.some((m: any) => m.content.includes(MARK))).toBe(true);
    expect((await rest('GET', path, { key: keys.developer, ...reason('support') })).body.data.some((m: any) => m.content.includes(MARK))).toBe(true);
    for (const key of [keys.viewer, keys.developer]) {
      const redacted = (await rest('GET', path, { key })).body.data;
      expect(redacted.map((m: any) => m.content)).toEqual(redacted.map(() => '[REDACTED]'));
      const call = redacted.flatMap((m: any) => m.tool_calls).find((c: any) => c.tool === 'lookup');
      expect(call.input).toEqual({ patient: '[REDACTED]' });
      expect(JSON.stringify(redacted)).not.toContain(MARK);
    }
    const convs = `/v1/agents/${agentId}/conversations`;
    const ours = (list: any[]) => list.find((c) => c.id === conversationId);
    expect(ours((await rest('GET', convs)).body.data).context).toEqual({ patient: `Pat ${MARK}` });
    expect(ours((await rest('GET', convs, { key: keys.viewer })).body.data).context).toEqual({ patient: '[REDACTED]' });
    // GraphQL: the same rules.
    const q = 'query($a: ID!, $c: ID!) { agentConversationMessages(agentId: $a, conversationId: $c, first: 2) { edges { node { role content } } } }';
    const viewer = await gql(q, { a: agentId, c: conversationId }, { key: keys.viewer });
    expect(viewer.body.data.agentConversationMessages.edges.map((e: any) => e.node.content)).toEqual(['[REDACTED]', '[REDACTED]']);
    const admin = await gql(q, { a: agentId, c: conversationId }, { key: keys.admin });
    expect(JSON.stringify(admin.body.data)).toContain(MARK);
    // Every disclosure logged: messages and conversations, with role and reason; redacted reads are not.
    const log = (await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=50', { key: keys.admin })).body.data;
    const reads = log.filter((x: any) => x.resource_type === 'agent_message');
    expect(reads.map((x: any) => `${x.role}:${x.reason}`).sort()).toEqual(['admin:null', 'admin:null', 'developer:support', 'owner:null']);
    expect(reads.find((x: any) => x.role === 'developer')).toMatchObject({ operation: 'agents.conversationMessages', fields: ['content', 'tool_calls'] });
    expect(reads[0].resource_ids.length).toBeGreaterThanOrEqual(2);
    expect(log.filter((x: any) => x.resource_type === 'agent_conversation' && x.operation === 'agents.conversations')).toHaveLength(1);
  });

  it('a hangup ends the agent\'s conversation on the call, found through its sealed context', async () => {
    const port = agentTurns({ orm: t.app.orm, chat: t.app.services.chat, conversations: t.app.services.conversations });
    const tenant = { organizationId: org.orgId, mode: 'test' as const };
    const turn = await port.replyTurn(tenant, { agentId, text: 'The call was answered.', channel: 'voice', contactAddress: '+14155550150', context: { call_id: 'call_sealed_context' } });
    const stored = (await t.db.query('select context, phi, status from agent_conversations where id = $1', [turn.conversationId])).rows[0];
    expect(stored).toMatchObject({ context: {}, status: 'active' });
    expect(stored.phi).toBeTruthy();
    expect(await port.endCallConversations(tenant, agentId, 'call_another', 'call_ended')).toBe(0);
    expect(await port.endCallConversations(tenant, agentId, 'call_sealed_context', 'call_ended')).toBe(1);
    expect((await t.db.query('select status, ended_reason from agent_conversations where id = $1', [turn.conversationId])).rows[0]).toEqual({ status: 'completed', ended_reason: 'call_ended' });
  });
});

describe('flows', () => {
  it("an agent node's message is handed to the conversation; the step log keeps it sealed", async () => {
    const agentId = await deployedAgent(org);
    const created = await rest('POST', '/v1/flows', {
      body: {
        name: 'Triage', trigger: { type: 'api' },
        definition: {
          nodes: [{ id: 't', type: 'trigger' }, { id: 'a', type: 'agent', config: { agent_id: agentId, message: 'Patient says: {{input.note}}' } }, { id: 'e', type: 'end' }],
          edges: [{ from: 't', to: 'a' }, { from: 'a', to: 'e' }],
        },
      },
    });
    expect(created.status, created.text).toBe(201);
    const started = await rest('POST', `/v1/flows/${created.body.data.id}/executions`, { body: { input: { note: 'feeling unwell' } } });
    expect(started.status, started.text).toBe(201);
    const ex = await eventually('the execution', async () => {
      const e = (await rest('GET', `/v1/flows/${created.body.data.id}/executions/${started.body.data.id}`)).body.data;
      return ['completed', 'failed'].includes(e.status) ? e : undefined;
    }, 20_000);
    expect(ex.status, JSON.stringify(ex.steps)).toBe('completed');
    expect(ex.steps[1].input).toMatchObject({ agentId, message: 'Patient says: feeling unwell' });
    expect(ex.steps[1].output.reply).toEqual(expect.any(String));
    const { rows } = await t.db.query('select input, phi from flow_execution_steps where execution_id = $1 and seq = 1', [ex.id]);
    expect(rows[0]).toMatchObject({ input: null, phi: expect.stringMatching(/^phi1:1:/) });
  });
});

describe('voice', () => {
  let call: any;
  let voicemail: any;
  let box: string;

  beforeAll(async () => {
    box = (await rest('POST', '/v1/voice/voicemail', { body: { name: 'Front desk', notification_email: 'desk@clinic.test', webhook_url: `${receiver.url}/vm`, max_duration: 60 } })).body.data.id;
    const ivr = await rest('POST', '/v1/voice/ivr', { body: { name: 'Machine', greeting: 'Hi', timeout_seconds: 30, menu: { options: [{ key: '2', action: 'voicemail', target: box }] } } });
    expect(ivr.status, ivr.text).toBe(201);
    const placed = await rest('POST', '/v1/voice/calls', { body: { to: '+15005550010', from, ivr_id: ivr.body.data.id, record: true, metadata: { diagnosis: `asthma ${MARK}`, ward: 'b' } } });
    expect(placed.status, placed.text).toBe(201);
    // The caller sees what it sent.
    expect(placed.body.data.metadata).toEqual({ diagnosis: `asthma ${MARK}`, ward: 'b' });
    call = await eventually('the call completed', async () => {
      const r = await rest('GET', `/v1/voice/calls/${placed.body.data.id}`);
      return r.body.data.status === 'completed' ? r.body.data : undefined;
      // The sandbox's message lasts 10 s; 40 s ran out twice with other test files loading the 2 cores.
    }, 70_000);
    voicemail = await eventually('the voicemail', async () => (await rest('GET', `/v1/voice/voicemail/${box}/messages`)).body.data[0], 20_000);
    await eventually('the voicemail notification email', async () => {
      const { rows } = await t.db.query(`select phi from messages where organization_id = $1 and channel = 'email'`, [org.orgId]);
      return rows[0]?.phi ? true : undefined;
    });
    await eventually('the voicemail callback', () => receiver.hits.find((h) => h.path === '/vm'));
  }, 120_000);

  it('call metadata: the PHI keys stored sealed, read by the access rules', async () => {
    expect(call.metadata).toEqual({ diagnosis: `asthma ${MARK}`, ward: 'b' });
    expect(call.recording_url).toContain(`/v1/voice/recordings/${call.id}?`);
    const row = (await t.db.query('select metadata, phi from calls where id = $1', [call.id])).rows[0];
    expect(row.metadata).toEqual({ ward: 'b' });
    expect(row.phi).toMatch(/^phi1:1:/);
    expect((await rest('GET', `/v1/voice/calls/${call.id}`, { key: keys.developer })).body.data.metadata).toEqual({ diagnosis: '[REDACTED]', ward: 'b' });
    expect((await rest('GET', `/v1/voice/calls/${call.id}`, { key: keys.developer, ...reason('operations') })).body.data.metadata.diagnosis).toBe(`asthma ${MARK}`);
    const list = (await rest('GET', '/v1/voice/calls', { key: keys.viewer })).body.data;
    expect(list.length).toBeGreaterThan(0);
    const log = (await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=10', { key: keys.admin })).body.data;
    expect(log.find((x: any) => x.resource_type === 'call' && x.role === 'developer')).toMatchObject({ reason: 'operations', resource_ids: [call.id], operation: 'voice.getCall' });
  });

  it('voicemail transcription: sealed, read by the access rules; its event carries none', async () => {
    expect(voicemail.transcription).toContain(TRANSCRIPT);
    const row = (await t.db.query('select transcription, phi from voicemail_messages where id = $1', [voicemail.id])).rows[0];
    expect(row.transcription).toBeNull();
    expect(row.phi).toMatch(/^phi1:1:/);
    expect((await rest('GET', `/v1/voice/voicemail/${box}/messages`, { key: keys.viewer })).body.data[0].transcription).toBe('[REDACTED]');
    expect((await rest('GET', `/v1/voice/voicemail/${box}/messages`, { key: keys.admin })).body.data[0].transcription).toContain(TRANSCRIPT);
    const hit = receiver.hits.find((h) => h.path === '/vm')!;
    expect(hit.json.data).toMatchObject({ message_id: voicemail.id, transcription: null, transcription_redacted: true });
  });

  it('recordings: served only to callers with PHI access (audio cannot be redacted), each serving logged', async () => {
    const fresh = (await rest('GET', `/v1/voice/calls/${call.id}`)).body.data.recording_url as string;
    const path = new URL(fresh).pathname + new URL(fresh).search;
    const owner = await rest('GET', path);
    expect(owner.status, owner.text).toBe(200);
    expect(owner.headers.get('content-type')).toContain('audio/wav');
    for (const key of [keys.developer, keys.viewer]) {
      const refused = await rest('GET', path, { key });
      expect(refused.status, refused.text).toBe(403);
      expect(refused.body.error.details).toMatchObject({ reason: 'phi_access_required' });
    }
    expect((await rest('GET', path, { key: keys.developer, ...reason('treatment') })).status).toBe(200);
    const vm = new URL((await rest('GET', `/v1/voice/voicemail/${box}/messages`)).body.data[0].recording_url);
    expect((await rest('GET', vm.pathname + vm.search, { key: keys.admin })).status).toBe(200);
    const log = (await rest('GET', '/v1/settings/hipaa/phi-access-log?limit=10', { key: keys.admin })).body.data;
    expect(log.filter((x: any) => x.resource_type === 'call_recording').map((x: any) => `${x.role}:${x.reason}`).sort()).toEqual(['developer:treatment', 'owner:null']);
    expect(log.find((x: any) => x.resource_type === 'voicemail_recording')).toMatchObject({ resource_ids: [voicemail.id], role: 'admin', operation: 'voice.getRecording' });
  });
});

describe('nowhere in clear', () => {
  it('no marker and no transcription in any row of any table (outbox, jobs, idempotency, webhook log) or in the logs', async () => {
    expect(await tablesHolding(t, [MARK, TRANSCRIPT])).toEqual([]);
    // The scan finds what is there: sealed agent messages, conversations, calls, voicemail, the email.
    for (const table of ['agent_messages', 'agent_conversations', 'calls', 'voicemail_messages', 'messages']) {
      const { rows } = await t.db.query(`select count(*)::int as c from ${table} where phi is not null and organization_id = $1`, [org.orgId]);
      expect(rows[0].c, table).toBeGreaterThan(0);
    }
    expect(logs.length).toBeGreaterThan(10);
    expect(logs.filter((l) => l.includes(MARK) || l.includes(TRANSCRIPT))).toEqual([]);
    // Event webhooks carry no content (the tool endpoint, the organization's own, gets the tool's arguments).
    expect(receiver.hits.filter((h) => h.path !== '/tool' && (h.body.includes(MARK) || h.body.includes(TRANSCRIPT)))).toEqual([]);
    expect(receiver.hits.some((h) => h.path === '/hooks')).toBe(true);
    expect(receiver.hits.some((h) => h.path === '/tool' && h.body.includes(MARK))).toBe(true);
  });
});

describe('retention and backfill', () => {
  it('content older than the retention period is purged (messages, contexts, recordings, transcriptions) in batches, idempotently; newer content stays', async () => {
    expect((await rest('PUT', '/v1/settings/hipaa', { key: org.liveKey, body: { retention_days: 30 } })).status).toBe(200);
    const count = async (sql: string) => (await t.db.query(sql, [org.orgId])).rows[0].c as number;
    const old = {
      agents: await count('select count(*)::int as c from agent_messages where organization_id = $1')
        + await count('select count(*)::int as c from agent_conversations where organization_id = $1'),
      voice: await count('select count(*)::int as c from calls where organization_id = $1')
        + await count('select count(*)::int as c from voicemail_messages where organization_id = $1'),
    };
    expect(old.agents).toBeGreaterThan(4);
    const agentId = (await rest('GET', '/v1/agents')).body.data[0].id;
    const oldConversation = (await rest('GET', `/v1/agents/${agentId}/conversations`)).body.data[0].id;
    const oldCall = (await t.db.query('select id from calls where organization_id = $1 and phi is not null', [org.orgId])).rows[0].id;
    clock.advance(31 * 86_400_000);
    const fresh = await rest('POST', `/v1/agents/${agentId}/chat`, { body: { message: `fresh ${MARK}` } });
    expect(fresh.status, fresh.text).toBe(200);

    const services = t.app.services;
    const agents = await Promise.all([services.agentRetention.purgeExpired(), services.agentRetention.purgeExpired()]);
    expect(agents[0] + agents[1]).toBe(old.agents);
    const voice = await Promise.all([services.voiceRetention.purgeExpired(), services.voiceRetention.purgeExpired()]);
    expect(voice[0] + voice[1]).toBe(old.voice);
    expect(await services.agentRetention.purgeExpired()).toBe(0);
    expect(await services.voiceRetention.purgeExpired()).toBe(0);

    const oldMessages = (await rest('GET', `/v1/agents/${agentId}/conversations/${oldConversation}/messages`)).body.data;
    expect(oldMessages.length).toBeGreaterThan(0);
    expect(oldMessages.every((m: any) => m.content === '' && m.tool_calls.every((c: any) => c.input === null))).toBe(true);
    expect((await rest('GET', `/v1/agents/${agentId}/conversations/${fresh.body.data.conversation_id}/messages`)).body.data.some((m: any) => m.content.includes(MARK))).toBe(true);
    const conversations = (await rest('GET', `/v1/agents/${agentId}/conversations`)).body.data;
    expect(conversations.find((c: any) => c.id === oldConversation).context).toEqual({});

    const c = (await rest('GET', `/v1/voice/calls/${oldCall}`)).body.data;
    expect(c).toMatchObject({ recording_url: null, metadata: { ward: 'b' }, status: 'completed' });
    const boxes = (await rest('GET', '/v1/voice/voicemail')).body.data;
    const vm = (await rest('GET', `/v1/voice/voicemail/${boxes[0].id}/messages`)).body.data[0];
    expect(vm.transcription).toBeNull();
    const link = new URL(vm.recording_url);
    expect((await rest('GET', link.pathname + link.search)).status).toBe(404);
    // The PHI access log is exempt.
    expect(await count('select count(*)::int as c from phi_access_log where organization_id = $1')).toBeGreaterThan(5);
  });

  it('conversations and voicemail stored before the mode was on are sealed by the backfill, once', async () => {
    const o = await t.createOrg('enterprise', 'Backfill');
    const agentId = await deployedAgent(o);
    const before = await rest('POST', `/v1/agents/${agentId}/chat`, { key: o.testKey, body: { message: `before ${MARK}`, context: { patient: MARK } } });
    expect(before.status, before.text).toBe(200);
    const id = before.body.data.conversation_id;
    expect((await t.db.query('select count(*)::int as c from agent_messages where conversation_id = $1 and phi is null', [id])).rows[0].c).toBe(2);
    await enable(o);
    clock.advance(1000);
    expect(await t.app.services.agentRetention.sealBackfill()).toBe(3);
    const rows = (await t.db.query('select content, phi from agent_messages where conversation_id = $1', [id])).rows;
    expect(rows.every((r) => r.content === '' && /^phi1:1:/.test(r.phi))).toBe(true);
    expect((await t.db.query('select context, phi from agent_conversations where id = $1', [id])).rows[0]).toMatchObject({ context: {}, phi: expect.stringMatching(/^phi1:1:/) });
    const read = (await rest('GET', `/v1/agents/${agentId}/conversations/${id}/messages`, { key: o.testKey })).body.data;
    expect(read.some((m: any) => m.content === `before ${MARK}`)).toBe(true);
    expect(await t.app.services.agentRetention.sealBackfill()).toBe(0);
  });

  it('call metadata stored before the mode was on: its PHI keys are sealed by the backfill, once; calls without one stay as they are', async () => {
    const o = await t.createOrg('enterprise', 'Voice backfill');
    const number = await buyVoiceNumber(t, o.testKey, '347');
    const place = async (metadata: Record<string, unknown>) => {
      const r = await rest('POST', '/v1/voice/calls', { key: o.testKey, body: { to: '+15005550006', from: number, metadata } });
      expect(r.status, r.text).toBe(201);
      return r.body.data.id as string;
    };
    const withPhi = await place({ diagnosis: `flu ${MARK}`, ward: 'c' });
    const without = await place({ ward: 'd' });
    await enable(o);
    clock.advance(1000);
    expect(await t.app.services.voiceRetention.sealBackfill()).toBe(1);
    const rows = (await t.db.query('select id, metadata, phi from calls where id = any($1)', [[withPhi, without]])).rows;
    expect(rows.find((r) => r.id === withPhi)).toMatchObject({ metadata: { ward: 'c' }, phi: expect.stringMatching(/^phi1:1:/) });
    expect(rows.find((r) => r.id === without)).toMatchObject({ metadata: { ward: 'd' }, phi: null });
    expect((await rest('GET', `/v1/voice/calls/${withPhi}`, { key: o.testKey })).body.data.metadata).toEqual({ diagnosis: `flu ${MARK}`, ward: 'c' });
    expect(await t.app.services.voiceRetention.sealBackfill()).toBe(0);
  });
});
