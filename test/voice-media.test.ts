/**
 * Live call media through the media port (src/providers/voice/media) against baresip, a SIP phone
 * no one here wrote: a minimal SIP user agent carries the port's SDP, baresip plays a tone as its
 * microphone and records what it hears, and both recordings are checked by their content (which
 * tone is where, by Goertzel; a spoken prompt by its correlation with the rendered speech).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RtpMedia } from '../src/providers/voice/media/live.ts';
import { EspeakTts } from '../src/providers/voice/media/tts.ts';
import { MediaError, type MediaCall } from '../src/providers/voice/media/port.ts';
import { decodeWav, encodeWav } from '../src/providers/voice/media/wav.ts';
import { startMediaBaresip, startSipPeer, type SipPeer } from './helpers/media-sip.ts';
import { bestCorrelation, dominant, goertzel, rms, tone } from './helpers/audio.ts';
import { eventually } from './helpers/assertions.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'voice-media-'));
const warnings: string[] = [];
let media: RtpMedia;
let peer: SipPeer;

/** The far end's microphone: a 1 kHz tone; the service's prompt: 440 Hz, as a 16 kHz file (resampled on load). */
const FAR_HZ = 1000;
const PROMPT_HZ = 440;
const farSource = path.join(dir, 'far.wav');
const promptFile = path.join(dir, 'prompt.wav');

beforeAll(async () => {
  writeFileSync(farSource, encodeWav(tone(FAR_HZ, 12, 6000)));
  writeFileSync(promptFile, encodeWav(tone(PROMPT_HZ, 2, 8000, 16000), 1, 16000));
  const portMin = 46000 + 2 * Math.floor(Math.random() * 1000);
  media = new RtpMedia({ portMin, portMax: portMin + 200, tts: new EspeakTts({ cacheDir: path.join(dir, 'tts') }), log: (_l, m) => warnings.push(m) });
  peer = await startSipPeer();
});

afterAll(async () => {
  peer?.close();
  await media?.close();
});

/** The two channels of a 16-bit stereo WAV file written by the engine. */
function channels(file: string): [Int16Array, Int16Array] {
  const b = readFileSync(file);
  expect(b.toString('latin1', 0, 4)).toBe('RIFF');
  expect(b.readUInt16LE(22)).toBe(2);
  const n = (b.length - 44) / 4;
  const left = new Int16Array(n);
  const right = new Int16Array(n);
  for (let i = 0; i < n; i++) { left[i] = b.readInt16LE(44 + 4 * i); right[i] = b.readInt16LE(46 + 4 * i); }
  return [left, right];
}

/** The loudest `seconds` of a signal (where the prompt is, in a recording with silence around it). */
function loudest(samples: Int16Array, seconds: number): Int16Array {
  const w = Math.round(8000 * seconds);
  let best = 0;
  let bestAt = 0;
  for (let at = 0; at + w <= samples.length; at += 400) {
    const r = rms(samples.subarray(at, at + w));
    if (r > best) { best = r; bestAt = at; }
  }
  return samples.subarray(bestAt, bestAt + w);
}

const until = (what: string, check: () => boolean, ms = 8000): Promise<unknown> => eventually(what, () => check() || undefined, ms);

async function outboundCall(encryption: 'none' | 'tls_srtp', callId: string) {
  const baresip = await startMediaBaresip({ user: 'alice', source: farSource, srtp: encryption === 'tls_srtp' });
  const call = await media.offer({ callId, address: '127.0.0.1', encryption, codecs: ['PCMA', 'PCMU'] });
  const answered = await peer.invite(`sip:alice@127.0.0.1:${baresip.port}`, call.localSdp);
  return { baresip, call, answered };
}

describe('live call media against baresip', () => {
  it('an outbound call: the prompt is heard, the far end is recorded (two channels), keys cross both ways (RFC 4733)', async () => {
    const { baresip, call, answered } = await outboundCall('none', 'media-plain');
    try {
      expect(answered.status).toBe(200);
      expect(call.localSdp).toMatch(/m=audio \d+ RTP\/AVP 8 0 101/);
      await call.accept(answered.sdp);
      const keys: string[] = [];
      call.onDigit((k) => keys.push(k));
      const recording = path.join(dir, 'plain.wav');
      await call.startRecording({ path: recording, channels: 2 });
      expect(await call.play({ file: promptFile })).toEqual({ completed: true });
      baresip.type('7');
      await until('key 7 from baresip', () => keys.includes('7'));
      await call.sendDigits('5');
      await until('baresip to hear key 5', () => /DTMF.*5|5.*DTMF|received event.*5/i.test(baresip.log()));
      const done = await call.close();
      await answered.bye();
      expect(done).toMatchObject({ path: recording, channels: 2 });
      expect(done!.seconds).toBeGreaterThan(2);
      const [far, service] = channels(recording);
      expect(dominant(loudest(far, 1), [FAR_HZ, PROMPT_HZ]).hz).toBe(FAR_HZ);
      expect(dominant(loudest(service, 1), [FAR_HZ, PROMPT_HZ]).hz).toBe(PROMPT_HZ);
      await baresip.close();
      const heard = decodeWav(readFileSync(baresip.heard()));
      const prompt = loudest(heard, 1.5);
      expect(rms(prompt)).toBeGreaterThan(1000);
      expect(dominant(prompt, [FAR_HZ, PROMPT_HZ]).hz).toBe(PROMPT_HZ);
      expect(keys).toEqual(['7']);
    } finally {
      await baresip.close();
    }
  });

  it('an encrypted trunk (tls_srtp, the default): RTP/SAVP with SDES keys, and the audio still crosses both ways', async () => {
    const { baresip, call, answered } = await outboundCall('tls_srtp', 'media-srtp');
    try {
      expect(answered.status).toBe(200);
      expect(call.localSdp).toMatch(/m=audio \d+ RTP\/SAVP /);
      expect(answered.sdp).toMatch(/a=crypto:\d AES_CM_128_HMAC_SHA1_(80|32) inline:/);
      await call.accept(answered.sdp);
      const recording = path.join(dir, 'srtp.wav');
      await call.startRecording({ path: recording, channels: 1 });
      expect(await call.play({ file: promptFile })).toEqual({ completed: true });
      await call.close();
      await answered.bye();
      await baresip.close();
      const mono = decodeWav(readFileSync(recording));
      // The mono mix holds both: the far end's tone (decrypted), and the prompt; nothing else.
      expect(goertzel(mono, FAR_HZ)).toBeGreaterThan(0.05);
      expect(goertzel(mono, PROMPT_HZ)).toBeGreaterThan(0.05);
      expect(goertzel(mono, 1700)).toBeLessThan(0.01);
      const heard = loudest(decodeWav(readFileSync(baresip.heard())), 1.5);
      expect(rms(heard)).toBeGreaterThan(1000);
      expect(dominant(heard, [FAR_HZ, PROMPT_HZ]).hz).toBe(PROMPT_HZ);
    } finally {
      await baresip.close();
    }
  });

  it('a spoken prompt (espeak-ng, rendered once per text, voice and language) is what the far end hears', async () => {
    const { baresip, call, answered } = await outboundCall('none', 'media-tts');
    let rendered: string;
    try {
      await call.accept(answered.sdp);
      const text = 'Thank you for calling. Press one for sales.';
      expect(await call.play({ text, language: 'en-US' })).toEqual({ completed: true });
      rendered = new EspeakTts({ cacheDir: path.join(dir, 'tts') }).cacheFile({ text, language: 'en-US' });
      const before = statSync(rendered).mtimeMs;
      expect(await call.play({ text: `  ${text} `, language: 'en-US' })).toEqual({ completed: true });
      expect(statSync(rendered).mtimeMs).toBe(before);
      await call.close();
      await answered.bye();
      await baresip.close();
    } finally {
      await baresip.close();
    }
    // The far end heard the rendered speech (through G.711): its best alignment correlates strongly.
    const speech = decodeWav(readFileSync(rendered));
    const heard = decodeWav(readFileSync(baresip.heard()));
    expect(bestCorrelation(heard, speech)).toBeGreaterThan(0.9);
    expect(bestCorrelation(heard, tone(PROMPT_HZ, speech.length / 8000))).toBeLessThan(0.3);
  });

  it('an inbound call (baresip dials): the port answers its offer, and a far end with no common codec gets MEDIA_CODEC_MISMATCH', async () => {
    const answeredCalls: MediaCall[] = [];
    const refused: unknown[] = [];
    peer.onInvite(async (offer) => {
      try {
        const call = await media.answer({ callId: `inbound-${answeredCalls.length}`, address: '127.0.0.1', encryption: 'none', codecs: ['PCMU', 'PCMA'], remoteSdp: offer });
        answeredCalls.push(call);
        void call.play({ file: promptFile });
        return { sdp: call.localSdp };
      } catch (e) {
        refused.push(e);
        return { status: 488, reason: 'Not Acceptable Here' };
      }
    });
    const caller = await startMediaBaresip({ user: 'bob', source: farSource, dial: `sip:media@127.0.0.1:${peer.port}` });
    try {
      await until('the inbound call', () => answeredCalls.length === 1);
      const recording = path.join(dir, 'inbound.wav');
      await answeredCalls[0]!.startRecording({ path: recording, channels: 2 });
      await new Promise((r) => setTimeout(r, 2500));
      await answeredCalls[0]!.close();
      await caller.close();
      const [far] = channels(recording);
      expect(dominant(loudest(far, 1), [FAR_HZ, PROMPT_HZ]).hz).toBe(FAR_HZ);
      const heard = loudest(decodeWav(readFileSync(caller.heard())), 1.5);
      expect(dominant(heard, [FAR_HZ, PROMPT_HZ]).hz).toBe(PROMPT_HZ);
    } finally {
      await caller.close();
    }
    const g722 = await startMediaBaresip({ user: 'carol', source: farSource, codecs: ['g722'], dial: `sip:media@127.0.0.1:${peer.port}` });
    try {
      await until('the G.722-only call', () => refused.length === 1);
      expect(refused[0]).toBeInstanceOf(MediaError);
      expect((refused[0] as MediaError).code).toBe('MEDIA_CODEC_MISMATCH');
      expect((refused[0] as MediaError).message).toMatch(/G722/);
      expect(answeredCalls).toHaveLength(1);
    } finally {
      await g722.close();
    }
  });
});
