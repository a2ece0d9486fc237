/**
 * `<Dial>` on sandbox calls created through the official twilio SDK (documents built with
 * twilio.twiml.VoiceResponse): `<Number>` places a second leg (the child call, its
 * parent_call_sid the dialing call's), whose end is posted to the Dial's action with
 * DialCallStatus, DialCallSid and DialCallDuration (signed: twilio.validateRequest) and whose
 * answer goes on with the document; without an action the next verb runs; `<Conference>` puts
 * calls in one conference by name; updating a call's Twiml or Url mid-call switches its document;
 * bad `<Dial>`s end the call with Twilio's code in its steps.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import twilio from 'twilio';
import { fromSid } from '../src/twilio/sids.ts';
import type { TestApp, TestOrg } from './helpers/testApp.ts';
import { eventually } from './helpers/voice.ts';
import { formOf, restError, useTwimlRig, type TwimlRig } from './helpers/twilio.ts';

type Step = { at: string; type: string; detail?: Record<string, unknown> };
type NativeCall = { status: string; end_reason: string | null; conference_id: string | null; steps: Step[] };

describe('<Dial> on sandbox calls, through the twilio SDK', () => {
  let t: TestApp;
  let org: TestOrg;
  let from: string;
  let receiver: TwimlRig['receiver'];
  let issued: TwimlRig['issued'];
  /** The receiver's TwiML answers, by path. */
  const documents = new Map<string, { status: number; body: string }>();
  const rig = useTwimlRig('Dial org', documents);
  beforeAll(() => {
    ({ t, org, from, receiver, issued } = rig());
  });
  let seq = 0;
  const callee = () => `+1415888${String(1000 + ++seq).padStart(4, '0')}`;
  const native = async (sid: string) => {
    const r = await t.rest('GET', `/v1/voice/calls/${fromSid(sid, 'call')}`, { key: org.testKey });
    expect(r.status, r.text).toBe(200);
    return r.body.data as NativeCall;
  };
  const ended = (sid: string) => eventually(`call ${sid} ended`, async () => {
    const c = await native(sid);
    return ['completed', 'failed', 'busy', 'no_answer', 'cancelled'].includes(c.status) ? c : undefined;
  });
  const stepped = (sid: string, type: string) => eventually(`${type} on ${sid}`, async () => {
    const c = await native(sid);
    return c.steps.some((s) => s.type === type) ? c : undefined;
  });
  const twimlSteps = (steps: Step[]) => steps.filter((s) => s.type.startsWith('twiml_'));
  const hitsAt = (path: string) => receiver.hits.filter((h) => h.path === path);
  /** The requests this service made to `path`, each signature checked as a customer's handler checks it. */
  const verified = (path: string) => hitsAt(path).map((h) => {
    const { url, params, signature } = formOf(receiver.url, h);
    expect(twilio.validateRequest(issued.authToken, signature, url, params)).toBe(true);
    expect(twilio.validateRequest(issued.authToken, signature, url, { ...params, DialCallStatus: 'busy' })).toBe(false);
    return params;
  });

  it('dials a Number: the child leg is placed, its end posted to the action with DialCallStatus, and the action\'s TwiML goes on', async () => {
    const base = `/dial/${Date.now()}`;
    const after = new twilio.twiml.VoiceResponse();
    after.say('The other party hung up');
    after.hangup();
    documents.set(`${base}/done`, { status: 200, body: after.toString() });
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.say('Connecting you');
    const dialed = callee();
    twiml.dial({ action: `${receiver.url}${base}/done`, timeout: 20, callerId: from }).number(dialed);
    twiml.say('never said: the action replaced the document');

    const call = await issued.client.calls.create({ to: callee(), from, twiml });
    const dialing = await stepped(call.sid, 'twiml_dial_answered');
    const dial = dialing.steps.find((s) => s.type === 'twiml_dial')!;
    expect(dial.detail).toMatchObject({ number: dialed, caller_id: from, timeout: 20 });
    const legSid = String(dial.detail!.dial_call_sid);
    // The child call, as the SDK sees it.
    const leg = await issued.client.calls(legSid).fetch();
    expect(leg).toMatchObject({ parentCallSid: call.sid, to: dialed, from, status: 'in-progress', direction: 'outbound-dial' });
    // The dialed party hangs up.
    expect((await issued.client.calls(legSid).update({ status: 'completed' })).status).toBe('completed');

    const c = await ended(call.sid);
    expect(c).toMatchObject({ status: 'completed', end_reason: 'twiml_hangup' });
    expect(twimlSteps(c.steps).map((s) => s.type)).toEqual([
      'twiml_say', 'twiml_dial', 'twiml_dial_answered', 'twiml_dial_done', 'twiml_fetch', 'twiml_fetched', 'twiml_say', 'twiml_hangup',
    ]);
    expect(c.steps.find((s) => s.type === 'twiml_dial_done')?.detail).toMatchObject({ dial_call_status: 'completed', dial_call_sid: legSid });
    const [posted] = verified(`${base}/done`);
    expect(posted).toMatchObject({ CallSid: call.sid, AccountSid: issued.sid, DialCallStatus: 'completed', DialCallSid: legSid, CallStatus: 'in-progress' });
    expect(Number(posted!.DialCallDuration)).toBeGreaterThanOrEqual(0);
    expect((await native(legSid)).status).toBe('completed');
  });

  it('goes on with the next verb without an action: a busy number, and a leg that rings past the timeout (no-answer)', async () => {
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.dial('+15005550006');
    twiml.say('The line was busy');
    twiml.dial({ timeout: 1 }).number('+15005550007');
    twiml.say('Nobody answered');
    const call = await issued.client.calls.create({ to: callee(), from, twiml });
    const c = await ended(call.sid);
    expect(c).toMatchObject({ status: 'completed', end_reason: 'twiml_end' });
    const done = c.steps.filter((s) => s.type === 'twiml_dial_done').map((s) => s.detail?.dial_call_status);
    expect(done).toEqual(['busy', 'no-answer']);
    expect(twimlSteps(c.steps).map((s) => s.detail?.text ?? s.type)).toEqual([
      'twiml_dial', 'twiml_dial_done', 'The line was busy', 'twiml_dial', 'twiml_dial_done', 'Nobody answered', 'twiml_end',
    ]);
    const second = c.steps.filter((s) => s.type === 'twiml_dial')[1]!;
    const leg = await native(String(second.detail!.dial_call_sid));
    expect(leg).toMatchObject({ status: 'no_answer', end_reason: 'dial_timeout' });
  });

  it('hangs the leg up when the dialing call ends, and on * with hangupOnStar', async () => {
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.dial({ hangupOnStar: true }).number(callee());
    twiml.say('Back from the call');
    twiml.dial().number(callee());
    const call = await issued.client.calls.create({ to: callee(), from, twiml });
    const first = await stepped(call.sid, 'twiml_dial_answered');
    const pressed = await t.rest('POST', `/v1/sandbox/voice/calls/${fromSid(call.sid, 'call')}/dtmf`, { key: org.testKey, body: { digits: '*' } });
    expect(pressed.status, pressed.text).toBe(200);
    const second = await eventually('the second dial', async () => {
      const c = await native(call.sid);
      return c.steps.filter((s) => s.type === 'twiml_dial').length === 2 ? c : undefined;
    });
    expect(twimlSteps(second.steps).map((s) => s.detail?.text ?? s.type)).toEqual([
      'twiml_dial', 'twiml_dial_answered', 'twiml_dial_hangup_on_star', 'twiml_dial_done', 'Back from the call', 'twiml_dial',
    ]);
    const legs = [first, second].map((c) => String(c.steps.filter((s) => s.type === 'twiml_dial').at(-1)!.detail!.dial_call_sid));
    expect((await ended(legs[0]!)).status).toBe('completed');
    // The caller hangs up while the second leg is up: the leg goes with it.
    await issued.client.calls(call.sid).update({ status: 'completed' });
    const leg = await ended(legs[1]!);
    expect(leg.status === 'completed' || leg.status === 'cancelled').toBe(true);
    expect(leg.steps.find((s) => s.type === 'dial_hangup')?.detail).toEqual({ reason: 'dialing_call_ended' });
  });

  it('puts two calls in one conference by name, created on the first join', async () => {
    const name = `room-${Date.now()}`;
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.dial().conference({ muted: false }, name);
    const a = await issued.client.calls.create({ to: callee(), from, twiml });
    const b = await issued.client.calls.create({ to: callee(), from, twiml });
    const [ca, cb] = await Promise.all([stepped(a.sid, 'twiml_dial_conference'), stepped(b.sid, 'twiml_dial_conference')]);
    const joined = [ca, cb].map((c) => c.steps.find((s) => s.type === 'twiml_dial_conference')!.detail!);
    expect(joined[0]!.conference_id).toBe(joined[1]!.conference_id);
    expect(joined.map((d) => d.created).sort()).toEqual([false, true]);
    const id = String(joined[0]!.conference_id);
    const conf = await t.rest('GET', `/v1/voice/conferences/${id}`, { key: org.testKey });
    expect(conf.body.data).toMatchObject({ name, status: 'in_progress' });
    const participants = await t.rest('GET', `/v1/voice/conferences/${id}/participants`, { key: org.testKey });
    const rows = participants.body.data as { call_id: string; status: string }[];
    expect(rows.map((p) => [p.call_id, p.status]).sort()).toEqual([[fromSid(a.sid, 'call'), 'joined'], [fromSid(b.sid, 'call'), 'joined']].sort());
    expect((await native(a.sid)).conference_id).toBe(id);
    await issued.client.calls(a.sid).update({ status: 'completed' });
    await eventually('a left', async () => {
      const r = await t.rest('GET', `/v1/voice/conferences/${id}/participants`, { key: org.testKey });
      return (r.body.data as { call_id: string; status: string }[]).some((p) => p.call_id === fromSid(a.sid, 'call') && p.status === 'left') ? true : undefined;
    });
    const ended2 = await t.rest('POST', `/v1/voice/conferences/${id}/end`, { key: org.testKey });
    expect(ended2.status, ended2.text).toBe(200);
    expect((await ended(b.sid)).status).toBe('completed');
  });

  it('switches documents when a call\'s Twiml or Url is updated mid-call, interrupting the verb under way', async () => {
    const base = `/update/${Date.now()}`;
    const twiml = new twilio.twiml.VoiceResponse();
    twiml.say('First document');
    twiml.pause({ length: 120 });
    twiml.say('never said: the document was replaced');
    const call = await issued.client.calls.create({ to: callee(), from, twiml });
    await stepped(call.sid, 'twiml_pause');
    const second = new twilio.twiml.VoiceResponse();
    second.say('Second document');
    second.dial().number(callee());
    const updated = await issued.client.calls(call.sid).update({ twiml: second });
    expect(updated.status).toBe('in-progress');
    const dialing = await stepped(call.sid, 'twiml_dial_answered');
    const leg = String(dialing.steps.find((s) => s.type === 'twiml_dial')!.detail!.dial_call_sid);
    const third = new twilio.twiml.VoiceResponse();
    third.say('Third document, fetched');
    third.hangup();
    documents.set(`${base}/third`, { status: 200, body: third.toString() });
    await issued.client.calls(call.sid).update({ url: `${receiver.url}${base}/third`, method: 'POST' });
    const c = await ended(call.sid);
    expect(c.end_reason).toBe('twiml_hangup');
    expect(twimlSteps(c.steps).map((s) => s.detail?.text ?? s.type)).toEqual([
      'First document', 'twiml_pause', 'twiml_replaced', 'Second document', 'twiml_dial', 'twiml_dial_answered',
      'twiml_replaced', 'twiml_fetch', 'twiml_fetched', 'Third document, fetched', 'twiml_hangup',
    ]);
    expect(c.steps.filter((s) => s.type === 'twiml_replaced').map((s) => s.detail)).toEqual([
      { by: 'twiml', interrupted: 'pause' }, { by: 'url', url: `${receiver.url}${base}/third`, interrupted: 'dial' },
    ]);
    verified(`${base}/third`);
    // The leg of the interrupted Dial is hung up.
    expect((await ended(leg)).steps.find((s) => s.type === 'dial_hangup')?.detail).toEqual({ reason: 'redirected' });
    // An ended call is not redirected (Twilio's 21220).
    const refused = await restError(() => issued.client.calls(call.sid).update({ twiml: '<Response><Say>late</Say></Response>' }));
    expect(refused).toMatchObject({ status: 400, code: 21220 });
  });

  it('fails a Sip dial with 13224 and goes on; ends the call on a Dial with nothing to dial (13223) or a malformed noun (12200, 12100)', async () => {
    const sip = new twilio.twiml.VoiceResponse();
    sip.dial().sip('sip:alice@example.com');
    sip.say('SIP is not dialed here');
    const s = await ended((await issued.client.calls.create({ to: callee(), from, twiml: sip })).sid);
    expect(s.end_reason).toBe('twiml_end');
    expect(s.steps.find((x) => x.type === 'twiml_dial_done')?.detail).toMatchObject({ dial_call_status: 'failed', code: 13224 });
    expect(s.steps.some((x) => x.type === 'twiml_say')).toBe(true);

    for (const [bad, code] of [
      ['<Response><Dial></Dial><Say>never</Say></Response>', 13223],
      ['<Response><Dial><Number>not a number</Number></Dial></Response>', 13223],
      ['<Response><Dial><Say>hello</Say></Dial></Response>', 12200],
      ['<Response><Dial timeout="soon"><Number>+14155550100</Number></Dial></Response>', 13212],
      ['<Response><Dial><Number>+14155550100</Dial></Response>', 12100],
    ] as const) {
      const c = await ended((await issued.client.calls.create({ to: callee(), from, twiml: bad })).sid);
      expect(c.end_reason, bad).toBe('twiml_error');
      expect(c.steps.find((x) => x.type === 'twiml_error')?.detail, bad).toMatchObject({ code });
      expect(c.steps.some((x) => x.type === 'twiml_say' || x.type === 'twiml_dial'), bad).toBe(false);
    }
  });
});
