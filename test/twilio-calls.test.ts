/**
 * Calls through the official twilio SDK: create (Twiml built with twilio.twiml.VoiceResponse, or
 * Url), fetch, list with filters, end with Status=completed and canceled; Twilio's call statuses;
 * status callbacks for the StatusCallbackEvent values asked for, form-encoded and signed
 * (twilio.validateRequest); bad input answered with Twilio's codes. Sandbox gateway, workers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import twilio from 'twilio';
import { systemClock } from '../src/platform/clock.ts';
import { SANDBOX_CALL_MAGIC } from '../src/providers/voice/sandbox.ts';
import { startTestApp, type TestApp, type TestOrg, useFileApp } from './helpers/testApp.ts';
import { buyVoiceNumber, eventually, startReceiver, VOICE_ENV } from './helpers/voice.ts';
import { formOf, issuedClient, restError } from './helpers/twilio.ts';

describe('Twilio-compatible Calls through the twilio SDK', () => {
  let t: TestApp;
  let org: TestOrg;
  let from: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let issued: Awaited<ReturnType<typeof issuedClient>>;
  const app = useFileApp(async () => {
    const app = await startTestApp({ workers: true, clock: systemClock, env: VOICE_ENV });
    return { t: app, org: await app.createOrg('enterprise', 'Twilio calls org'), close: () => app.close() };
  });
  beforeAll(async () => {
    ({ t, org } = app());
    receiver = await startReceiver();
    issued = await issuedClient(t, org);
    from = await buyVoiceNumber(t, org.testKey);
  });
  afterAll(() => receiver.close());
  const hitsAt = (path: string) => receiver.hits.filter((h) => h.path === path);
  let seq = 0;
  const callee = () => `+1415666${String(1000 + ++seq).padStart(4, '0')}`;

  it('creates a call with TwiML, reports the events asked for, signed, and ends it with Status=completed', async () => {
    const { client, sid, authToken } = issued;
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.say('Hello from the SDK');
    // The TwiML runs on answer (twilio-twiml.test.ts): a long pause keeps the call up to be ended here.
    twiml.pause({ length: 120 });
    const path = `/call/${Date.now()}`;
    const to = callee();
    const call = await client.calls.create({
      to, from, twiml, statusCallback: `${receiver.url}${path}`, statusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'], record: true, timeout: 30,
    });
    expect(call.sid).toMatch(/^CA[0-9a-f]{32}$/);
    expect(call).toMatchObject({ accountSid: sid, to, from, status: 'queued', direction: 'outbound-api', apiVersion: '2010-04-01' });
    expect(call.uri).toBe(`/2010-04-01/Accounts/${sid}/Calls/${call.sid}.json`);
    const answered = await eventually('in-progress', async () => {
      const c = await client.calls(call.sid).fetch();
      return c.status === 'in-progress' ? c : undefined;
    });
    expect(answered.startTime).toBeInstanceOf(Date);
    const ended = await client.calls(call.sid).update({ status: 'completed' });
    expect(ended.status).toBe('completed');
    expect(ended.endTime).toBeInstanceOf(Date);
    const hits = await eventually('the completed callback', () => {
      const got = hitsAt(path);
      return got.some((h) => new URLSearchParams(h.body).get('CallStatus') === 'completed') ? got : undefined;
    });
    expect(hits.map((h) => new URLSearchParams(h.body).get('CallStatus'))).toEqual(['queued', 'ringing', 'in-progress', 'completed']);
    for (const h of hits) {
      const { url, params, signature } = formOf(receiver.url, h);
      expect(params).toMatchObject({ AccountSid: sid, CallSid: call.sid, To: to, From: from, Direction: 'outbound-api', ApiVersion: '2010-04-01' });
      expect(twilio.validateRequest(authToken, signature, url, params)).toBe(true);
      expect(twilio.validateRequest(authToken, signature, url, { ...params, CallStatus: 'busy' })).toBe(false);
    }
    expect(new URLSearchParams(hits.at(-1)!.body).get('CallDuration')).toMatch(/^\d+$/);
    // Ended once: a second update is refused as Twilio refuses it.
    expect(await restError(() => client.calls(call.sid).update({ status: 'completed' }))).toMatchObject({ status: 400, code: 21220 });
  });

  it('calls back only on completed by default, with the status the call ended in', async () => {
    const { client } = issued;
    const path = `/busy/${Date.now()}`;
    const call = await client.calls.create({ to: SANDBOX_CALL_MAGIC.busy, from, url: 'https://example.com/twiml', statusCallback: `${receiver.url}${path}` });
    const [hit] = await eventually('one callback', () => (hitsAt(path).length ? hitsAt(path) : undefined));
    expect(new URLSearchParams(hit!.body).get('CallStatus')).toBe('busy');
    expect((await client.calls(call.sid).fetch()).status).toBe('busy');
    await new Promise((r) => setTimeout(r, 300));
    expect(hitsAt(path)).toHaveLength(1);
  });

  it('cancels a ringing call and lists calls with filters across pages', async () => {
    const { client } = issued;
    const ringing = await client.calls.create({ to: SANDBOX_CALL_MAGIC.noAnswer, from, url: 'https://example.com/twiml' });
    await eventually('ringing', async () => ((await client.calls(ringing.sid).fetch()).status === 'ringing' ? true : undefined));
    expect((await client.calls(ringing.sid).update({ status: 'canceled' })).status).toBe('canceled');
    const to = callee();
    const sids: string[] = [];
    for (let i = 0; i < 3; i++) sids.push((await client.calls.create({ to, from, url: 'https://example.com/twiml' })).sid);
    expect((await client.calls.list({ to, pageSize: 2 })).map((c) => c.sid)).toEqual([...sids].reverse());
    expect((await client.calls.list({ status: 'canceled' })).map((c) => c.sid)).toContain(ringing.sid);
    for (const s of sids) await client.calls(s).update({ status: 'completed' }).catch(() => undefined);
  });

  it('answers bad input with Twilio\'s codes and places nothing', async () => {
    const { client, sid, authToken } = issued;
    const count = async () => Number((await t.db.query('select count(*) from calls where organization_id = $1', [org.orgId])).rows[0].count);
    const before = await count();
    expect(await restError(() => client.calls.create({ to: callee(), from } as never))).toMatchObject({ status: 400, code: 21205 });
    expect(await restError(() => client.calls.create({ to: 'nope', from, url: 'https://example.com/x' }))).toMatchObject({ status: 400, code: 21211 });
    expect(await restError(() => client.calls.create({ to: callee(), from, url: 'https://example.com/x', statusCallbackEvent: ['exploded'] }))).toMatchObject({ status: 400, code: 20001 });
    const auth = { Authorization: `Basic ${Buffer.from(`${sid}:${authToken}`).toString('base64')}` };
    const url = `${t.baseUrl}/2010-04-01/Accounts/${sid}/Calls.json`;
    const json = await fetch(url, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ To: callee(), From: from, Url: 'https://example.com/x' }) });
    expect(await json.json()).toMatchObject({ status: 400, code: 20001 });
    const unknown = await fetch(url, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ To: callee(), From: from, Url: 'https://example.com/x', MachineDetection: 'Enable' }).toString() });
    expect(await unknown.json()).toMatchObject({ status: 400, code: 20001, message: 'Unknown parameter: MachineDetection' });
    const wrong = twilio(sid, `svc_test_sk_${'y'.repeat(40)}`, { httpClient: issued.httpClient });
    expect(await restError(() => wrong.calls.list({ limit: 1 }))).toMatchObject({ status: 401, code: 20003 });
    expect(await count()).toBe(before);
  });

  it('answers another account\'s call SID with 404', async () => {
    const other = await t.createOrg('enterprise', 'Other calls org');
    const theirs = (await issuedClient(t, other)).client;
    const theirFrom = await buyVoiceNumber(t, other.testKey, '917');
    const call = await theirs.calls.create({ to: callee(), from: theirFrom, twiml: '<Response><Pause length="120"/></Response>' });
    const { client } = issued;
    expect(await restError(() => client.calls(call.sid).fetch())).toMatchObject({ status: 404, code: 20404 });
    expect(await restError(() => client.calls(call.sid).update({ status: 'completed' }))).toMatchObject({ status: 404, code: 20404 });
    expect((await theirs.calls(call.sid).update({ status: 'completed' })).status).toMatch(/completed|canceled/);
  });
});
