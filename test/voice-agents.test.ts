/**
 * The seam with the agents context (optional port `voiceAgents`): with a provider, agent_id is
 * checked through it and a hangup signals the agent before the call ends; the agents module
 * provides it (agents/voice.port.ts), so an agent_id must name an agent of the tenant. Also the rate-limit bucket of
 * POST /v1/voice/calls, shared by REST and GraphQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { systemScope } from '../src/platform/auth/scope.ts';
import { newId } from '../src/platform/ids.ts';
import { tenantEm } from '../src/platform/db/tenant.ts';
import { assembleCalls } from '../src/modules/voice/calls/assembly.ts';
import { RecordingLinks } from '../src/modules/voice/recordings/recordings.ts';
import { Call } from '../src/modules/voice/voice.entities.ts';
import type { VoiceAgentsPort } from '../src/modules/voice/voice.ports.ts';
import type { VoicemailService } from '../src/modules/voice/voicemail/voicemail.service.ts';
import { VoicePhi } from '../src/modules/voice/voice.phi.ts';
import { SandboxTranscriber } from '../src/providers/voice/sandbox.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, expectError, VOICE_ENV } from './helpers/voice.ts';

let t: TestApp;
let a: TestOrg;
let from: string;

beforeAll(async () => {
  t = await startTestApp({ workers: false, clock: systemClock, env: VOICE_ENV });
  a = await t.createOrg('starter', 'Voice agents');
  from = await buyVoiceNumber(t, a.testKey, '718');
});
afterAll(async () => { await t?.close(); });

describe('voiceAgents port', () => {
  it('with a provider: agent_id is checked through it, and hangup signals the agent before the call ends', async () => {
    const seen: string[] = [];
    const agents: VoiceAgentsPort = {
      exists: async (_tenant, id) => id === 'agt_known',
      callStarted: async () => { seen.push('started'); return undefined; },
      callEnding: async (_tenant, call) => {
        const { rows } = await t.db.query('select status from calls where id = $1', [call.callId]);
        seen.push(`ending:${call.agentId}:${rows[0].status}`);
      },
    };
    const hangups: string[] = [];
    const { calls, placing } = assembleCalls({
      orm: t.app.orm, pool: t.app.pool, clock: t.app.clock, config: t.config, cursors: t.app.cursors, jobs: t.app.jobs,
      gateways: { forMode: () => ({ name: 'sandbox', place: async () => ({ reference: 'r' }), hangup: async (id) => { hangups.push(id); } }), transcriber: new SandboxTranscriber() },
      numbers: { voiceNumbers: async () => [from] }, agents: () => agents,
      links: new RecordingLinks({ appSecret: t.config.appSecret, baseUrl: 'http://x', ttlSeconds: 60 }), voicemail: {} as VoicemailService,
      phi: new VoicePhi(() => undefined), trunk: async () => null,
    });
    const scope = systemScope(a.orgId, 'test', 'starter', newId('req'));
    await expect(placing.create(scope, { to: '+14155550130', from, agent_id: 'agt_unknown' })).rejects.toMatchObject({ code: 'NOT_FOUND', details: { field: 'agent_id' } });
    const call = await placing.create(scope, { to: '+14155550130', from, agent_id: 'agt_known' });
    expect(call.agentId).toBe('agt_known');
    await tenantEm(t.app.orm, scope).nativeUpdate(Call, { id: call.id }, { status: 'in_progress', answeredAt: new Date() });
    const ended = await calls.hangup(scope, call.id);
    expect(ended.status).toBe('completed');
    expect(seen).toEqual(['ending:agt_known:in_progress']);
    expect(hangups).toEqual([call.id]);
  });

  it('with the agents module installed: an unknown agent_id is 404, an agent of the tenant is accepted, another tenant\'s is not', async () => {
    const org = await t.createOrg('growth', 'Voice with agents');
    const own = await buyVoiceNumber(t, org.testKey, '719');
    expectError(await t.rest('POST', '/v1/voice/calls', { key: org.testKey, body: { to: '+14155550131', from: own, agent_id: 'agt_anything' } }), 404, 'NOT_FOUND', 'agent_id');
    const agent = await t.rest('POST', '/v1/agents', { key: org.testKey, body: { name: 'Receptionist', type: 'task', model: 'sandbox-1', system_prompt: 'Answer calls briefly.' } });
    expect(agent.status).toBe(201);
    const call = await t.rest('POST', '/v1/voice/calls', { key: org.testKey, body: { to: '+14155550132', from: own, agent_id: agent.body.data.id } });
    expect(call.status).toBe(201);
    expect(call.body.data.agent_id).toBe(agent.body.data.id);
    // Another tenant cannot put this tenant's agent on its calls.
    const other = await t.createOrg('growth', 'Other tenant');
    const otherFrom = await buyVoiceNumber(t, other.testKey, '720');
    expectError(await t.rest('POST', '/v1/voice/calls', { key: other.testKey, body: { to: '+14155550133', from: otherFrom, agent_id: agent.body.data.id } }), 404, 'NOT_FOUND', 'agent_id');
  });
});

describe('rate limits', () => {
  it('POST /v1/voice/calls allows 10 a minute on Starter, counted across REST and GraphQL', async () => {
    // The windows are whole minutes: start early in one, so all 12 requests fall in the same window.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 100));
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      statuses.push((await t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { to: `+1415555014${i}`, from } })).status);
      await new Promise((r) => setTimeout(r, 220));
    }
    // The window now holds 10 (this org's other calls are in the test above, on its own agents port).
    expect(statuses.every((s) => s === 201), statuses.join(',')).toBe(true);
    const gql = await t.gql('mutation($from: String!) { createCall(input: { to: "+14155550150", from: $from }) { id } }', { from }, { key: a.testKey });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMIT_EXCEEDED');
    const rest = await t.rest('POST', '/v1/voice/calls', { key: a.testKey, body: { to: '+14155550151', from } });
    expectError(rest, 429, 'RATE_LIMIT_EXCEEDED');
    expect(Number(rest.headers.get('retry-after'))).toBeGreaterThan(0);
  }, 60_000);
});

/** Waits, when needed, so that the next ~15 s fall in one rate-limit window (whole minutes). */
async function earlyInMinute(latestMs: number): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > latestMs) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 100));
}

/** Records the statements (text and parameters) the service sends on its raw pool until `restore()`. */
function recordStatements(): { statements: { text: string; values: unknown[] }[]; restore: () => void } {
  const pool = (t.app as unknown as { pool: { query: (...args: unknown[]) => Promise<unknown> } }).pool;
  const query = pool.query;
  const statements: { text: string; values: unknown[] }[] = [];
  pool.query = function (this: unknown, ...args: unknown[]) {
    const config = args[0] as { text?: string; values?: unknown[] } | string;
    statements.push(typeof config === 'string' ? { text: config, values: (args[1] as unknown[] | undefined) ?? [] } : { text: config.text ?? '', values: config.values ?? [] });
    return query.apply(this, args);
  };
  return { statements, restore: () => { pool.query = query; } };
}

describe('rate limits, taken with the lookups', () => {
  it("concurrent POSTs take their rate-limit slots inside the call lookups' statement, each counted once", async () => {
    const g = await t.createOrg('growth', 'Voice riders');
    const own = await buyVoiceNumber(t, g.testKey, '917');
    // The windows are whole minutes: start early in one, so every burst falls in the same window.
    await earlyInMinute(45_000);
    const { statements, restore } = recordStatements();
    try {
      let counted = 0;
      // A burst's takes ride when its lookups batch goes in the same turn (almost always): up to three bursts.
      for (let burst = 0; burst < 3; burst++) {
        statements.length = 0;
        const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => t.rest('POST', '/v1/voice/calls', { key: g.testKey, body: { to: `+1415555${String(300 + burst * 10 + i).padStart(4, '0')}`, from: own } })));
        expect(replies.map((r) => r.status)).toEqual(Array(10).fill(201));
        // Growth: 60 a minute. Each request counted once, whichever statement took its slot.
        const remaining = replies.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((x, y) => y - x);
        expect(remaining).toEqual(Array.from({ length: 10 }, (_, i) => 60 - counted - 1 - i));
        counted += 10;
        // A statement that read the voice numbers carried burst slots' takes (their buckets `b:…`).
        if (statements.some((x) => x.text.includes('from phone_numbers p') && x.values.some((v) => typeof v === 'string' && v.startsWith('{"b:')))) return;
      }
      throw new Error('no burst took its rate-limit slots in the lookups statement');
    } finally {
      restore();
    }
  }, 60_000);
});

describe('a POST written in its lookups\' statement', () => {
  it('concurrent POSTs: the calls that fit are written by the statement that reads their lookups and takes their rate-limit slots; each caller gets the answer of a request on its own (201, 422 opted out, 422 from not held, 429 over the window), only the 201s are stored, each request counted once', async () => {
    const g = await t.createOrg('growth', 'Voice gated');
    const own = await buyVoiceNumber(t, g.testKey, '919');
    const opted = '+14155550911';
    const contact = await t.rest('POST', '/v1/contacts', { key: g.testKey, body: { phone: opted } });
    expect(contact.status, contact.text).toBe(201);
    const prefs = await t.rest('PUT', `/v1/contacts/${contact.body.data.id}/preferences`, { key: g.testKey, body: { voice: 'opted_out' } });
    expect(prefs.status, prefs.text).toBe(200);
    // The window is a whole minute: start early in one (70 requests over a burst of 25 a second take ~3 s).
    await earlyInMinute(40_000);
    const { statements, restore } = recordStatements();
    const bodies = Array.from({ length: 70 }, (_, i) => ({
      to: i % 10 === 3 ? opted : `+1415555${String(7000 + i)}`,
      from: i % 10 === 7 ? '+14155550999' : own,
    }));
    let replies;
    try {
      replies = await Promise.all(bodies.map((body) => t.rest('POST', '/v1/voice/calls', { key: g.testKey, body })));
    } finally {
      restore();
    }
    // Growth: 60 a minute. The ten over it are refused whatever else was wrong with them.
    expect(replies.filter((r) => r.status === 429).map((r) => r.body.error.code)).toEqual(Array(10).fill('RATE_LIMIT_EXCEEDED'));
    const placed: string[] = [];
    for (const [i, r] of replies.entries()) {
      if (r.status === 429) continue;
      if (i % 10 === 3) expect([r.status, r.body.error?.code]).toEqual([422, 'RECIPIENT_OPTED_OUT']);
      else if (i % 10 === 7) expect([r.status, r.body.error?.code, r.body.error?.details?.field]).toEqual([422, 'VALIDATION_ERROR', 'from']);
      else {
        expect(r.status, r.text).toBe(201);
        expect(r.body.data).toMatchObject({ to: bodies[i]!.to, from: own, status: 'initiating' });
        placed.push(r.body.data.id);
      }
    }
    // Each admitted request counted once, whichever statement took its slots.
    const remaining = replies.filter((r) => r.status !== 429).map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((x, y) => y - x);
    expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => 59 - i));
    const { rows } = await t.db.query('select id from calls where organization_id = $1 order by id', [g.orgId]);
    expect(rows.map((r) => r.id)).toEqual([...placed].sort());
    const events = await t.db.query(`select count(*)::int as n from events where organization_id = $1 and type = 'call.initiated'`, [g.orgId]);
    expect(events.rows[0].n).toBe(placed.length);
    // The calls were written by the gated statement, and (a burst's takes being queued as it goes)
    // some of those statements carried burst slots' takes (their buckets `b:…`).
    const gated = statements.filter((x) => x.text.includes('insert into "calls"') && x.text.includes('from placed c'));
    expect(gated.length).toBeGreaterThan(0);
    expect(gated.some((x) => x.values.some((v) => typeof v === 'string' && v.startsWith('{"b:')))).toBe(true);
  }, 90_000);
});

describe('gateway events', () => {
  it('apply in their per-call order: an event that overtakes an earlier one waits (retried), a repeated one applies once', async () => {
    const { calls, callPlacing, callGateway } = t.app.services;
    const scope = systemScope(a.orgId, 'test', 'starter', newId('req'));
    const call = await callPlacing.create(scope, { to: '+14155550160', from });
    await expect(callGateway.apply({ callId: call.id, seq: 2, type: 'answered' })).rejects.toMatchObject({ name: 'EventTooEarly', expected: true });
    expect((await calls.get(scope, call.id)).status).toBe('initiating');
    await callGateway.apply({ callId: call.id, seq: 1, type: 'ringing' });
    await callGateway.apply({ callId: call.id, seq: 2, type: 'answered' });
    await callGateway.apply({ callId: call.id, seq: 2, type: 'answered' });
    const live = await calls.get(scope, call.id);
    expect(live.status).toBe('in_progress');
    expect(live.steps.filter((s) => s.type === 'status').map((s) => s.detail?.status)).toEqual(['initiating', 'ringing', 'in_progress']);
    const { rows } = await t.db.query('select type from events where resource_id = $1 order by sequence', [call.id]);
    expect(rows.map((r) => r.type)).toEqual(['call.initiated', 'call.ringing', 'call.answered']);
    // After the hangup, whatever is still in flight changes nothing.
    await calls.hangup(scope, call.id);
    await callGateway.apply({ callId: call.id, seq: 3, type: 'failed', sipCode: 500 });
    expect((await calls.get(scope, call.id))).toMatchObject({ status: 'completed', sipCode: null });
  });
});
