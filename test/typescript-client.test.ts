/**
 * The TypeScript client (clients/typescript: openapi-typescript's `paths` from schema/openapi.json
 * over openapi-fetch, with `createClient({ apiKey, baseUrl })`) drives a running service: send,
 * read, list and page through messages, and error answers typed as the error envelope. The
 * `@ts-expect-error` lines make `npm run typecheck` fail if the generated types stop refusing them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { createClient, type ErrorEnvelope, type PlatformClient } from '../clients/typescript/src/index.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';

let t: TestApp;
let api: PlatformClient;

beforeAll(async () => {
  t = await startTestApp({ clock: systemClock });
  const org = await t.createOrg('growth');
  api = createClient({ apiKey: org.testKey, baseUrl: `${t.baseUrl}/` });
});
afterAll(async () => { await t?.close(); });

describe('the TypeScript client', () => {
  it('sends an SMS and reads it back', async () => {
    const sent = await api.POST('/v1/messages/sms', { body: { to: '+14155550100', body: 'Hello from the client' } });
    expect(sent.response.status, JSON.stringify(sent.error)).toBe(201);
    const id: string = sent.data!.data.id;
    expect(id).toMatch(/^msg_/);
    expect(sent.data!.meta.request_id).toBeTruthy();
    const got = await api.GET('/v1/messages/{id}', { params: { path: { id } } });
    expect(got.data?.data.id).toBe(id);
    expect(got.data?.data.to).toBe('+14155550100');
    expect(got.data?.data.channel).toBe('sms');
  });

  it('lists messages and pages through them with the cursor', async () => {
    for (const to of ['+14155550101', '+14155550102', '+14155550103']) {
      const { response } = await api.POST('/v1/messages/sms', { body: { to, body: `to ${to}` } });
      expect(response.status).toBe(201);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const { data, error } = await api.GET('/v1/messages', { params: { query: { limit: 2, channel: 'sms', ...(cursor ? { cursor } : {}) } } });
      expect(error).toBeUndefined();
      pages++;
      seen.push(...data!.data.map((m) => m.id));
      if (!data!.meta.pagination.has_more) break;
      cursor = data!.meta.pagination.cursor ?? undefined;
      expect(cursor).toBeTruthy();
    }
    expect(pages).toBeGreaterThanOrEqual(2);
    expect(seen.length).toBeGreaterThanOrEqual(4);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('answers errors as the error envelope', async () => {
    const missing = await api.GET('/v1/messages/{id}', { params: { path: { id: 'msg_01abcdefghjkmnpqrstvwxyz00' } } });
    expect(missing.data).toBeUndefined();
    expect(missing.response.status).toBe(404);
    const envelope: ErrorEnvelope = missing.error!;
    expect(envelope.error.code).toBe('NOT_FOUND');
    expect(envelope.meta.request_id).toBeTruthy();
    const invalid = await api.POST('/v1/messages/sms', { body: { to: '12', body: 'x' } });
    expect(invalid.response.status).toBe(422);
    expect(invalid.error?.error.code).toBe('INVALID_PHONE_NUMBER');
    expect(invalid.error?.error.details).toBeTypeOf('object');
    // The generated types refuse what the API refuses.
    // @ts-expect-error `to` is required
    const untyped = await api.POST('/v1/messages/sms', { body: { body: 'x' } });
    expect(untyped.response.status).toBe(422);
    // @ts-expect-error no such path
    await expect(api.GET('/v1/nowhere')).resolves.toMatchObject({ response: { status: 404 } });
  });

  it('refuses to start without a credential, and a bad key is an error answer', async () => {
    expect(() => createClient({ baseUrl: t.baseUrl })).toThrow(/apiKey/);
    const bad = createClient({ apiKey: 'svc_test_sk_nope', baseUrl: t.baseUrl });
    const r = await bad.GET('/v1/messages');
    expect(r.response.status).toBe(401);
    expect(r.error?.error.code).toMatch(/INVALID_API_KEY|UNAUTHORIZED/);
  });
});
