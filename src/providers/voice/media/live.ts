/**
 * The media port on the service's own engine (engine.ts: RTP on a media thread): SDP offer/answer
 * (sdp.ts), SRTP keys when the trunk is encrypted, prompts from WAV files or text to speech
 * (decoded once and shared with the media thread), keys both ways, recordings.
 */
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { randomInt } from 'node:crypto';
import { RtpEngine, type RtpLeg } from './engine.ts';
import { acceptAnswer, answerOffer, buildSdp, SdpError, type Agreement } from './sdp.ts';
import { newSrtpKey, type SrtpKey } from './srtp.ts';
import { decodeWav, encodeWav, RATE } from './wav.ts';
import type { G711 } from './g711.ts';
import type { SessionSetup } from './protocol.ts';
import type { TextToSpeech } from './tts.ts';
import { dbfsToRms, voicedRange } from './vad.ts';
import { MediaError, type MediaCall, type MediaCallSpec, type MediaPort, type ListenOptions, type PlayOutcome, type Prompt, type RecordingDone, type SilenceOptions, type Utterance } from './port.ts';

export type RtpMediaOptions = {
  portMin: number;
  portMax: number;
  threadNice?: number;
  tts: TextToSpeech & { readonly available?: boolean };
  log: (level: 'warn' | 'info', message: string, detail?: Record<string, unknown>) => void;
  /** Prompts kept decoded in memory (default 64). */
  promptCache?: number;
};

const SPOKEN: readonly G711[] = ['PCMU', 'PCMA'];

export class RtpMedia implements MediaPort {
  readonly #engine: RtpEngine;
  readonly #options: RtpMediaOptions;
  readonly #prompts = new Map<string, { mtimeMs: number; size: number; samples: Int16Array }>();

  constructor(options: RtpMediaOptions) {
    this.#options = options;
    this.#engine = new RtpEngine({ portMin: options.portMin, portMax: options.portMax, threadNice: options.threadNice, log: options.log });
  }

  missing(): string | undefined {
    return this.#options.tts.available === false ? `${this.#options.tts.name} (text to speech for spoken prompts): apt-get install -y ${this.#options.tts.name}` : undefined;
  }

  async offer(spec: MediaCallSpec): Promise<MediaCall> {
    const codecs = spoken(spec.codecs);
    const keys = spec.encryption === 'tls_srtp' ? [newSrtpKey('AES_CM_128_HMAC_SHA1_80'), newSrtpKey('AES_CM_128_HMAC_SHA1_32')] : undefined;
    const leg = await this.#engine.open(spec.callId, spec.bindAddress ?? spec.address);
    const sdp = buildSdp({ address: spec.address, port: leg.port, codecs, keys, sessionId: sessionId() });
    return new LiveCall(this, leg, sdp, { codecs, keys }, spec.inactivityMs);
  }

  async answer(spec: MediaCallSpec & { remoteSdp: string }): Promise<MediaCall> {
    const codecs = spoken(spec.codecs);
    const { agreement, localKey, answer } = sdpErrors(() => answerOffer(spec.remoteSdp, { codecs, requireSrtp: spec.encryption === 'tls_srtp', newKey: newSrtpKey }));
    const leg = await this.#engine.open(spec.callId, spec.bindAddress ?? spec.address);
    const call = new LiveCall(this, leg, answer({ address: spec.address, port: leg.port, sessionId: sessionId() }), undefined, spec.inactivityMs);
    try {
      await leg.setup(setupOf(agreement, localKey, spec.inactivityMs));
    } catch (e) {
      await leg.close().catch(() => undefined);
      throw e;
    }
    return call;
  }

  /** A prompt as 8 kHz samples in shared memory (decoded once per file version). */
  async samples(prompt: Prompt): Promise<Int16Array> {
    if ('tone' in prompt) return tone(prompt.tone.hz, prompt.tone.ms);
    let file: string;
    try {
      file = 'file' in prompt ? prompt.file : await this.#options.tts.render(prompt);
    } catch (e) {
      throw new MediaError('MEDIA_PROMPT_FAILED', `the prompt could not be spoken: ${(e as Error).message}`, { cause: e });
    }
    try {
      const s = await stat(file);
      const cached = this.#prompts.get(file);
      if (cached && cached.mtimeMs === s.mtimeMs && cached.size === s.size) {
        this.#prompts.delete(file);
        this.#prompts.set(file, cached); // most recently used last
        return cached.samples;
      }
      const decoded = decodeWav(await readFile(file));
      const samples = new Int16Array(new SharedArrayBuffer(decoded.byteLength));
      samples.set(decoded);
      this.#prompts.set(file, { mtimeMs: s.mtimeMs, size: s.size, samples });
      while (this.#prompts.size > (this.#options.promptCache ?? 64)) this.#prompts.delete(this.#prompts.keys().next().value!);
      return samples;
    } catch (e) {
      throw new MediaError('MEDIA_PROMPT_FAILED', `the prompt ${file} could not be played: ${(e as Error).message}`, { cause: e });
    }
  }

  async stats() {
    return this.#engine.stats();
  }

  get openCalls(): number {
    return this.#engine.openLegs;
  }

  async close(): Promise<void> {
    await this.#engine.close();
  }
}

type Offered = { codecs: readonly G711[]; keys: readonly SrtpKey[] | undefined };

class LiveCall implements MediaCall {
  readonly callId: string;
  readonly localSdp: string;
  readonly #media: RtpMedia;
  readonly #leg: RtpLeg;
  readonly #offered: Offered | undefined;
  readonly #inactivityMs: number | undefined;

  constructor(media: RtpMedia, leg: RtpLeg, localSdp: string, offered: Offered | undefined, inactivityMs: number | undefined) {
    this.#inactivityMs = inactivityMs;
    this.#media = media;
    this.#leg = leg;
    this.callId = leg.id;
    this.localSdp = localSdp;
    this.#offered = offered;
  }

  async accept(remoteSdp: string): Promise<void> {
    if (!this.#offered) throw new MediaError('MEDIA_SDP_INVALID', 'this call answered an offer: there is no answer to accept');
    const a = sdpErrors(() => acceptAnswer(remoteSdp, this.#offered!));
    await this.#leg.setup(setupOf(a, a.localKey, this.#inactivityMs));
  }

  async play(prompt: Prompt): Promise<PlayOutcome> {
    return this.#leg.play(await this.#media.samples(prompt));
  }

  stopPlaying(): void {
    this.#leg.stopPlaying();
  }

  sendDigits(keys: string): Promise<void> {
    return this.#leg.sendDtmf(keys);
  }

  onDigit(listener: (key: string) => void): void {
    this.#leg.onKey(listener);
  }

  onInactive(listener: (silentMs: number) => void): void {
    this.#leg.onInactive(listener);
  }

  startRecording(options: { path: string; channels: 1 | 2; silence?: SilenceOptions }): Promise<void> {
    const silence = options.silence ? { rms: dbfsToRms(options.silence.thresholdDbfs), ms: options.silence.ms, initialMs: options.silence.initialMs } : undefined;
    return this.#leg.startRecording(options.path, options.channels, silence);
  }

  onSilence(listener: (silentMs: number) => void): void {
    this.#leg.onSilence(listener);
  }

  async stopRecording(options?: { trimToVoice?: { padMs: number } }): Promise<RecordingDone | undefined> {
    const done = await this.#leg.stopRecording();
    if (!done || !options?.trimToVoice) return done;
    return trimToVoice(done, options.trimToVoice.padMs);
  }

  join(room: string, options?: { muted?: boolean }): Promise<void> {
    return this.#leg.join(room, options?.muted ?? false);
  }

  leave(): Promise<void> {
    return this.#leg.leave();
  }

  listen(options: ListenOptions): Promise<void> {
    return this.#leg.listen({ rms: dbfsToRms(options.thresholdDbfs), startMs: options.startMs, hangoverMs: options.hangoverMs, maxMs: options.maxMs });
  }

  stopListening(): Promise<void> {
    return this.#leg.listen(undefined);
  }

  onVoiceStart(listener: () => void): void {
    this.#leg.onVoice(listener);
  }

  onUtterance(listener: (utterance: Utterance) => void): void {
    this.#leg.onUtterance((samples, silentMs) => listener({ samples, seconds: samples.length / RATE, silentMs }));
  }

  async close(): Promise<RecordingDone | undefined> {
    return (await this.#leg.close()).recording;
  }
}

/**
 * The recording cut to the far end's voiced span (with `padMs` either side, within the file), or
 * deleted when the far end never spoke. Mono recordings only (two channels are kept whole).
 */
async function trimToVoice(done: RecordingDone, padMs: number): Promise<RecordingDone> {
  if (done.channels !== 1) return done; // a two-channel recording is kept whole
  if (!done.voiced) {
    await rm(done.path, { force: true });
    return { ...done, seconds: 0, bytes: 0 };
  }
  const samples = decodeWav(await readFile(done.path));
  const range = voicedRange(samples.length / done.channels, done.voiced, padMs, RATE);
  const kept = samples.subarray(range.from * done.channels, range.until * done.channels);
  const file = encodeWav(kept, done.channels);
  await writeFile(done.path, file);
  return { ...done, seconds: kept.length / done.channels / RATE, bytes: file.length };
}

/** A sine tone of `ms` at `hz` (8 kHz samples, half scale, 5 ms fades), in shared memory. */
function tone(hz: number, ms: number): Int16Array {
  const n = Math.round((ms / 1000) * RATE);
  const fade = Math.round(0.005 * RATE);
  const out = new Int16Array(new SharedArrayBuffer(n * 2));
  for (let i = 0; i < n; i++) out[i] = Math.round(16_000 * Math.min(1, i / fade, (n - 1 - i) / fade) * Math.sin((2 * Math.PI * hz * i) / RATE));
  return out;
}

function spoken(codecs: readonly string[]): G711[] {
  const ours = codecs.map((c) => c.toUpperCase()).filter((c): c is G711 => (SPOKEN as readonly string[]).includes(c));
  if (ours.length === 0) throw new MediaError('MEDIA_CODEC_MISMATCH', `the trunk's codecs (${codecs.join(', ') || 'none'}) include none the media engine speaks (${SPOKEN.join(', ')})`);
  return [...new Set(ours)];
}

function sdpErrors<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof SdpError) throw new MediaError(e.code, e.message, { cause: e });
    throw e;
  }
}

function setupOf(a: Agreement, localKey: SrtpKey | undefined, inactivityMs: number | undefined): SessionSetup {
  return {
    ...(inactivityMs !== undefined ? { inactivityMs } : {}),
    remote: a.remote, remoteRtcp: a.remoteRtcp, codec: a.codec, payloadType: a.payloadType, dtmfPayloadType: a.telephoneEvent,
    srtp: a.remoteCrypto?.key && localKey ? { send: localKey, receive: a.remoteCrypto.key } : undefined,
  };
}

function sessionId(): string {
  return String(randomInt(1, 2 ** 47));
}
