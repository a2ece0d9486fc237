/** Subscriptions over graphql-ws and SSE, authenticated with the same credentials as HTTP. */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';

let t: TestApp;
let org: TestOrg;
beforeAll(async () => {
  t = await startTestApp();
  org = await t.createOrg('growth');
});
afterAll(async () => { await t?.close(); });

function wsClient(connectionParams: Record<string, unknown>) {
  return createClient({ url: `${t.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams, retryAttempts: 0, lazy: true });
}

describe('graphql-ws', () => {
  it('authenticates at connection time and scopes events to the tenant and mode', async () => {
    const client = wsClient({ apiKey: org.liveKey });
    const first = await new Promise<any>((resolve, reject) => {
      const dispose = client.subscribe({ query: 'subscription { heartbeat(intervalSeconds: 1) { organizationId mode at } }' }, {
        next: (v) => { dispose(); resolve(v); }, error: reject, complete: () => {},
      });
    });
    await client.dispose();
    expect(first.data.heartbeat).toMatchObject({ organizationId: org.orgId, mode: 'live' });
  });

  it('accepts a bearer token in connection params', async () => {
    const token = await t.mintToken(org.orgId, 'ws@example.com', 'viewer', { mode: 'test' });
    const client = wsClient({ authorization: `Bearer ${token}` });
    const first = await new Promise<any>((resolve, reject) => {
      const dispose = client.subscribe({ query: 'subscription { heartbeat { organizationId mode } }' }, { next: (v) => { dispose(); resolve(v); }, error: reject, complete: () => {} });
    });
    await client.dispose();
    expect(first.data.heartbeat).toEqual({ organizationId: org.orgId, mode: 'test' });
  });

  it('refuses a connection with a bad key (close code 4401 and the error code)', async () => {
    const client = wsClient({ apiKey: 'svc_test_sk_nope' });
    const err = await new Promise<any>((resolve) => {
      client.subscribe({ query: 'subscription { heartbeat { at } }' }, { next: () => {}, error: resolve, complete: () => resolve(undefined) });
    });
    await client.dispose();
    expect(err?.code).toBe(4401);
    expect(String(err?.reason)).toContain('INVALID_API_KEY');
  });

  it('runs queries over the socket with the connection\'s scope', async () => {
    const client = wsClient({ apiKey: org.testKey });
    const result = await new Promise<any>((resolve, reject) => {
      client.subscribe({ query: '{ viewer { mode organization { id } } }' }, { next: resolve, error: reject, complete: () => {} });
    });
    await client.dispose();
    expect(result.data.viewer).toEqual({ mode: 'test', organization: { id: org.orgId } });
  });
});

describe('SSE', () => {
  it('streams subscription events as text/event-stream with the API key', async () => {
    const controller = new AbortController();
    const res = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', 'X-API-Key': org.testKey },
      body: JSON.stringify({ query: 'subscription { heartbeat(intervalSeconds: 1) { organizationId mode } }' }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('"heartbeat"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    controller.abort();
    const line = text.split('\n').find((l) => l.startsWith('data:') && l.includes('heartbeat'))!;
    expect(JSON.parse(line.slice(5)).data.heartbeat).toEqual({ organizationId: org.orgId, mode: 'test' });
  });

  it('rejects an unauthenticated SSE subscription with 401', async () => {
    const res = await fetch(`${t.baseUrl}/graphql`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify({ query: 'subscription { heartbeat { at } }' }),
    });
    expect(res.status).toBe(401);
    expect((await res.json()).errors[0].extensions.code).toBe('UNAUTHORIZED');
  });
});
