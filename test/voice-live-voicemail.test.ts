/**
 * Live voicemail: baresip calls a number whose voice_route is a voicemail box, through the
 * service's SIP listener from an address the trunk's origination_uris name. It hears the greeting
 * and the beep, then plays a sentence rendered by espeak-ng now; the recording ends on silence,
 * becomes the box's message (recording_url: the caller's voice, its duration the sentence's within
 * 0.5 s), and pocketsphinx's transcription holds the sentence's key words. `#` (RFC 4733) ends a
 * recording early though the caller still makes sound.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { EspeakTts } from '../src/providers/voice/media/tts.ts';
import { decodeWav } from '../src/providers/voice/media/wav.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, callSteps, eventually } from './helpers/voice.ts';
import { baresipCallsIn, liveMediaEnv, type MediaBaresip } from './helpers/media-sip.ts';
import { concat, goertzel, rms, silence, tone } from './helpers/audio.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'voice-live-voicemail-'));
const mediaDir = path.join(dir, 'media');
const SENTENCE = 'Hello, please call me back tomorrow morning.';
const KEY_WORDS = ['tomorrow', 'morning', 'call', 'back'];
/** Silence before the caller speaks: longer than the greeting and the beep on a loaded machine. */
const LEAD_SECONDS = 8;

let t: TestApp;
let sip: { host: string; udpPort: number };
const baresips: MediaBaresip[] = [];

beforeAll(async () => {
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: liveMediaEnv(mediaDir, { VOICE_VOICEMAIL_SILENCE_MS: '2500' }),
  });
  sip = await t.app.services.sipGateway.listen();
}, 60_000);
afterAll(async () => {
  await t?.close();
  for (const b of baresips) await b.close();
});


/** An organization with a live trunk from 127.0.0.1, a live number routed to a new voicemail box. */
async function voicemailNumber(name: string, box: Record<string, unknown>): Promise<{ org: TestOrg; number: string; boxId: string }> {
  const org = await t.createOrg('enterprise', name);
  const number = await buyVoiceNumber(t, org.testKey);
  await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [org.orgId, number]);
  const numberId = (await t.db.query('select id from phone_numbers where number = $1', [number])).rows[0].id as string;
  const trunk = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name, encryption: 'none', termination_uri: 'sip:127.0.0.1:5999', origination_uris: ['sip:127.0.0.1'] } });
  expect(trunk.status, trunk.text).toBe(201);
  const created = await t.rest('POST', '/v1/voice/voicemail', { key: org.liveKey, body: { name, ...box } });
  expect(created.status, created.text).toBe(201);
  const routed = await t.rest('PATCH', `/v1/numbers/${numberId}`, { key: org.liveKey, body: { voice_route: { type: 'voicemail', voicemail_id: created.body.data.id } } });
  expect(routed.status, routed.text).toBe(200);
  return { org, number, boxId: created.body.data.id };
}

/** baresip (its microphone `source`) calls the number; the inbound call once stored. */
async function callIn(number: string, org: TestOrg, source: Int16Array): Promise<{ baresip: MediaBaresip; call: any }> {
  const called = await baresipCallsIn({ t, org, sipPort: sip.udpPort, dir, user: '+14155550188', number, source });
  baresips.push(called.baresip);
  return called;
}

/** The box's one message once it is announced (transcribed, for a box that transcribes). */
async function message(org: TestOrg, boxId: string, callId: string): Promise<any> {
  await eventually('voicemail.received', async () => ((await t.db.query(`select 1 from events where type = 'voicemail.received' and data->>'call_id' = $1`, [callId])).rows.length ? true : undefined), 90_000);
  const r = await t.rest('GET', `/v1/voice/voicemail/${boxId}/messages`, { key: org.liveKey });
  expect(r.status, r.text).toBe(200);
  expect(r.body.data).toHaveLength(1);
  return r.body.data[0];
}

async function recording(org: TestOrg, url: string): Promise<{ seconds: number; samples: Int16Array }> {
  const link = new URL(url);
  const get = () => fetch(`${t.baseUrl}${link.pathname}${link.search}`, { headers: { 'X-API-Key': org.liveKey } });
  const got = await get().catch((e: Error & { cause?: { code?: string } }) => { if (e.cause?.code === 'ECONNRESET') return get(); throw e; });
  expect(got.status).toBe(200);
  expect(got.headers.get('content-type')).toMatch(/audio\/wav/);
  return { seconds: Number(got.headers.get('x-recording-duration')), samples: decodeWav(Buffer.from(await got.arrayBuffer())) };
}

describe('live voicemail', () => {
  it('an inbound call to a voicemail number: greeting, beep, the caller recorded until silence; the message holds its voice and its words', async () => {
    const o = await voicemailNumber('voicemail trunk', { greeting: 'Leave a message.', transcribe: true, max_duration: 60 });
    const tts = new EspeakTts({ cacheDir: path.join(dir, 'caller-tts'), wordsPerMinute: 150 });
    const spoken = decodeWav(readFileSync(await tts.render({ text: SENTENCE })));
    const { baresip, call } = await callIn(o.number, o.org, concat(silence(LEAD_SECONDS), spoken, silence(20)));
    expect(call).toMatchObject({ direction: 'inbound', to: o.number, from: '+14155550188' });

    // The caller stopped speaking: the service hangs up once the silence lasted, and the call says why.
    const done = await callReaches(t, o.org.liveKey, call.id, 'completed', 60_000).catch((e: Error) => { throw new Error(`${e.message}; baresip said: ${baresip.log()}`); });
    expect(done.end_reason).toBe('voicemail');
    const steps = await callSteps(t, call.id);
    expect(steps.find((s) => s.type === 'voicemail_recording')!.detail).toMatchObject({ voicemail_id: o.boxId, max_duration: 60 });
    expect(steps.find((s) => s.type === 'voicemail')!.detail).toEqual({ ended_by: 'silence' });

    const m = await message(o.org, o.boxId, call.id);
    expect(m).toMatchObject({ voicemail_id: o.boxId, call_id: call.id, caller: '+14155550188', listened: false });
    // The recording is the caller's voice: the sentence's length within 0.5 s (the silence around it cut).
    const rec = await recording(o.org, m.recording_url);
    const sentenceSeconds = spoken.length / 8000;
    expect(Math.abs(rec.seconds - sentenceSeconds), `recorded ${rec.seconds} s, the sentence is ${sentenceSeconds} s`).toBeLessThanOrEqual(0.5);
    expect(Math.abs(m.duration_seconds - rec.seconds)).toBeLessThanOrEqual(0.5);
    expect(rms(rec.samples)).toBeGreaterThan(300);
    // pocketsphinx heard the sentence's words.
    const words = String(m.transcription).toLowerCase();
    expect(KEY_WORDS.filter((w) => words.includes(w)), `transcription: ${m.transcription}`).not.toEqual([]);
    const box = await t.rest('GET', `/v1/voice/voicemail/${o.boxId}`, { key: o.org.liveKey });
    expect(box.body.data.messages_count).toBe(1);
  }, 180_000);

  it('# (RFC 4733) ends the recording though the caller still makes sound', async () => {
    const o = await voicemailNumber('voicemail key trunk', { greeting: 'Leave a message.', transcribe: false, max_duration: 120 });
    // A steady tone from the caller, long past the point where # is pressed: only the key ends the recording.
    const { baresip, call } = await callIn(o.number, o.org, concat(silence(LEAD_SECONDS), tone(600, 90, 6000)));
    await callReaches(t, o.org.liveKey, call.id, 'in_progress', 30_000);
    // Well into the tone (the greeting and beep are over; no assertion rests on this wait).
    await new Promise((r) => setTimeout(r, (LEAD_SECONDS + 6) * 1000));
    baresip.type('#');
    const done = await callReaches(t, o.org.liveKey, call.id, 'completed', 60_000);
    expect(done.end_reason).toBe('voicemail');
    expect((await callSteps(t, call.id)).find((s) => s.type === 'voicemail')!.detail).toEqual({ ended_by: 'key' });
    const m = await message(o.org, o.boxId, call.id);
    expect(m.transcription).toBeNull();
    const rec = await recording(o.org, m.recording_url);
    // Ended by the key, well before the tone (90 s) or the box's maximum (120 s).
    expect(rec.seconds).toBeGreaterThan(1);
    expect(rec.seconds).toBeLessThan(80);
    expect(goertzel(rec.samples, 600)).toBeGreaterThan(0.05);
  }, 180_000);
});
