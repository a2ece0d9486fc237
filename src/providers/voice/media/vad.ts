/**
 * Voice activity on the far end's audio, one 20 ms frame at a time (8 kHz, 160 samples): a frame
 * whose RMS is at least the threshold is voiced. An utterance starts once `startMs` of voiced
 * frames came in a row (a click or a pop is not speech) and ends once `hangoverMs` passed without
 * one (the pauses between words are not its end), or when it reaches `maxMs`. Its audio keeps
 * `preRollMs` before the start (the speech's soft onset, below the threshold) and `tailMs` after
 * the last voiced frame. Pure: the media thread feeds it and posts what it reports.
 *
 * The same measure (rms, dbfsToRms) is what a recording's silence watch uses (session.ts).
 */

/** The RMS (of 32,768) of a frame. */
export function rms(frame: Int16Array): number {
  let sum = 0;
  for (let i = 0; i < frame.length; i++) sum += frame[i]! * frame[i]!;
  return frame.length ? Math.sqrt(sum / frame.length) : 0;
}

/** A level in dB of full scale as an RMS of 32,768. */
export function dbfsToRms(dbfs: number): number {
  return 32768 * 10 ** (dbfs / 20);
}

export const FRAME_MS = 20;

export type VadOptions = {
  /** A frame at or above this RMS (of 32,768) is voiced. */
  rms: number;
  startMs: number;
  hangoverMs: number;
  maxMs: number;
  /** Audio kept before the start and after the last voiced frame (default 100 ms each). */
  preRollMs?: number;
  tailMs?: number;
};

/** `start`: the far end began to speak; `end`: it stopped (`silentMs` ago, the hangover) or reached maxMs; the utterance's audio. */
export type VadEvent = { type: 'start' } | { type: 'end'; samples: Int16Array; silentMs: number; capped: boolean };

export class VoiceActivity {
  readonly #o: Required<VadOptions>;
  /** Frames before a start (pre-roll and the voiced run so far). */
  readonly #before: Int16Array[] = [];
  #run = 0;
  /** The utterance being heard: its frames, and frames since its last voiced one. */
  #utterance: Int16Array[] | undefined;
  #silent = 0;

  constructor(options: VadOptions) {
    this.#o = { preRollMs: 100, tailMs: 100, ...options };
  }

  /** Whether an utterance is being heard (started, not ended). */
  get speaking(): boolean {
    return this.#utterance !== undefined;
  }

  /** One frame (copied when kept); what it changed, if anything. */
  frame(frame: Int16Array): VadEvent | undefined {
    const voiced = rms(frame) >= this.#o.rms;
    const u = this.#utterance;
    if (!u) {
      this.#before.push(Int16Array.from(frame));
      this.#run = voiced ? this.#run + 1 : 0;
      const startFrames = Math.max(1, Math.ceil(this.#o.startMs / FRAME_MS));
      const keep = Math.ceil(this.#o.preRollMs / FRAME_MS) + this.#run;
      while (this.#before.length > keep) this.#before.shift();
      if (this.#run < startFrames) return undefined;
      this.#utterance = this.#before.splice(0);
      this.#run = 0;
      this.#silent = 0;
      return { type: 'start' };
    }
    u.push(Int16Array.from(frame));
    this.#silent = voiced ? 0 : this.#silent + 1;
    const capped = u.length * FRAME_MS >= this.#o.maxMs;
    if (!capped && this.#silent * FRAME_MS < this.#o.hangoverMs) return undefined;
    // The silence after the last voiced frame goes, but for the tail.
    const drop = Math.max(0, this.#silent - Math.ceil(this.#o.tailMs / FRAME_MS));
    const kept = u.slice(0, u.length - drop);
    const samples = new Int16Array(kept.reduce((n, f) => n + f.length, 0));
    let at = 0;
    for (const f of kept) { samples.set(f, at); at += f.length; }
    const silentMs = this.#silent * FRAME_MS;
    this.reset();
    return { type: 'end', samples, silentMs, capped };
  }

  /** Forgets what was heard (an utterance in progress is dropped). */
  reset(): void {
    this.#utterance = undefined;
    this.#before.length = 0;
    this.#run = 0;
    this.#silent = 0;
  }
}

/**
 * A recording's silence watch (voicemail): the silence (ms) when it is due at frame `now` — `ms`
 * since the last voiced frame, or `initialMs` since the recording's first frame when none was
 * voiced yet — else undefined.
 */
export function silenceDue(watch: { ms: number; initialMs: number }, now: number, first: number, lastVoiced: number | undefined): number | undefined {
  const silentMs = (now - (lastVoiced ?? first)) * FRAME_MS;
  return silentMs >= (lastVoiced === undefined ? watch.initialMs : watch.ms) ? silentMs : undefined;
}

/**
 * The sample range (per channel, 8 kHz) a recording keeps when it is cut to the far end's voiced
 * span (`from`–`until` seconds) with `padMs` either side, within its `length` samples.
 */
export function voicedRange(length: number, voiced: { from: number; until: number }, padMs: number, rate = 8000): { from: number; until: number } {
  const pad = (padMs / 1000) * rate;
  const from = Math.min(length, Math.max(0, Math.floor(voiced.from * rate - pad)));
  const until = Math.min(length, Math.ceil(voiced.until * rate + pad));
  return { from, until: Math.max(from, until) };
}
