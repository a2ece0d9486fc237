/**
 * Voice calls end to end over HTTP (REST and GraphQL) against the real database, pg-boss workers
 * and the sandbox gateway: validation of from/agent/IVR, the lifecycle of every magic destination,
 * hangups, max_duration, events through the outbox and signed status callbacks, usage per started
 * minute, recordings behind signed expiring links, lists, and the live callUpdated subscription.
 */
import { createHmac } from 'node:crypto';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, eventually, expectError, startReceiver, VOICE_ENV, type Hit } from './helpers/voice.ts';

let t: TestApp;
let a: TestOrg;
let b: TestOrg;
let from: string;
let receiver: { url: string; hits: Hit[]; close(): void };

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestApp({ workers: true, clock: systemClock, env: VOICE_ENV });
  a = await t.createOrg('enterprise', 'Voice A');
  b = await t.createOrg('enterprise', 'Voice B');
  from = await buyVoiceNumber(t, a.testKey);
});
afterAll(async () => {
  await t?.close();
  receiver?.close();
});

const place = (body: Record<string, unknown>, key = a.testKey) => t.rest('POST', '/v1/voice/calls', { key, body: { from, ...body } });
async function placeOk(body: Record<string, unknown>): Promise<any> {
  const r = await place(body);
  expect(r.status, r.text).toBe(201);
  return r.body.data;
}
const eventsOf = async (id: string) => (await t.db.query(`select type, data from events where resource_id = $1 order by sequence`, [id])).rows as { type: string; data: any }[];
/** A graphql-ws `callUpdated(id)` subscription: `seen` gets each value (mapped), `subscribed` resolves with the first. */
function subscribeCall<T>(id: string, fields: string, map: (v: any) => T) {
  const client = createClient({ url: `${t.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: a.testKey }, retryAttempts: 0, lazy: true });
  const seen: T[] = [];
  let first!: () => void;
  const subscribed = new Promise<void>((r) => { first = r; });
  const dispose = client.subscribe({ query: `subscription($id: ID!) { callUpdated(id: $id) { ${fields} } }`, variables: { id } }, {
    next: (v: any) => { seen.push(map(v.data.callUpdated)); first(); }, error: () => {}, complete: () => {},
  });
  return { seen, subscribed, stop: async () => { dispose(); await client.dispose(); } };
}

/**
 * Holds a bus subscriber from before a call is placed, so every change this instance commits is
 * handed over locally and its commit's NOTIFY skipped: without one, a change committed while
 * nobody watched (the call answering) can have its NOTIFY arrive after a subscription starts,
 * and that subscriber reads the call once more.
 */
function watchBus(): () => void {
  const it = (t.app.services as unknown as { bus: { subscribe: (a: () => boolean) => AsyncIterableIterator<unknown> } }).bus.subscribe(() => false);
  return () => { void it.return?.(); };
}

describe('placing a call', () => {
  it('answers 201 initiating with the spec fields', async () => {
    const call = await placeOk({ to: '+14155550100', metadata: { order: 42 } });
    expect(call).toMatchObject({ to: '+14155550100', from, status: 'initiating', agent_id: null, record: false, max_duration: 3600, metadata: { order: 42 } });
    expect(call.id).toMatch(/^call_/);
    expect(new Date(call.created_at).getTime()).toBeGreaterThan(0);
  });

  it('refuses a from number the account does not own (VALIDATION_ERROR naming from), and none at all (SENDER_NOT_CONFIGURED)', async () => {
    expectError(await place({ to: '+14155550100', from: '+14155550199' }), 422, 'VALIDATION_ERROR', 'from');
    expectError(await place({ to: '+14155550100', from }, b.testKey), 422, 'SENDER_NOT_CONFIGURED');
  });

  it('refuses unknown agents and IVR flows (404), bad numbers, bad options, and live mode without a gateway', async () => {
    expectError(await place({ to: '+14155550100', agent_id: 'agt_01jd0000000000000000000000' }), 404, 'NOT_FOUND', 'agent_id');
    expectError(await place({ to: '+14155550100', ivr_id: 'ivr_01jd0000000000000000000000' }), 404, 'NOT_FOUND', 'ivr_id');
    expectError(await place({ to: '415-555' }), 422, 'INVALID_PHONE_NUMBER', 'to');
    expectError(await place({ to: '+14155550100', max_duration: 0 }), 422, 'VALIDATION_ERROR', 'max_duration');
    expectError(await place({ to: '+14155550100', webhook_url: 'ftp://example.com/x' }), 422, 'INVALID_WEBHOOK_URL', 'webhook_url');
    expectError(await place({}), 422, 'MISSING_REQUIRED_FIELD', 'to');
    expectError(await place({ to: '+14155550100' }, a.liveKey), 503, 'CHANNEL_UNAVAILABLE');
    const { rows } = await t.db.query(`select count(*)::int as n from calls where organization_id = $1 and "to" = '415-555'`, [a.orgId]);
    expect(rows[0].n).toBe(0);
  });
});

describe('lifecycle', () => {
  it('rings, answers, stays connected until hangup; hangup completes it with duration, usage, events and a signed callback', async () => {
    const call = await placeOk({ to: '+14155550101', webhook_url: `${receiver.url}/calls` });
    const live = await callReaches(t, a.testKey, call.id, 'in_progress');
    expect(live.answered_at).not.toBeNull();
    expect(live.ringing_at).not.toBeNull();
    await new Promise((r) => setTimeout(r, 1100));
    const hung = await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: a.testKey });
    expect(hung.status, hung.text).toBe(200);
    expect(hung.body.data).toMatchObject({ id: call.id, status: 'completed' });
    expect(hung.body.data.duration_seconds).toBeGreaterThanOrEqual(1);
    expect(hung.body.data.ended_at).not.toBeNull();
    expectError(await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: a.testKey }), 409, 'CALL_ALREADY_ENDED');
    const types = (await eventsOf(call.id)).map((e) => e.type);
    expect(types).toEqual(['call.initiated', 'call.ringing', 'call.answered', 'call.completed']);
    const usage = await t.db.query(`select kind, quantity from usage_entries where resource_id = $1`, [call.id]);
    expect(usage.rows).toEqual([{ kind: 'voice.minutes', quantity: 1 }]);
    const steps = (await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: a.testKey })).body.data.steps.map((s: any) => s.detail?.status).filter(Boolean);
    expect(steps).toEqual(['initiating', 'ringing', 'in_progress', 'completed']);
    // Signed status callbacks, in order, at the call's webhook_url.
    const hits = await eventually('4 callbacks', () => {
      const got = receiver.hits.filter((h) => h.path === '/calls' && h.json?.data?.call_id === call.id);
      return got.length >= 4 ? got : undefined;
    });
    const secret = (await t.gql('{ webhookCallbackSecret }', {}, { key: a.testKey })).body.data.webhookCallbackSecret;
    for (const h of hits) expect(h.headers['x-service-signature']).toBe(createHmac('sha256', secret).update(h.body).digest('hex'));
    expect(hits.map((h) => h.json.data.status).sort()).toEqual(['completed', 'in_progress', 'initiating', 'ringing']);
  });

  it('magic destinations: busy, no_answer and failed (SIP 503), each a call.failed event without usage', async () => {
    const busy = await placeOk({ to: '+15005550006' });
    const noAnswer = await placeOk({ to: '+15005550007' });
    const failed = await placeOk({ to: '+15005550008' });
    expect((await callReaches(t, a.testKey, busy.id, 'busy')).duration_seconds).toBe(0);
    await callReaches(t, a.testKey, noAnswer.id, 'no_answer');
    const f = await callReaches(t, a.testKey, failed.id, 'failed');
    expect(f).toMatchObject({ sip_code: 503, error_code: 'SIP_ERROR', answered_at: null });
    for (const c of [busy, noAnswer, failed]) {
      expect((await eventsOf(c.id)).map((e) => e.type)).toEqual(['call.initiated', 'call.ringing', 'call.failed']);
      expect((await t.db.query('select count(*)::int as n from usage_entries where resource_id = $1', [c.id])).rows[0].n).toBe(0);
      expectError(await t.rest('POST', `/v1/voice/calls/${c.id}/hangup`, { key: a.testKey }), 409, 'CALL_ALREADY_ENDED');
    }
  });

  it('+15005550009 answers, presses 1, and hangs up after 5 s', async () => {
    const call = await placeOk({ to: '+15005550009' });
    const done = await callReaches(t, a.testKey, call.id, 'completed', 30_000);
    // The sandbox's events are jobs due at their scripted times: on a loaded machine a late
    // `answered` shortens the measured call (answered_at is when it was applied), a late hang-up lengthens it.
    expect(done.duration_seconds).toBeGreaterThanOrEqual(3);
    expect(done.duration_seconds).toBeLessThanOrEqual(8);
    expect(done.end_reason).toBe('remote');
    expect(done.steps.some((s: any) => s.type === 'dtmf' && s.detail.key === '1')).toBe(true);
  });

  it('max_duration ends the call by its timer (a row of the timeline)', async () => {
    const call = await placeOk({ to: '+14155550102', max_duration: 1 });
    const done = await callReaches(t, a.testKey, call.id, 'completed');
    expect(done.end_reason).toBe('max_duration');
    expect(done.steps.map((s: any) => s.type)).toContain('max_duration_reached');
  });

  it('a hangup before the answer cancels the call; an unknown call is CALL_NOT_FOUND, another tenant\'s too', async () => {
    // The no-answer number rings for 2 s here (an ordinary call answers 150 ms after placement, which a
    // loaded machine can outrun between two requests).
    const call = await placeOk({ to: '+15005550007' });
    const hung = await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: a.testKey });
    expect(hung.body.data).toMatchObject({ status: 'cancelled', duration_seconds: 0 });
    // The sandbox's later steps (ringing, no_answer at 2.05 s) find the call ended and change nothing.
    await new Promise((r) => setTimeout(r, 2300));
    expect((await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: a.testKey })).body.data.status).toBe('cancelled');
    expectError(await t.rest('POST', '/v1/voice/calls/call_01jd0000000000000000000000/hangup', { key: a.testKey }), 404, 'CALL_NOT_FOUND');
    expectError(await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: b.testKey }), 404, 'CALL_NOT_FOUND');
  });
});

describe('an agent on the call', () => {
  it('takes the first turn when the call is answered; a hangup tells it first, and its conversation ends completed (call_ended)', async () => {
    const created = await t.rest('POST', '/v1/agents', { key: a.testKey, body: { name: 'Receptionist', type: 'conversational', model: 'sandbox-1', system_prompt: 'Answer calls briefly.', channels: ['web'] } });
    expect(created.status, created.text).toBe(201);
    const agentId = created.body.data.id as string;
    expect((await t.rest('POST', `/v1/agents/${agentId}/deploy`, { key: a.testKey, body: {} })).status).toBe(200);
    const conversationOf = async (callId: string, status: string) => ((await t.rest('GET', `/v1/agents/${agentId}/conversations?status=${status}`, { key: a.testKey })).body.data as any[])
      .find((c) => c.context?.call_id === callId);
    // Two calls with the agent: hanging up one ends only its own conversation.
    const call = await placeOk({ to: '+14155550140', agent_id: agentId });
    const other = await placeOk({ to: '+14155550141', agent_id: agentId });
    const conversation = await eventually('the agent\'s first turn', () => conversationOf(call.id, 'active'));
    expect(conversation).toMatchObject({ channel: 'voice', status: 'active', turns: 1 });
    const otherConversation = await eventually('the other call\'s turn', () => conversationOf(other.id, 'active'));
    expect((await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: a.testKey })).status).toBe(200);
    expect(await conversationOf(call.id, 'completed')).toMatchObject({ id: conversation.id, status: 'completed', ended_reason: 'call_ended' });
    expect(await conversationOf(other.id, 'active')).toMatchObject({ id: otherConversation.id });
    expect((await eventsOf(conversation.id)).map((e) => e.type)).toContain('conversation.completed');
    expect((await t.rest('POST', `/v1/voice/calls/${other.id}/hangup`, { key: a.testKey })).status).toBe(200);
    expect(await conversationOf(other.id, 'completed')).toMatchObject({ ended_reason: 'call_ended' });
  });
});

describe('recordings', () => {
  it('record: true gives a signed, expiring recording_url this service serves as audio/wav to an authenticated caller', async () => {
    const call = await placeOk({ to: '+14155550104', record: true });
    await callReaches(t, a.testKey, call.id, 'in_progress');
    await new Promise((r) => setTimeout(r, 1100));
    await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: a.testKey });
    const got = (await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: a.testKey })).body.data;
    const url = new URL(got.recording_url);
    expect(url.pathname).toBe(`/v1/voice/recordings/${call.id}`);
    const path = `${url.pathname}${url.search}`;
    const res = await fetch(`${t.baseUrl}${path}`, { headers: { 'X-API-Key': a.testKey } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('audio/wav');
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(bytes.subarray(8, 12).toString('latin1')).toBe('WAVE');
    // 8 kHz, 8-bit mono: about one second per 8000 bytes of data.
    expect(bytes.readUInt32LE(24)).toBe(8000);
    expect(bytes.readUInt32LE(40)).toBeGreaterThan(7000 * got.duration_seconds);
    // Unauthenticated, another tenant, an altered signature, an expired link.
    expect((await fetch(`${t.baseUrl}${path}`)).status).toBe(401);
    expectError(await t.rest('GET', path, { key: b.testKey }), 404, 'NOT_FOUND');
    const sig = url.searchParams.get('signature')!;
    // Alter the first character to one it is not (a fixed 'x' left a signature starting with 'x' intact).
    const altered = `${sig[0] === 'x' ? 'y' : 'x'}${sig.slice(1)}`;
    expectError(await t.rest('GET', path.replace(`signature=${sig}`, `signature=${altered}`), { key: a.testKey }), 404, 'NOT_FOUND');
    const past = `/v1/voice/recordings/${call.id}?expires=1000&signature=${sig}`;
    expect((await t.rest('GET', past, { key: a.testKey })).status).toBe(404);
    // A call without record has no recording.
    const plain = await placeOk({ to: '+14155550105' });
    expect((await t.rest('GET', `/v1/voice/calls/${plain.id}`, { key: a.testKey })).body.data.recording_url).toBeNull();
  });
});

describe('lists and GraphQL', () => {
  it('lists calls newest first with status, from and to filters and cursor pages', async () => {
    const all = await t.rest('GET', '/v1/voice/calls?limit=2', { key: a.testKey });
    expect(all.status, all.text).toBe(200);
    expect(all.body.data).toHaveLength(2);
    expect(all.body.meta.pagination.has_more).toBe(true);
    expect(Object.keys(all.body.data[0]).sort()).toEqual(['created_at', 'direction', 'duration_seconds', 'ended_at', 'from', 'id', 'price', 'price_unit', 'recording_url', 'status', 'to']);
    const next = await t.rest('GET', `/v1/voice/calls?limit=2&cursor=${encodeURIComponent(all.body.meta.pagination.cursor)}`, { key: a.testKey });
    expect(next.body.data[0].id < all.body.data[1].id).toBe(true);
    const busy = await t.rest('GET', '/v1/voice/calls?status=busy', { key: a.testKey });
    expect(busy.body.data.map((c: any) => c.to)).toEqual(['+15005550006']);
    const to = await t.rest('GET', '/v1/voice/calls?to=%2B15005550008', { key: a.testKey });
    expect(to.body.data.map((c: any) => c.status)).toEqual(['failed']);
    const unencoded = await t.rest('GET', '/v1/voice/calls?to=+15005550008', { key: a.testKey });
    expect(unencoded.body.data.map((c: any) => c.id)).toEqual(to.body.data.map((c: any) => c.id));
    expectError(await t.rest('GET', '/v1/voice/calls?status=nope', { key: a.testKey }), 422, 'VALIDATION_ERROR', 'status');
    expect((await t.rest('GET', '/v1/voice/calls', { key: b.testKey })).body.data).toEqual([]);
  });

  it('GraphQL twins: createCall, call, calls and hangupCall share validation and results', async () => {
    const created = await t.gql('mutation($from: String!) { createCall(input: { to: "+14155550106", from: $from }) { id status from } }', { from }, { key: a.testKey });
    expect(created.body.data.createCall).toMatchObject({ status: 'initiating', from });
    const id = created.body.data.createCall.id;
    const bad = await t.gql('mutation { createCall(input: { to: "+14155550106", from: "+14155550199" }) { id } }', {}, { key: a.testKey });
    expect(bad.body.errors?.[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', details: { field: 'from' } });
    const read = await t.gql('query($id: ID!) { call(id: $id) { id to steps { type } } calls(first: 1) { edges { node { id } } } }', { id }, { key: a.testKey });
    expect(read.body.data.call).toMatchObject({ id, to: '+14155550106' });
    expect(read.body.data.calls.edges[0].node.id).toBe(id);
    const hung = await t.gql('mutation($id: ID!) { hangupCall(id: $id) { status endedAt } }', { id }, { key: a.testKey });
    expect(['cancelled', 'completed']).toContain(hung.body.data.hangupCall.status);
    const again = await t.gql('mutation($id: ID!) { hangupCall(id: $id) { status } }', { id }, { key: a.testKey });
    expect(again.body.errors?.[0].extensions.code).toBe('CALL_ALREADY_ENDED');
  });

  it('callUpdated streams the call now and after each status change', async () => {
    const call = await placeOk({ to: '+15005550006' });
    const client = createClient({ url: `${t.baseUrl.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { apiKey: a.testKey }, retryAttempts: 0, lazy: true });
    const seen: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const dispose = client.subscribe({ query: 'subscription($id: ID!) { callUpdated(id: $id) { id status } }', variables: { id: call.id } }, {
        next: (v: any) => {
          seen.push(v.data.callUpdated.status);
          if (v.data.callUpdated.status === 'busy') { dispose(); resolve(); }
        },
        error: reject, complete: () => resolve(),
      });
    });
    await client.dispose();
    expect(seen[seen.length - 1]).toBe('busy');
    expect(seen.length).toBeGreaterThanOrEqual(2);
  });

  it("callUpdated: a change committed by this instance arrives once, although its commit's NOTIFY announces it too", async () => {
    const unwatch = watchBus();
    const call = await placeOk({ to: '+14155550106' });
    await callReaches(t, a.testKey, call.id, 'in_progress');
    const { seen, subscribed, stop } = subscribeCall(call.id, 'id status', (c) => c.status as string);
    await subscribed;
    expect((await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: a.testKey })).status).toBe(200);
    await eventually('the completed value', () => (seen.includes('completed') ? true : undefined));
    // The NOTIFY of the same event comes too, and is not delivered again.
    await new Promise((r) => setTimeout(r, 500));
    await stop();
    unwatch();
    expect(seen).toEqual(['in_progress', 'completed']);
  });

  it("callUpdated: a call placed here is handed over with its call.initiated at commit, so a subscription started on the answer does not read it again when its NOTIFY comes", async () => {
    const unwatch = watchBus();
    const bus = (t.app.services as unknown as { bus: { deliverLocal: (n: any[]) => void } }).bus;
    const deliverLocal = bus.deliverLocal.bind(bus);
    const delivered: any[] = [];
    bus.deliverLocal = (n) => { delivered.push(...n); deliverLocal(n); };
    const calls = (t.app.services as unknown as { calls: { get: (...a: unknown[]) => Promise<unknown> } }).calls;
    const get = calls.get.bind(calls);
    let reads = 0;
    calls.get = (...args: unknown[]) => { reads += 1; return get(...args); };
    try {
      // No answer for a while: nothing but call.initiated (and ringing, committed here) to announce.
      const call = await placeOk({ to: '+15005550007' });
      const initiated = delivered.filter((n) => n.resourceId === call.id && n.type === 'call.initiated');
      const { rows } = await t.db.query(`select id from events where resource_id = $1 and type = 'call.initiated'`, [call.id]);
      expect(initiated.map((n) => n.id)).toEqual([rows[0].id]);
      const { seen, subscribed, stop } = subscribeCall(call.id, 'id status', (c) => c.status as string);
      await subscribed;
      await eventually('ringing', () => (seen.includes('ringing') ? true : undefined));
      // The NOTIFYs of both events have come and gone by now.
      await new Promise((r) => setTimeout(r, 500));
      await stop();
      expect(reads).toBe(1); // the call as it is when the subscription starts
      expect(seen.filter((s) => s === 'ringing')).toEqual(['ringing']);
    } finally {
      calls.get = get;
      bus.deliverLocal = deliverLocal;
      unwatch();
    }
  });

  it('callUpdated shows a change this instance committed as committed, without reading the call again; a change told by another instance is read', async () => {
    const unwatch = watchBus();
    const call = await placeOk({ to: '+14155550107' });
    await callReaches(t, a.testKey, call.id, 'in_progress');
    const calls = (t.app.services as unknown as { calls: { get: (...a: unknown[]) => Promise<unknown> } }).calls;
    const get = calls.get.bind(calls);
    let reads = 0;
    calls.get = (...args: unknown[]) => { reads += 1; return get(...args); };
    try {
      const { seen, subscribed, stop } = subscribeCall(call.id, 'id status endedAt steps { type }',
        (c) => ({ status: c.status as string, ended_at: c.endedAt as string | null, steps: (c.steps as unknown[]).length }));
      await subscribed;
      expect(reads).toBe(1); // the call as it is when the subscription starts
      expect((await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: a.testKey })).status).toBe(200);
      await eventually('the completed value', () => (seen.some((s) => s.status === 'completed') ? true : undefined));
      const stored = (await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: a.testKey })).body.data;
      expect(reads).toBe(2); // that GET; the subscriber read nothing
      expect(seen.at(-1)).toEqual({ status: 'completed', ended_at: stored.ended_at, steps: stored.steps.length });
      // A notice this instance did not commit (another instance's NOTIFY): read.
      (t.app.services as unknown as { bus: { deliverLocal: (n: unknown[]) => void } }).bus.deliverLocal([{ kind: 'event', id: 'evt_elsewhere', organizationId: a.orgId, mode: 'test', type: 'call.completed', resourceId: call.id }]);
      await eventually('a read', () => (reads === 3 ? true : undefined));
      await stop();
    } finally {
      calls.get = get;
      unwatch();
    }
  });
});
