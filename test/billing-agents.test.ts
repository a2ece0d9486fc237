/**
 * The live model provider's deadline (LLM_TIMEOUT_MS), with the provider played by a local server
 * speaking the OpenAI chat-completions API (JSON, and SSE chunks for `stream: true`, which the
 * agents always ask for): a live chat is answered through it; a provider that hangs, or stalls
 * mid-stream, past the deadline fails the turn with 502 LLM_PROVIDER_ERROR (`reason: timeout`) and
 * the request is aborted.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { createLlmProviders, LlmDeadlineError } from '../src/providers/llm/types.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { eventually, expectError } from './helpers/assertions.ts';

/** The deadline of a live model call in this file (a hanging provider fails the turn past it). */
const LLM_TIMEOUT_MS = 1500;
const MODEL = 'gpt-4o-mini';

type LlmCall = { body: any; lastUser: string; closedEarly: boolean };
const llmCalls: LlmCall[] = [];
const failedOnce = new Set<string>();
let llm: http.Server;
let t: TestApp;

/** The text of the last user message of a chat-completions request. */
function lastUserText(body: any): string {
  const user = [...(body.messages ?? [])].reverse().find((m: any) => m.role === 'user');
  if (!user) return '';
  return typeof user.content === 'string' ? user.content : (user.content ?? []).map((p: any) => p.text ?? '').join('');
}

/**
 * A fake OpenAI-compatible provider. The last user message steers it: `[fail]` → 500, `[fail-once:x]`
 * → 500 the first time x is seen, `[hang]` → never answers, `[stall]` → streams one chunk then
 * nothing, `[slow]` → streams a word every 20 ms until the client leaves; anything else is
 * answered "Hello from the fake model." (streamed when `stream: true`).
 */
function fakeLlm(): http.Server {
  return http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(raw);
      const call: LlmCall = { body, lastUser: lastUserText(body), closedEarly: false };
      llmCalls.push(call);
      res.on('close', () => { if (!res.writableFinished) call.closedEarly = true; });
      const once = /\[fail-once:([^\]]+)\]/.exec(call.lastUser)?.[1];
      if (call.lastUser.includes('[fail]') || (once && !failedOnce.has(once))) {
        if (once) failedOnce.add(once);
        res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { message: 'upstream exploded', type: 'server_error', code: null } }));
        return;
      }
      if (call.lastUser.includes('[hang]')) return; // never answers; the client's deadline ends it
      const text = 'Hello from the fake model.';
      const usage = { prompt_tokens: 21, completion_tokens: 6, total_tokens: 27 };
      const base = { id: 'chatcmpl-fake', created: Math.floor(Date.now() / 1000), model: body.model };
      if (!body.stream) {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
          ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }], usage,
        }));
        return;
      }
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
      const chunk = (delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}) =>
        res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`);
      chunk({ role: 'assistant', content: '' }, null);
      if (call.lastUser.includes('[slow]')) {
        const timer = setInterval(() => chunk({ content: 'word ' }, null), 20);
        res.on('close', () => clearInterval(timer));
        return; // words until the client goes away
      }
      if (call.lastUser.includes('[stall]')) {
        chunk({ content: 'Hello' }, null);
        return; // the rest never comes
      }
      for (const piece of text.split(/(?<= )/)) chunk({ content: piece }, null);
      chunk({}, 'stop', { usage });
      res.end('data: [DONE]\n\n');
    });
  });
}

beforeAll(async () => {
  llm = fakeLlm();
  await new Promise<void>((r) => llm.listen(0, '127.0.0.1', r));
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: { LLM_BASE_URL: `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1`, LLM_API_KEY: 'sk-fake', LLM_TIMEOUT_MS: String(LLM_TIMEOUT_MS) },
  });
});
afterAll(async () => {
  await t?.close();
  llm?.closeAllConnections();
  await new Promise((r) => llm?.close(r));
});

async function liveAgent(o: TestOrg, key = o.liveKey): Promise<string> {
  const created = await t.rest('POST', '/v1/agents', { key, body: { name: 'Live', type: 'conversational', model: MODEL, system_prompt: 'You are helpful.', channels: ['web'] } });
  expect(created.status, created.text).toBe(201);
  const deployed = await t.rest('POST', `/v1/agents/${created.body.data.id}/deploy`, { key, body: {} });
  expect(deployed.status, deployed.text).toBe(200);
  return created.body.data.id;
}

const callsWith = (marker: string) => llmCalls.filter((c) => c.lastUser.includes(marker));
/** The fake provider saw the client close the request before it answered (the deadline aborted it). */
const abortedByClient = (marker: string) => eventually(`the ${marker} request closed`, () => (callsWith(marker)[0]?.closedEarly ? true : undefined));

describe('live chats through the provider', () => {
  it('a live chat is answered by the provider; one hanging past LLM_TIMEOUT_MS fails 502 LLM_PROVIDER_ERROR (reason timeout), aborted, nothing stored', async () => {
    const o = await t.createOrg('enterprise', 'Live LLM');
    const agent = await liveAgent(o);
    const ok = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body: { message: 'hello [ok-1]' } });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data).toMatchObject({ content: 'Hello from the fake model.', tokens_used: { input: 21, output: 6 } });
    expect(callsWith('[ok-1]')[0]!.body).toMatchObject({ model: MODEL, stream: true });

    const r = await t.rest('POST', `/v1/agents/${agent}/chat`, { key: o.liveKey, body: { message: 'hello [hang] [hang-1]' } });
    expectError(r, 502, 'LLM_PROVIDER_ERROR');
    expect(r.body.error.details).toMatchObject({ model: MODEL, reason: 'timeout', timeout_ms: LLM_TIMEOUT_MS });
    await abortedByClient('[hang-1]');
    const { rows } = await t.db.query(`select count(*)::int as n from agent_messages where organization_id = $1 and mode = 'live'`, [o.orgId]);
    expect(rows[0].n).toBe(2); // the first turn's two messages only
  });

  it('a stream whose provider stalls past the deadline ends in an error event', async () => {
    const o = await t.createOrg('enterprise', 'Live LLM stream');
    const agent = await liveAgent(o);
    const stalled = await fetch(`${t.baseUrl}/v1/agents/${agent}/chat`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': o.liveKey }, body: JSON.stringify({ message: 'hello [stall]', stream: true }),
    });
    expect(stalled.status).toBe(200);
    const events = sseEvents(await stalled.text());
    expect(events.at(-1)).toMatchObject({ event: 'error', data: { code: 'LLM_PROVIDER_ERROR', status: 502, details: { reason: 'timeout' } } });
    await abortedByClient('[stall]');
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
