/**
 * Live-mode agent invocations paid from the credit ledger, over HTTP against the real database,
 * with the live model provider played by a local server speaking the OpenAI chat-completions API
 * (JSON for a non-streamed chat, SSE chunks for `stream: true`): a live chat reserves
 * the plan's `agent.invocation` price before the model runs and captures it with the stored answer;
 * an empty balance refuses the turn (402) before any model call and stores nothing; a provider error
 * or a provider past LLM_TIMEOUT_MS fails the turn (502 LLM_PROVIDER_ERROR) and gives the
 * reservation back; a retried turn (Idempotency-Key, flow step) is paid and counted once; test mode
 * never touches the ledger. The fake provider is test/helpers/fakeLlm.ts; turns whose process died
 * are test/billing-sweep.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { requestHash } from '../src/platform/idempotency.ts';
import { agentTurns } from '../src/modules/agents/turns.port.ts';
import { turnKeyOf } from '../src/modules/agents/agents.billing.ts';
import { priceOf } from '../src/modules/billing/billing.plans.ts';
import { createLlmProviders, LlmDeadlineError } from '../src/providers/llm/types.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually, expectError, expectGqlError } from './helpers/assertions.ts';
import { liveOrgWithBalance } from './helpers/billing.ts';
import { startFakeLlm, type FakeLlm } from './helpers/fakeLlm.ts';

/** The deadline of a live model call in this file (a hanging provider fails the turn past it). */
const LLM_TIMEOUT_MS = 1500;
const MODEL = 'gpt-4o-mini';
const PRICE = priceOf('growth', 'agent.invocation', 1);

let llm: FakeLlm;
let t: TestApp;

beforeAll(async () => {
  llm = await startFakeLlm();
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: {
      LLM_BASE_URL: llm.url, LLM_API_KEY: 'sk-fake', LLM_TIMEOUT_MS: String(LLM_TIMEOUT_MS),
      BILLING_LIVE_SANDBOX: 'true', SANDBOX_PAYMENTS_WEBHOOK_DELIVERIES: '1', SANDBOX_PAYMENTS_WEBHOOK_LATENCY_MS: '0',
      SANDBOX_LLM_FIRST_TOKEN_MS: '1', SANDBOX_LLM_CHUNK_MS: '1',
    },
  });
});
afterAll(async () => {
  await t?.close();
  await llm?.close();
});

async function liveAgent(o: TestOrg, key = o.liveKey): Promise<string> {
  const created = await t.rest('POST', '/v1/agents', { key, body: { name: 'Billed', type: 'conversational', model: MODEL, system_prompt: 'You are helpful.', channels: ['web'] } });
  expect(created.status, created.text).toBe(201);
  const deployed = await t.rest('POST', `/v1/agents/${created.body.data.id}/deploy`, { key, body: {} });
  expect(deployed.status, deployed.text).toBe(200);
  return created.body.data.id;
}

const balanceOf = async (o: TestOrg) => (await t.rest('GET', '/v1/billing/credits', { key: o.liveKey })).body.data.balance as number;

/** The agent turns' ledger entries of an organization (reservations under `agent_turn:` keys and their settlements). */
async function turnLedger(orgId: string) {
  const { rows } = await t.db.query<{ kind: string; amount: number; key: string | null; reference_id: string | null }>(
    `select e.kind, e.amount::int as amount, coalesce(e.idempotency_key, r.idempotency_key) as key, e.reference_id from credit_ledger_entries e
       left join credit_ledger_entries r on r.id = e.reference_id
      where e.organization_id = $1 and e.mode = 'live' and coalesce(e.idempotency_key, r.idempotency_key) like 'agent_turn:%' order by e.id`, [orgId]);
  return rows;
}

const kinds = (rows: { kind: string }[]) => rows.map((r) => r.kind);
const callsWith = (marker: string) => llm.callsWith(marker);
/** The fake provider saw the client close the request before it answered (the deadline aborted it). */
const abortedByClient = (marker: string) => llm.abortedByClient(marker);

async function storedMessages(orgId: string): Promise<number> {
  const { rows } = await t.db.query(`select count(*)::int as n from agent_messages where organization_id = $1 and mode = 'live'`, [orgId]);
  return rows[0].n;
}

async function invocationsCounted(orgId: string): Promise<number> {
  const { rows } = await t.db.query(`select coalesce(sum(quantity), 0)::int as n from usage_entries where organization_id = $1 and mode = 'live' and kind = 'agent.invocation'`, [orgId]);
  return rows[0].n;
}

describe('paid live agent invocations', () => {
  it('a live chat reserves the plan price before the model runs and captures exactly it with the answer', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body: { message: 'hello [ok-1]' } });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data).toMatchObject({ content: 'Hello from the fake model.', tokens_used: { input: 21, output: 6 } });
    expect(callsWith('[ok-1]')).toHaveLength(1);
    // A non-streamed chat asks the provider for one JSON completion (no stream to pass through).
    expect(callsWith('[ok-1]')[0]!.body).toMatchObject({ model: MODEL });
    expect(callsWith('[ok-1]')[0]!.body.stream).toBeFalsy();

    const ledger = await turnLedger(o.orgId);
    expect(kinds(ledger)).toEqual(['reservation', 'capture']);
    expect(ledger[0]).toMatchObject({ amount: -PRICE, reference_id: r.body.data.conversation_id });
    expect(ledger[1]!.amount).toBe(0);
    expect(await balanceOf(o)).toBe(100 - PRICE);
    expect(await invocationsCounted(o.orgId)).toBe(1);
  });

  it('an empty balance: 402 INSUFFICIENT_CREDITS, the model is never called and nothing is stored', async () => {
    const o = await liveOrgWithBalance(t, 'growth', PRICE - 1);
    const agent = await liveAgent(o);
    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body: { message: 'hello [broke-1]' } });
    expectError(r, 402, 'INSUFFICIENT_CREDITS');
    expect(r.body.error.details).toMatchObject({ balance: PRICE - 1, required: PRICE });
    expect(callsWith('[broke-1]')).toHaveLength(0);
    expect(await storedMessages(o.orgId)).toBe(0);
    expect((await t.rest('GET', `/v1/agents/${agent}/conversations`, { key: o.liveKey })).body.data).toEqual([]);
    expect(await turnLedger(o.orgId)).toEqual([]);
    expect(await balanceOf(o)).toBe(PRICE - 1);
    expect(await invocationsCounted(o.orgId)).toBe(0);

    // The streaming variant is refused before it starts (a plain HTTP error), the GraphQL twin the same way.
    const streamed = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body: { message: 'hello [broke-2]', stream: true } });
    expectError(streamed, 402, 'INSUFFICIENT_CREDITS');
    const gql = await t.gql('mutation($a: ID!, $m: String!) { chatWithAgent(agentId: $a, message: $m) { content } }',
      { a: agent, m: 'hello [broke-3]' }, { key: o.liveKey });
    expectGqlError(gql, 'INSUFFICIENT_CREDITS');
    expect(callsWith('[broke-2]').length + callsWith('[broke-3]').length).toBe(0);
    expect(await storedMessages(o.orgId)).toBe(0);
    expect(await balanceOf(o)).toBe(PRICE - 1);
  });

  it('the provider answering 500: 502 LLM_PROVIDER_ERROR, the reservation released, nothing stored', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 50);
    const agent = await liveAgent(o);
    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body: { message: 'hello [fail]' } });
    expectError(r, 502, 'LLM_PROVIDER_ERROR');
    expect(r.body.error.details).toMatchObject({ model: MODEL, provider_status: 500 });
    expect(kinds(await turnLedger(o.orgId))).toEqual(['reservation', 'release']);
    expect(await balanceOf(o)).toBe(50);
    expect(await storedMessages(o.orgId)).toBe(0);
    expect(await invocationsCounted(o.orgId)).toBe(0);
  });

  it('a provider hanging past LLM_TIMEOUT_MS: 502 LLM_PROVIDER_ERROR (reason timeout), the request aborted, the reservation released', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 50);
    const agent = await liveAgent(o);
    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body: { message: 'hello [hang] [hang-1]' } });
    expectError(r, 502, 'LLM_PROVIDER_ERROR');
    expect(r.body.error.details).toMatchObject({ model: MODEL, reason: 'timeout', timeout_ms: LLM_TIMEOUT_MS });
    const hung = callsWith('[hang-1]');
    expect(hung).toHaveLength(1);
    await abortedByClient('[hang-1]');
    expect(kinds(await turnLedger(o.orgId))).toEqual(['reservation', 'release']);
    expect(await balanceOf(o)).toBe(50);
    expect(await storedMessages(o.orgId)).toBe(0);
  });

  it('the streaming variant is charged once; a stream whose provider stalls past the deadline ends in an error event and is released', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const res = await fetch(`${t.baseUrl}/v1/agents/${agent}/chat`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': o.liveKey }, body: JSON.stringify({ message: 'hello [stream-1]', stream: true }),
    });
    expect(res.status).toBe(200);
    const events = sseEvents(await res.text());
    expect(events.filter((e) => e.event === 'chunk').map((e) => e.data.content).join('')).toBe('Hello from the fake model.');
    expect(events.at(-1)).toMatchObject({ event: 'done' });
    expect(callsWith('[stream-1]')[0]!.body).toMatchObject({ model: MODEL, stream: true });
    expect(kinds(await turnLedger(o.orgId))).toEqual(['reservation', 'capture']);
    expect(await balanceOf(o)).toBe(100 - PRICE);

    const stalled = await fetch(`${t.baseUrl}/v1/agents/${agent}/chat`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': o.liveKey }, body: JSON.stringify({ message: 'hello [stall]', stream: true }),
    });
    expect(stalled.status).toBe(200);
    const stallEvents = sseEvents(await stalled.text());
    expect(stallEvents.at(-1)).toMatchObject({ event: 'error', data: { code: 'LLM_PROVIDER_ERROR', status: 502, details: { reason: 'timeout' } } });
    await abortedByClient('[stall]');
    expect(kinds(await turnLedger(o.orgId))).toEqual(['reservation', 'capture', 'reservation', 'release']);
    expect(await balanceOf(o)).toBe(100 - PRICE);
    expect(await invocationsCounted(o.orgId)).toBe(1);
  });

  it('a client leaving mid-stream keeps the partial answer, and the turn is paid (the model ran)', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const controller = new AbortController();
    const res = await fetch(`${t.baseUrl}/v1/agents/${agent}/chat`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': o.liveKey },
      body: JSON.stringify({ message: 'hello [slow] [partial-1]', stream: true }), signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('event: chunk')) text += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    await eventually('the partial turn stored and paid', async () => (kinds(await turnLedger(o.orgId)).join() === 'reservation,capture' ? true : undefined));
    const { rows } = await t.db.query(`select content, partial from agent_messages where organization_id = $1 and mode = 'live' and role = 'assistant'`, [o.orgId]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ partial: true });
    expect(rows[0].content).toMatch(/^(word )+$/);
    expect(await balanceOf(o)).toBe(100 - PRICE);
  });

  it('the GraphQL twin is charged like REST', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const gql = await t.gql('mutation($a: ID!, $m: String!) { chatWithAgent(agentId: $a, message: $m) { content conversationId } }',
      { a: agent, m: 'hello [gql-1]' }, { key: o.liveKey });
    expect(gql.body.errors, gql.text).toBeUndefined();
    expect(gql.body.data).toMatchObject({ chatWithAgent: { content: 'Hello from the fake model.' } });
    expect(kinds(await turnLedger(o.orgId))).toEqual(['reservation', 'capture']);
    expect(await balanceOf(o)).toBe(100 - PRICE);
  });

  it('a turn retried under its Idempotency-Key is paid once: a failed attempt is released, a replay charges nothing', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const headers = { 'Idempotency-Key': `chat-${o.orgId}` };
    const body = { message: 'hello [fail-once:retry-1]' };
    expectError(await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body, headers }), 502, 'LLM_PROVIDER_ERROR');
    const ok = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body, headers });
    expect(ok.status, ok.text).toBe(200);
    const replay = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body, headers });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(callsWith('[fail-once:retry-1]')).toHaveLength(2);
    const ledger = await turnLedger(o.orgId);
    expect(kinds(ledger)).toEqual(['reservation', 'release', 'reservation', 'capture']);
    expect(ledger[2]!.key).toBe(`${ledger[0]!.key}#2`);
    expect(await balanceOf(o)).toBe(100 - PRICE);
    expect(await invocationsCounted(o.orgId)).toBe(1);
  });

  it('a retry that finds the reservation of an attempt that died still open reuses it: one reservation, captured once', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const key = `resume-${o.orgId}`;
    const body = { message: 'hello [resume-1]' };
    // What a first attempt that died after reserving left behind: the reservation under the turn's key.
    const claimKey = `request:${requestHash('POST', `/v1/agents/${agent}/chat`, JSON.stringify(body)).slice(0, 32)}:0:${key}`;
    const scope = systemScope(o.orgId, 'live', 'growth', 'req_test');
    await t.app.services.credits.reserve(scope, { amount: PRICE, key: turnKeyOf(scope, claimKey) });
    expect(await balanceOf(o)).toBe(100 - PRICE);

    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body, headers: { 'Idempotency-Key': key } });
    expect(r.status, r.text).toBe(200);
    expect(kinds(await turnLedger(o.orgId))).toEqual(['reservation', 'capture']);
    expect(await balanceOf(o)).toBe(100 - PRICE);
  });

  it('channel turns (a flow step, a call) are priced at the organization plan and a retried step is paid and counted once', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o);
    const s = t.app.services;
    const port = agentTurns({ orm: t.app.orm, chat: s.chat, conversations: s.conversations });
    const tenant = { organizationId: o.orgId, mode: 'live' as const };
    const input = { agentId: agent, text: 'hello [fail-once:flow-1]', channel: 'sms' as const, contactAddress: '+14155550142', retryKey: 'flow:exe_1:step_3' };
    await expect(port.replyTurn(tenant, input)).rejects.toMatchObject({ code: 'LLM_PROVIDER_ERROR' });
    const first = await port.replyTurn(tenant, input);
    expect(first.text).toBe('Hello from the fake model.');
    // The step retried once more after it was answered (its own commit lost): the turn was paid already.
    await port.replyTurn(tenant, input);
    expect(kinds(await turnLedger(o.orgId))).toEqual(['reservation', 'release', 'reservation', 'capture']);
    expect((await turnLedger(o.orgId))[2]!.amount).toBe(-PRICE); // growth's price, not starter's
    expect(await balanceOf(o)).toBe(100 - PRICE);
    expect(await invocationsCounted(o.orgId)).toBe(1);
  });

  it('a turn whose process died leaves its reservation to the stale-reservation sweep, scheduled every minute (test/billing-sweep.test.ts)', async () => {
    const { rows } = await t.db.query(`select cron from pgboss.schedule where name = 'billing.stale-reservation-sweep'`);
    expect(rows).toEqual([{ cron: '* * * * *' }]);
    expect(t.config.billing.staleReservationSeconds).toBe(600); // ten LLM_TIMEOUT_MS of 1.5 s would be less than 10 minutes
  });

  it('test-mode chats never touch the ledger', async () => {
    const o = await liveOrgWithBalance(t, 'growth', 100);
    const agent = await liveAgent(o, o.testKey);
    const before = llm.calls.length;
    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.testKey, body: { message: 'hello in test mode' } });
    expect(r.status, r.text).toBe(200);
    expect(llm.calls.length).toBe(before); // the sandbox model answered
    const { rows } = await t.db.query(`select count(*)::int as n from credit_ledger_entries where organization_id = $1 and (mode = 'test' or idempotency_key like 'agent_turn:%')`, [o.orgId]);
    expect(rows[0].n).toBe(0);
    expect(await balanceOf(o)).toBe(100);
  });
});

describe('the live provider deadline', () => {
  it('bounds a non-streamed call too: an answer within it, LlmDeadlineError past it (the request aborted)', async () => {
    const { generateText } = await import('ai');
    const providers = createLlmProviders({ baseUrl: t.config.agents.llmBaseUrl, apiKey: 'sk-fake', timeoutMs: LLM_TIMEOUT_MS, sandbox: { firstTokenMs: 1, chunkMs: 1 } });
    const model = (await providers.model('live', MODEL))!;
    const ok = await generateText({ model, prompt: 'hello [json-1]', maxRetries: 0 });
    expect(ok.text).toBe('Hello from the fake model.');
    expect(callsWith('[json-1]')[0]!.body.stream).toBeFalsy();
    await expect(generateText({ model, prompt: 'hello [hang] [json-2]', maxRetries: 0 })).rejects.toBeInstanceOf(LlmDeadlineError);
    await abortedByClient('[json-2]');
  });
});

function sseEvents(text: string): { event: string; data: any }[] {
  return text.split('\n\n').filter((f) => f.trim()).map((frame) => ({
    event: /^event: (.*)$/m.exec(frame)?.[1] ?? 'message',
    data: JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? 'null'),
  }));
}
