/** The request log line: one per request, with the operation that served it and the error code of a failure. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { eventually } from './helpers/assertions.ts';

let t: TestApp;
const lines: Record<string, unknown>[] = [];
beforeAll(async () => {
  t = await startTestApp({ env: { LOG_LEVEL: 'info' }, logStream: { write: (line) => { lines.push(JSON.parse(line) as Record<string, unknown>); } } });
});
afterAll(async () => { await t?.close(); });

/** The request's log line (written when the response closes, so it may follow the answer by a moment). */
const requestLine = (requestId: string) => eventually(`the log line of ${requestId}`, () => lines.find((l) => l.msg === 'request' && l.request_id === requestId));

describe('request log', () => {
  it('names the operation of a REST request and the error code of a failed one', async () => {
    const org = await t.createOrg();
    const ok = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: '+14155550100', body: 'hi' } });
    expect(ok.status, ok.text).toBe(201);
    const bad = await t.rest('POST', '/v1/messages/sms', { key: org.testKey, body: { to: 'nobody', body: 'hi' } });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    const okLine = await requestLine(ok.body.meta.request_id);
    expect(okLine).toMatchObject({ method: 'POST', path: '/v1/messages/sms', status: 201, operation: 'messaging.sendSms' });
    expect(okLine).not.toHaveProperty('code');
    expect(await requestLine(bad.body.meta.request_id)).toMatchObject({ status: bad.status, operation: 'messaging.sendSms', code: bad.body.error.code });
  });

  it('names a GraphQL request by its operation name, with the first error code', async () => {
    const org = await t.createOrg();
    const who = await t.rest('POST', '/graphql', { key: org.testKey, body: { query: 'query Who { viewer { role } }', operationName: 'Who' } });
    expect(who.status, who.text).toBe(200);
    const failed = await t.rest('POST', '/graphql', { key: org.testKey, body: { query: 'query Lost { message(id: "msg_nope") { id } }', operationName: 'Lost' } });
    const code = failed.body.errors?.[0]?.extensions?.code as string;
    expect(code, failed.text).toBeTruthy();
    expect(await requestLine(who.headers.get('x-request-id')!)).toMatchObject({ path: '/graphql', status: 200, operation: 'graphql Who' });
    expect(await requestLine(failed.headers.get('x-request-id')!)).toMatchObject({ operation: 'graphql Lost', code });
  });

  it('carries the code of a request refused before any operation', async () => {
    const denied = await t.rest('GET', '/v1/settings/organization', { key: 'svc_test_sk_nope' });
    expect(denied.status).toBe(401);
    expect(await requestLine(denied.body.meta.request_id)).toMatchObject({ status: 401, code: denied.body.error.code });
  });
});
