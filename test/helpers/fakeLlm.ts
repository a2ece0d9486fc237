/**
 * A fake live model provider: a local server speaking the OpenAI chat-completions API (JSON, and SSE
 * chunks for `stream: true`, which the agents always ask for). The last user message steers it:
 * `[fail]` → 500, `[fail-once:x]` → 500 the first time x is seen, `[hang]` → never answers,
 * `[stall]` → streams one chunk then nothing, `[slow]` → streams a word every 20 ms until the client
 * leaves, `[gate:x]` → answers only once the test calls `open('x')`; anything else is answered
 * "Hello from the fake model." (streamed when `stream: true`).
 *
 * An agent whose system prompt holds `[knowledge]` gets a model that answers from its knowledge
 * like a retrieval-using model would: it calls the `knowledge_base` tool with the user's words,
 * then answers with what the tool found (its chunks' text), or KNOWLEDGE_NONE when it found nothing.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { eventually } from './assertions.ts';

export type LlmCall = { body: any; lastUser: string; closedEarly: boolean };

export type FakeLlm = {
  /** The base URL for LLM_BASE_URL. */
  url: string;
  calls: LlmCall[];
  callsWith(marker: string): LlmCall[];
  /** Resolves once the provider saw the client close the request with `marker` before it answered (a deadline aborted it). */
  abortedByClient(marker: string): Promise<unknown>;
  /** Lets the requests held by `[gate:name]` be answered. */
  open(gate: string): void;
  close(): Promise<void>;
};

export const FAKE_ANSWER = 'Hello from the fake model.';
export const KNOWLEDGE_NONE = 'Sorry, I do not know that.';

/** `[knowledge]` mode: a tool call to knowledge_base, or the answer from its results; undefined otherwise. */
function knowledgeStep(body: any, lastUser: string): { tool: string } | { text: string } | undefined {
  const system = (body.messages ?? []).filter((m: any) => m.role === 'system').map((m: any) => String(m.content)).join('\n');
  if (!system.includes('[knowledge]') || !(body.tools ?? []).some((t: any) => t.function?.name === 'knowledge_base')) return undefined;
  const messages: any[] = body.messages ?? [];
  const lastUserAt = messages.map((m) => m.role).lastIndexOf('user');
  const results = messages.slice(lastUserAt + 1).filter((m) => m.role === 'tool');
  if (results.length === 0) return { tool: JSON.stringify({ query: lastUser }) };
  const found: string[] = [];
  for (const r of results) {
    try {
      const parsed = JSON.parse(typeof r.content === 'string' ? r.content : JSON.stringify(r.content));
      for (const hit of parsed.results ?? []) found.push(String(hit.content));
    } catch { /* not a knowledge result */ }
  }
  return { text: found.length ? found.join(' ') : KNOWLEDGE_NONE };
}

/** The text of the last user message of a chat-completions request. */
function lastUserText(body: any): string {
  const user = [...(body.messages ?? [])].reverse().find((m: any) => m.role === 'user');
  if (!user) return '';
  return typeof user.content === 'string' ? user.content : (user.content ?? []).map((p: any) => p.text ?? '').join('');
}

export async function startFakeLlm(): Promise<FakeLlm> {
  const calls: LlmCall[] = [];
  const failedOnce = new Set<string>();
  const gates = new Map<string, { opened: boolean; waiting: (() => void)[] }>();
  const gate = (name: string) => {
    let g = gates.get(name);
    if (!g) gates.set(name, (g = { opened: false, waiting: [] }));
    return g;
  };

  const answer = (body: any, call: LlmCall, res: http.ServerResponse) => {
    const usage = { prompt_tokens: 21, completion_tokens: 6, total_tokens: 27 };
    const base = { id: 'chatcmpl-fake', created: Math.floor(Date.now() / 1000), model: body.model };
    const knowledge = knowledgeStep(body, call.lastUser);
    if (!body.stream && knowledge) {
      const message = 'tool' in knowledge
        ? { role: 'assistant', content: null, tool_calls: [{ id: `call_${calls.length}`, type: 'function', function: { name: 'knowledge_base', arguments: knowledge.tool } }] }
        : { role: 'assistant', content: knowledge.text };
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
        ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: 'tool' in knowledge ? 'tool_calls' : 'stop' }], usage,
      }));
      return;
    }
    if (!body.stream) {
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({
        ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: FAKE_ANSWER }, finish_reason: 'stop' }], usage,
      }));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    const chunk = (delta: Record<string, unknown>, finish: string | null, extra: Record<string, unknown> = {}) =>
      res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`);
    chunk({ role: 'assistant', content: '' }, null);
    if (knowledge && 'tool' in knowledge) {
      chunk({ tool_calls: [{ index: 0, id: `call_${calls.length}`, type: 'function', function: { name: 'knowledge_base', arguments: knowledge.tool } }] }, null);
      chunk({}, 'tool_calls', { usage });
      res.end('data: [DONE]\n\n');
      return;
    }
    if (knowledge) {
      for (const piece of knowledge.text.split(/(?<= )/)) chunk({ content: piece }, null);
      chunk({}, 'stop', { usage });
      res.end('data: [DONE]\n\n');
      return;
    }
    if (call.lastUser.includes('[slow]')) {
      const timer = setInterval(() => chunk({ content: 'word ' }, null), 20);
      res.on('close', () => clearInterval(timer));
      return; // words until the client goes away
    }
    if (call.lastUser.includes('[stall]')) {
      chunk({ content: 'Hello' }, null);
      return; // the rest never comes
    }
    for (const piece of FAKE_ANSWER.split(/(?<= )/)) chunk({ content: piece }, null);
    chunk({}, 'stop', { usage });
    res.end('data: [DONE]\n\n');
  };

  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(raw);
      const call: LlmCall = { body, lastUser: lastUserText(body), closedEarly: false };
      calls.push(call);
      res.on('close', () => { if (!res.writableFinished) call.closedEarly = true; });
      const once = /\[fail-once:([^\]]+)\]/.exec(call.lastUser)?.[1];
      if (call.lastUser.includes('[fail]') || (once && !failedOnce.has(once))) {
        if (once) failedOnce.add(once);
        res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { message: 'upstream exploded', type: 'server_error', code: null } }));
        return;
      }
      if (call.lastUser.includes('[hang]')) return; // never answers; the client's deadline ends it
      const held = /\[gate:([^\]]+)\]/.exec(call.lastUser)?.[1];
      if (held && !gate(held).opened) {
        gate(held).waiting.push(() => answer(body, call, res));
        return;
      }
      answer(body, call, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const callsWith = (marker: string) => calls.filter((c) => c.lastUser.includes(marker));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    calls,
    callsWith,
    abortedByClient: (marker) => eventually(`the ${marker} request closed`, () => (callsWith(marker)[0]?.closedEarly ? true : undefined)),
    open: (name) => {
      const g = gate(name);
      g.opened = true;
      for (const go of g.waiting.splice(0)) go();
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
