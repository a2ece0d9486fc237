/**
 * Live calls carry audio: the SIP gateway with the media port (providers/voice/media), driven
 * through the public API against real far ends. baresip answers a live call on the trunk, plays a
 * tone as its microphone and records what it hears: the IVR's greeting and menu are spoken to it
 * (checked by correlating what it heard with the rendered speech), its RFC 4733 key drives the
 * IVR, and the call's recording (record: true) holds its tone. A scripted UA (no RTP at all)
 * answers for the codec mismatch and the silent far end.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { EspeakTts } from '../src/providers/voice/media/tts.ts';
import { decodeWav, encodeWav } from '../src/providers/voice/media/wav.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, eventually, pressAfterPrompt } from './helpers/voice.ts';
import { startScriptedUa } from './helpers/sip.ts';
import { liveMediaEnv, startMediaBaresip, type MediaBaresip } from './helpers/media-sip.ts';
import { bestCorrelation, dominant, goertzel, rms, tone } from './helpers/audio.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'voice-live-media-'));
const mediaDir = path.join(dir, 'media');
const FAR_HZ = 1000;
const farSource = path.join(dir, 'far.wav');
const GREETING = 'Welcome to the live test line.';
const MENU = 'Press one for sales. Press two for support.';

let t: TestApp;
let ua: Awaited<ReturnType<typeof startScriptedUa>>;
const baresips: MediaBaresip[] = [];

beforeAll(async () => {
  writeFileSync(farSource, encodeWav(tone(FAR_HZ, 40, 6000)));
  ua = await startScriptedUa({ username: 'u', password: 'p' });
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: liveMediaEnv(mediaDir, { VOICE_MEDIA_INACTIVITY_SECONDS: '3' }),
  });
}, 60_000);
afterAll(async () => {
  await t?.close();
  for (const b of baresips) await b.close();
  ua?.close();
});

async function orgWithTrunk(name: string, trunk: Record<string, unknown>): Promise<{ org: TestOrg; from: string }> {
  const org = await t.createOrg('enterprise', name);
  // A sandbox number moved into live mode, as a number brought to the trunk would be (voice-sip.test.ts).
  const from = await buyVoiceNumber(t, org.testKey);
  await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [org.orgId, from]);
  const r = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name, encryption: 'none', ...trunk } });
  expect(r.status, r.text).toBe(201);
  return { org, from };
}

async function placeOk(o: { org: TestOrg; from: string }, body: Record<string, unknown>): Promise<any> {
  const r = await t.rest('POST', '/v1/voice/calls', { key: o.org.liveKey, body: { from: o.from, ...body } });
  expect(r.status, r.text).toBe(201);
  return r.body.data;
}

const stepsOf = async (id: string): Promise<{ at: string; type: string; detail?: any }[]> => (await t.db.query('select steps from calls where id = $1', [id])).rows[0].steps;

describe('live calls carry media', () => {
  it('baresip answers: the IVR greeting and menu are spoken to it, its RFC 4733 key 2 takes option 2, and the call is recorded', async () => {
    const baresip = await startMediaBaresip({ user: '+14155550123', source: farSource });
    baresips.push(baresip);
    const o = await orgWithTrunk('baresip trunk', { termination_uri: `sip:127.0.0.1:${baresip.port}` });
    const ivr = await t.rest('POST', '/v1/voice/ivr', {
      key: o.org.liveKey,
      body: { name: 'Live menu', greeting: GREETING, timeout_seconds: 30, menu: { prompt: MENU, options: [{ key: '1', action: 'hangup' }, { key: '2', action: 'transfer_number', target: '+14155550199' }] } },
    });
    expect(ivr.status, ivr.text).toBe(201);
    const call = await placeOk(o, { to: '+14155550123', ivr_id: ivr.body.data.id, record: true });
    await callReaches(t, o.org.liveKey, call.id, 'in_progress', 20_000);
    const steps = await pressAfterPrompt(t, call.id, (key) => baresip.type(key), '2', 'ivr_transfer_number');
    expect(steps.find((s) => s.type === 'ivr_transfer_number')!.detail).toEqual({ number: '+14155550199' });
    await new Promise((r) => setTimeout(r, 1500));
    const hung = await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: o.org.liveKey });
    // Option 2 transfers the call: its second leg goes out on the same trunk (this baresip, already
    // in a call), whose answer may have ended the call first (a transfer end reason).
    if (hung.status !== 200) {
      expect(hung.body.error.code, hung.text).toBe('CALL_ALREADY_ENDED');
      expect((await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: o.org.liveKey })).body.data.end_reason).toMatch(/^transfer_(failed|ended)$/);
    }
    await baresip.close();

    // What baresip heard holds the spoken greeting (the rendered speech, through G.711).
    const tts = new EspeakTts({ cacheDir: path.join(mediaDir, 'tts') });
    const heard = decodeWav(readFileSync(baresip.heard()));
    expect(rms(heard)).toBeGreaterThan(300);
    expect(bestCorrelation(heard, decodeWav(readFileSync(tts.cacheFile({ text: GREETING, language: 'en-US' }))))).toBeGreaterThan(0.8);
    expect(bestCorrelation(heard, decodeWav(readFileSync(tts.cacheFile({ text: MENU, language: 'en-US' }))))).toBeGreaterThan(0.8);

    // The recording: served through the signed recording_url, its duration that of the call, holding baresip's tone.
    const done = await eventually('the recording', async () => {
      const r = await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: o.org.liveKey });
      return r.body.data.recording_url && r.body.data.status === 'completed' ? r.body.data : undefined;
    });
    const link = new URL(done.recording_url);
    // Once more when a pooled keep-alive connection that idled through the checks above (the
    // server closes them after 5 s) is reset as it is reused.
    const get = () => fetch(`${t.baseUrl}${link.pathname}${link.search}`, { headers: { 'X-API-Key': o.org.liveKey } });
    const got = await get().catch((e: Error & { cause?: { code?: string } }) => { if (e.cause?.code === 'ECONNRESET') return get(); throw e; });
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toMatch(/audio\/wav/);
    const wav = Buffer.from(await got.arrayBuffer());
    const recorded = decodeWav(wav);
    const seconds = Number(got.headers.get('x-recording-duration'));
    expect(Math.abs(seconds - recorded.length / 8000)).toBeLessThan(0.05);
    expect(Math.abs(seconds - done.duration_seconds)).toBeLessThanOrEqual(1.5);
    expect(goertzel(recorded, FAR_HZ)).toBeGreaterThan(0.05);
    const row = (await t.db.query('select recording_seconds from calls where id = $1', [call.id])).rows[0];
    expect(Math.abs(row.recording_seconds - seconds)).toBeLessThanOrEqual(0.5);
    // The mono mix holds both sides: the tone dominates where it is loudest against the speech band's 440 Hz.
    expect(dominant(recorded, [FAR_HZ, 1700]).hz).toBe(FAR_HZ);
  }, 90_000);

  it('no key: the wait (timeout_seconds) starts once the menu was spoken, the menu is spoken again up to max_retries, then the fallback (hangup) ends the call at the far end', async () => {
    const baresip = await startMediaBaresip({ user: '+14155550127', source: farSource });
    baresips.push(baresip);
    const o = await orgWithTrunk('baresip trunk (timeouts)', { termination_uri: `sip:127.0.0.1:${baresip.port}` });
    const ivr = await t.rest('POST', '/v1/voice/ivr', {
      key: o.org.liveKey,
      body: { name: 'Quiet menu', greeting: 'Hello.', timeout_seconds: 1, max_retries: 1, fallback_action: 'hangup', menu: { prompt: 'Press one.', options: [{ key: '1', action: 'hangup' }] } },
    });
    expect(ivr.status, ivr.text).toBe(201);
    const call = await placeOk(o, { to: '+14155550127', ivr_id: ivr.body.data.id });
    const done = await callReaches(t, o.org.liveKey, call.id, 'completed', 40_000);
    expect(done.end_reason).toBe('ivr');
    const steps = await stepsOf(call.id);
    expect(steps.map((s) => s.type).filter((x) => x.startsWith('ivr_'))).toEqual([
      'ivr_greeting', 'ivr_menu', 'ivr_prompt_played', 'ivr_timeout', 'ivr_menu_replayed', 'ivr_prompt_played', 'ivr_timeout', 'ivr_fallback', 'ivr_hangup',
    ]);
    // Each wait began when its prompt had been spoken: a timeout comes timeout_seconds after it, not after the menu step.
    const at = (type: string, nth = 0) => Date.parse(steps.filter((s) => s.type === type)[nth]!.at);
    expect(at('ivr_prompt_played') - at('ivr_menu')).toBeGreaterThan(500);
    expect(at('ivr_timeout') - at('ivr_prompt_played')).toBeGreaterThanOrEqual(900);
    expect(at('ivr_timeout', 1) - at('ivr_prompt_played', 1)).toBeGreaterThanOrEqual(900);
    // The IVR's hangup sent the BYE: baresip's call ended.
    await eventually('baresip to hang up', () => (/BYE sip:\+14155550127[\s\S]*terminated \(duration/.test(baresip.log()) ? true : undefined), 15_000);
  }, 90_000);

  it('a codec mismatch fails the call with MEDIA_CODEC_MISMATCH: at placement (no codec we speak), or on the answer (the far end answers one we did not offer)', async () => {
    const none = await orgWithTrunk('G.729 trunk', { termination_uri: `sip:127.0.0.1:${ua.port}`, codecs: ['G729'] });
    const a = await placeOk(none, { to: '+14155550124' });
    const failedA = await callReaches(t, none.org.liveKey, a.id, 'failed', 15_000);
    expect(failedA.error_code).toBe('MEDIA_CODEC_MISMATCH');
    expect(ua.requests.some((r) => r.method === 'INVITE' && r.text.includes(`Call-ID: ${a.id}`))).toBe(false);

    // The scripted UA answers PCMU whatever it is offered; this trunk offers PCMA only.
    const pcma = await orgWithTrunk('A-law trunk', { termination_uri: `sip:127.0.0.1:${ua.port}`, codecs: ['PCMA'] });
    const b = await placeOk(pcma, { to: '+14155550125' });
    const failedB = await callReaches(t, pcma.org.liveKey, b.id, 'failed', 15_000);
    expect(failedB.error_code).toBe('MEDIA_CODEC_MISMATCH');
    expect(failedB.end_reason).toBe('gateway');
    expect((await stepsOf(b.id)).find((s) => s.type === 'media_error')!.detail.message).toMatch(/PCMU|codec/i);
    // It was answered, so it is hung up at the far end.
    await eventually('the BYE', () => (ua.requests.some((r) => r.method === 'BYE' && r.text.includes(`Call-ID: ${b.id}`)) ? true : undefined), 10_000);
  }, 60_000);

  it('a far end that sends no RTP is hung up after VOICE_MEDIA_INACTIVITY_SECONDS: completed, end_reason media_timeout', async () => {
    const o = await orgWithTrunk('Silent trunk', { termination_uri: `sip:127.0.0.1:${ua.port}` });
    const call = await placeOk(o, { to: '+14155550126', record: true });
    await callReaches(t, o.org.liveKey, call.id, 'in_progress', 15_000);
    const done = await callReaches(t, o.org.liveKey, call.id, 'completed', 20_000);
    expect(done.end_reason).toBe('media_timeout');
    expect(done.duration_seconds).toBeGreaterThanOrEqual(2);
    expect((await stepsOf(call.id)).map((s) => s.type)).toContain('media_timeout');
    // Its recording holds the seconds it lasted (silence from the far end), reported once the media closed.
    const seconds = await eventually('the recorded length', async () => (await t.db.query('select recording_seconds from calls where id = $1', [call.id])).rows[0].recording_seconds ?? undefined);
    expect(Math.abs(seconds - 3)).toBeLessThanOrEqual(1);
    await eventually('the BYE', () => (ua.requests.some((r) => r.method === 'BYE' && r.text.includes(`Call-ID: ${call.id}`)) ? true : undefined), 10_000);
  }, 60_000);
});
