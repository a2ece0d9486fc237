/**
 * Shared setup of the agents tests (test/agents-config, -chat and -streaming): one app with
 * workers and the sandbox model, a local tool webhook, and helpers over them (create and deploy an
 * agent, chat, stream a chat, read SSE).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { manualClockClient, startTestApp, type HttpResponse, type TestApp, type TestOrg } from './testApp.ts';
import { eventually } from './assertions.ts';

export type AgentsApp = {
  t: TestApp;
  org: TestOrg;
  other: TestOrg;
  /** The tool webhook: `/fail` answers 500, anything else an order status. */
  hookUrl: string;
  hookCalls: { headers: http.IncomingHttpHeaders; body: string }[];
  close(): Promise<void>;
};

/** Starts the tool webhook, then the app (workers, manual clock) with two organizations. */
export async function startAgentsApp(): Promise<AgentsApp> {
  const hookCalls: AgentsApp['hookCalls'] = [];
  const hook = http.createServer((req, res) => {
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
  const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;
  let t: TestApp | undefined;
  const close = async () => {
    await t?.close();
    await new Promise((r) => hook.close(r));
  };
  try {
    t = await startTestApp({
      workers: true,
      env: { WEBHOOKS_ALLOW_LOOPBACK: '1', SANDBOX_LLM_FIRST_TOKEN_MS: '5', SANDBOX_LLM_CHUNK_MS: '3', SANDBOX_MARKETPLACE_REVIEW_MS: '0' },
    });
    const org = await t.createOrg('enterprise', 'Agents org');
    const other = await t.createOrg('enterprise', 'Other org');
    return { t, org, other, hookUrl, hookCalls, close };
  } catch (err) {
    await close();
    throw err;
  }
}

export function expectError(r: HttpResponse, status: number, code: string) {
  expect({ status: r.status, code: r.body?.error?.code }).toEqual({ status, code });
}

export const BASE = { name: 'Helper', type: 'conversational', model: 'sandbox-1', system_prompt: 'You are a helpful assistant.' };

/** Reads an SSE response into events (name + parsed data). */
export async function readSse(res: Response, stopAfter?: number): Promise<{ event: string; data: any }[]> {
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

/** assertions.ts's `eventually`, with 5 s. */
export function until<T>(f: () => Promise<T | undefined>, ms = 5000): Promise<T> {
  return eventually('the agent', f, ms);
}

/** Helpers over the test file's app and organization (read when called: both start in beforeAll). */
export function agentsHelpers(app: () => TestApp, defaultOrg: () => TestOrg) {
  const { clock, call, gql } = manualClockClient(app, defaultOrg);

  async function createAgent(extra: Record<string, unknown> = {}, key = defaultOrg().testKey) {
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

  const streamChat = (id: string, body: Record<string, unknown>, signal?: AbortSignal) => {
    clock().advance(20);
    return fetch(`${app().baseUrl}/v1/agents/${id}/chat`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-API-Key': defaultOrg().testKey }, body: JSON.stringify({ ...body, stream: true }), signal,
    });
  };

  return { clock, call, gql, createAgent, deployedAgent, chat, streamChat };
}
