/**
 * Voice TwiML run on sandbox calls created through the official twilio SDK, documents built with
 * twilio.twiml.VoiceResponse: Say, Play, Pause, Hangup, Reject as steps on the call (the native
 * REST API's steps); Gather collecting keys pressed through the sandbox DTMF route, its action
 * posted signed (twilio.validateRequest) with Digits and its answer run; a Url fetched signed;
 * Redirect; Record (a sandbox recording served by its signed RecordingUrl, the action and the
 * recording status callback posted signed); malformed TwiML (12100) and a failed fetch (11200)
 * ending the call with the reason in its steps.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import twilio from 'twilio';
import { fromSid } from '../src/twilio/sids.ts';
import type { TestApp, TestOrg } from './helpers/testApp.ts';
import { eventually } from './helpers/voice.ts';
import { formOf, useTwimlRig, type TwimlRig } from './helpers/twilio.ts';

type Step = { at: string; type: string; detail?: Record<string, unknown> };

describe('TwiML on sandbox calls, through the twilio SDK', () => {
  let t: TestApp;
  let org: TestOrg;
  let from: string;
  let receiver: TwimlRig['receiver'];
  let issued: TwimlRig['issued'];
  /** The receiver's TwiML answers, by path. */
  const documents = new Map<string, { status: number; body: string }>();
  const rig = useTwimlRig('TwiML org', documents);
  beforeAll(() => {
    ({ t, org, from, receiver, issued } = rig());
  });
  let seq = 0;
  const callee = () => `+1415777${String(1000 + ++seq).padStart(4, '0')}`;
  const native = async (sid: string) => {
    const r = await t.rest('GET', `/v1/voice/calls/${fromSid(sid, 'call')}`, { key: org.testKey });
    expect(r.status, r.text).toBe(200);
    return r.body.data as { status: string; end_reason: string | null; steps: Step[] };
  };
  const ended = (sid: string) => eventually(`call ${sid} ended`, async () => {
    const c = await native(sid);
    return ['completed', 'failed'].includes(c.status) ? c : undefined;
  });
  const twimlSteps = (steps: Step[]) => steps.filter((s) => s.type.startsWith('twiml_'));
  const hitsAt = (path: string) => receiver.hits.filter((h) => h.path === path);
  /** Every request this service made to `path` carries a signature twilio.validateRequest accepts. */
  const verified = (path: string) => {
    const hits = hitsAt(path);
    expect(hits.length).toBeGreaterThan(0);
    return hits.map((h) => {
      const { url, params, signature } = formOf(receiver.url, h);
      expect(h.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
      expect(twilio.validateRequest(issued.authToken, signature, url, params)).toBe(true);
      expect(twilio.validateRequest(issued.authToken, signature, url, { ...params, Digits: '999' })).toBe(false);
      return params;
    });
  };

  it('runs Say, Play, Pause and Hangup in order on answer, the pause taking its time', async () => {
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.say({ voice: 'alice', language: 'en-US' }, 'Welcome to the sandbox');
    twiml.play({ loop: 2 }, 'https://example.com/tone.mp3');
    twiml.pause({ length: 1 });
    twiml.say('Goodbye');
    twiml.hangup();
    twiml.say('never said');
    const call = await issued.client.calls.create({ to: callee(), from, twiml });
    const c = await ended(call.sid);
    expect(c).toMatchObject({ status: 'completed', end_reason: 'twiml_hangup' });
    const steps = twimlSteps(c.steps);
    expect(steps.map((s) => [s.type, s.detail])).toEqual([
      ['twiml_say', { text: 'Welcome to the sandbox', voice: 'alice', language: 'en-US', loop: 1 }],
      ['twiml_play', { url: 'https://example.com/tone.mp3', loop: 2 }],
      ['twiml_pause', { length: 1 }],
      ['twiml_say', { text: 'Goodbye', loop: 1 }],
      ['twiml_hangup', undefined],
    ]);
    expect(Date.parse(steps[3]!.at) - Date.parse(steps[2]!.at)).toBeGreaterThanOrEqual(900);
    expect((await issued.client.calls(call.sid).fetch()).status).toBe('completed');
  });

  it('hangs up at the end of the document, and on Reject with its reason', async () => {
    const said = await issued.client.calls.create({ to: callee(), from, twiml: new twilio.twiml.VoiceResponse().say('Only this') as never });
    expect(await ended(said.sid)).toMatchObject({ status: 'completed', end_reason: 'twiml_end' });
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.reject({ reason: 'busy' });
    const rejected = await issued.client.calls.create({ to: callee(), from, twiml });
    const c = await ended(rejected.sid);
    expect(c).toMatchObject({ status: 'completed', end_reason: 'twiml_reject' });
    expect(twimlSteps(c.steps).map((s) => [s.type, s.detail])).toEqual([['twiml_reject', { reason: 'busy' }]]);
  });

  it('ends a call whose TwiML does not parse, its steps saying why (12100)', async () => {
    for (const bad of ['<Response><Say>unclosed</Response>', '<Speak>not TwiML</Speak>']) {
      const call = await issued.client.calls.create({ to: callee(), from, twiml: bad });
      const c = await ended(call.sid);
      expect(c.end_reason).toBe('twiml_error');
      const error = c.steps.find((s) => s.type === 'twiml_error');
      expect(error?.detail).toMatchObject({ code: 12100 });
      expect(String(error?.detail?.message)).toMatch(/^Document parse failure/);
    }
  });

  it('drives a gather IVR end to end: Url fetched, keys through the sandbox route, the action answered with Say and Hangup', async () => {
    const base = `/ivr/${Date.now()}`;
    const menu = new twilio.twiml.VoiceResponse();
    const gather = menu.gather({ input: ['dtmf'], numDigits: 3, finishOnKey: '#', timeout: 30, action: `${base}/choice` });
    gather.say('Enter your account number, then the pound key');
    menu.say('We did not get that');
    const choice = new twilio.twiml.VoiceResponse();
    choice.say('Thank you, account forty-two');
    choice.hangup();
    documents.set(`${base}/menu`, { status: 200, body: menu.toString() });
    documents.set(`${base}/choice`, { status: 200, body: choice.toString() });

    const call = await issued.client.calls.create({ to: callee(), from, url: `${receiver.url}${base}/menu` });
    await eventually('the gather', async () => ((await native(call.sid)).steps.some((s) => s.type === 'twiml_gather') ? true : undefined));
    const id = fromSid(call.sid, 'call');
    for (const digits of ['4', '2#']) {
      const pressed = await t.rest('POST', `/v1/sandbox/voice/calls/${id}/dtmf`, { key: org.testKey, body: { digits } });
      expect(pressed.status, pressed.text).toBe(200);
    }
    const c = await ended(call.sid);
    expect(c).toMatchObject({ status: 'completed', end_reason: 'twiml_hangup' });
    expect(twimlSteps(c.steps).map((s) => s.type)).toEqual([
      'twiml_fetch', 'twiml_fetched', 'twiml_gather', 'twiml_say', 'twiml_gather_done', 'twiml_fetch', 'twiml_fetched', 'twiml_say', 'twiml_hangup',
    ]);
    expect(c.steps.find((s) => s.type === 'twiml_gather_done')?.detail).toEqual({ digits: '42', reason: 'finish_on_key' });
    expect(c.steps.filter((s) => s.type === 'dtmf').map((s) => s.detail?.key)).toEqual(['4', '2', '#']);

    const [first] = verified(`${base}/menu`);
    expect(first).toMatchObject({ AccountSid: issued.sid, CallSid: call.sid, CallStatus: 'in-progress', Direction: 'outbound-api', From: from, ApiVersion: '2010-04-01' });
    expect(first).not.toHaveProperty('Digits');
    const [action] = verified(`${base}/choice`);
    expect(action).toMatchObject({ CallSid: call.sid, Digits: '42', FinishedOnKey: '#' });
  });

  it('goes on to the next verb when a gather times out, or collects its digits without an action', async () => {
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.gather({ numDigits: 1, timeout: 1 }).say('Press a key');
    twiml.say('No key pressed');
    twiml.gather({ numDigits: 2, timeout: 30 });
    twiml.say('Two keys pressed');
    const call = await issued.client.calls.create({ to: callee(), from, twiml });
    const id = fromSid(call.sid, 'call');
    await eventually('the second gather', async () => ((await native(call.sid)).steps.filter((s) => s.type === 'twiml_gather').length === 2 ? true : undefined));
    const pressed = await t.rest('POST', `/v1/sandbox/voice/calls/${id}/dtmf`, { key: org.testKey, body: { digits: '77' } });
    expect(pressed.status, pressed.text).toBe(200);
    const c = await ended(call.sid);
    expect(twimlSteps(c.steps).map((s) => [s.type, s.detail?.text ?? s.detail?.digits ?? null])).toEqual([
      ['twiml_gather', null], ['twiml_say', 'Press a key'], ['twiml_gather_done', ''], ['twiml_say', 'No key pressed'],
      ['twiml_gather', null], ['twiml_gather_done', '77'], ['twiml_say', 'Two keys pressed'], ['twiml_end', null],
    ]);
    expect(c.steps.find((s) => s.type === 'twiml_gather_done')?.detail).toEqual({ digits: '', reason: 'timeout' });
  });

  it('follows Redirect to a fetched document, and ends the call with 11200 when a fetch fails', async () => {
    const base = `/redirect/${Date.now()}`;
    documents.set(`${base}/next`, { status: 200, body: new twilio.twiml.VoiceResponse().say('Redirected').toString() });
    documents.set(`${base}/broken`, { status: 500, body: 'boom' });
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.redirect(`${receiver.url}${base}/next`);
    twiml.say('never said');
    const call = await issued.client.calls.create({ to: callee(), from, twiml });
    const c = await ended(call.sid);
    expect(twimlSteps(c.steps).map((s) => s.type)).toEqual(['twiml_redirect', 'twiml_fetch', 'twiml_fetched', 'twiml_say', 'twiml_end']);
    expect(verified(`${base}/next`)[0]).toMatchObject({ CallSid: call.sid });

    const broken = await issued.client.calls.create({ to: callee(), from, url: `${receiver.url}${base}/broken` });
    const b = await ended(broken.sid);
    expect(b.end_reason).toBe('twiml_error');
    expect(b.steps.find((s) => s.type === 'twiml_error')?.detail).toMatchObject({ code: 11200, url: `${receiver.url}${base}/broken` });
    verified(`${base}/broken`);
  });

  it('drives a gather-and-record IVR: Record until the key, its action and status callback signed, the recording served', async () => {
    const base = `/record/${Date.now()}`;
    const menu = new twilio.twiml.VoiceResponse();
    menu.gather({ numDigits: 1, timeout: 30, action: `${base}/choice` }).say('Press 1 to leave a message');
    const choice = new twilio.twiml.VoiceResponse();
    choice.say('Leave a message after the tone, then press pound');
    choice.record({ maxLength: 30, finishOnKey: '#', action: `${base}/recorded`, recordingStatusCallback: `${base}/status` });
    choice.say('never said: the action answers');
    const done = new twilio.twiml.VoiceResponse();
    done.say('Thank you');
    done.hangup();
    documents.set(`${base}/menu`, { status: 200, body: menu.toString() });
    documents.set(`${base}/choice`, { status: 200, body: choice.toString() });
    documents.set(`${base}/recorded`, { status: 200, body: done.toString() });

    const call = await issued.client.calls.create({ to: callee(), from, url: `${receiver.url}${base}/menu` });
    const id = fromSid(call.sid, 'call');
    const press = async (digits: string) => {
      const r = await t.rest('POST', `/v1/sandbox/voice/calls/${id}/dtmf`, { key: org.testKey, body: { digits } });
      expect(r.status, r.text).toBe(200);
    };
    await eventually('the gather', async () => ((await native(call.sid)).steps.some((s) => s.type === 'twiml_gather') ? true : undefined));
    await press('1');
    await eventually('the recording', async () => ((await native(call.sid)).steps.some((s) => s.type === 'twiml_record') ? true : undefined));
    await new Promise((r) => setTimeout(r, 1100));
    // A key not in finishOnKey goes on recording.
    await press('5#');
    const c = await ended(call.sid);
    expect(c).toMatchObject({ status: 'completed', end_reason: 'twiml_hangup' });
    expect(twimlSteps(c.steps).map((s) => s.type)).toEqual([
      'twiml_fetch', 'twiml_fetched', 'twiml_gather', 'twiml_say', 'twiml_gather_done', 'twiml_fetch', 'twiml_fetched',
      'twiml_say', 'twiml_record', 'twiml_recorded', 'twiml_fetch', 'twiml_fetched', 'twiml_say', 'twiml_hangup',
    ]);
    const [action] = verified(`${base}/recorded`);
    expect(action).toMatchObject({ CallSid: call.sid, Digits: '#', RecordingSid: expect.stringMatching(/^RE[0-9a-f]{32}$/) });
    expect(Number(action!.RecordingDuration)).toBeGreaterThanOrEqual(1);
    const status = await eventually('the recording status callback', () => (hitsAt(`${base}/status`).length ? verified(`${base}/status`)[0] : undefined));
    expect(status).toMatchObject({ RecordingStatus: 'completed', RecordingSid: action!.RecordingSid, RecordingUrl: action!.RecordingUrl, RecordingDuration: action!.RecordingDuration, RecordingSource: 'RecordVerb' });
    const link = new URL(action!.RecordingUrl!);
    const audio = await fetch(`${t.baseUrl}${link.pathname}${link.search}`, { headers: { 'X-API-Key': org.testKey } });
    expect(audio.status).toBe(200);
    expect(audio.headers.get('content-type')).toBe('audio/wav');
    expect(Buffer.from(await audio.arrayBuffer()).readUInt32LE(40)).toBeGreaterThan(7000 * Number(action!.RecordingDuration));
    // The link names this call's recording: another number on it is not a recording.
    expect((await t.rest('GET', `${link.pathname.replace(/twrec_1_/, 'twrec_2_')}${link.search}`, { key: org.testKey })).status).toBe(404);
  });

  it('ends a recording at maxLength and, without an action, goes on to the next verb', async () => {
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.record({ maxLength: 1 });
    twiml.say('After the recording');
    const call = await issued.client.calls.create({ to: callee(), from, twiml });
    const c = await ended(call.sid);
    expect(twimlSteps(c.steps).map((s) => s.type)).toEqual(['twiml_record', 'twiml_recorded', 'twiml_say', 'twiml_end']);
    expect(c.steps.find((s) => s.type === 'twiml_recorded')?.detail).toMatchObject({ duration: 1, reason: 'max_length' });
  });
});
