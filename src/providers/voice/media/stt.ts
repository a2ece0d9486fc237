/**
 * Speech to text for recorded audio (voicemail messages): an adapter port, and its embedded
 * default, pocketsphinx (Debian's `pocketsphinx` with the `pocketsphinx-en-us` model), which works
 * offline. A telephone recording (8 kHz) is brought to the model's 16 kHz with a faint noise floor
 * above the telephone band (the model was trained on wide-band speech: an empty band above 4 kHz
 * misleads it more than a little noise does), then decoded by `pocketsphinx_continuous`; its
 * utterances are joined into one text. Runs are queued (`concurrency` at once) and time-limited.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { decodeWav, encodeWav, RATE, resample } from './wav.ts';
import { Slots } from '../../../platform/slots.ts';

export interface SpeechToText {
  readonly name: string;
  /** Whether the engine is installed here. */
  readonly available: boolean;
  /** The words spoken in a WAV file ('' when none were recognised). Throws SttError. */
  transcribe(file: string, options?: { language?: string }): Promise<string>;
  /** The words spoken in 8 kHz mono samples (a live call's utterance). Throws SttError. */
  transcribeSamples(samples: Int16Array, options?: { language?: string }): Promise<string>;
}

export class SttError extends Error {
  readonly code: 'STT_UNAVAILABLE' | 'STT_UNSUPPORTED' | 'STT_FAILED';
  constructor(code: SttError['code'], message: string) {
    super(message);
    this.name = 'SttError';
    this.code = code;
  }
}

export type PocketsphinxOptions = {
  /** The model folder (Debian's pocketsphinx-en-us: /usr/share/pocketsphinx/model/en-us, holding en-us/, en-us.lm.bin and cmudict-en-us.dict). */
  modelDir?: string;
  /** The decoder (default /usr/bin/pocketsphinx_continuous). */
  binary?: string;
  /** Decoders running at once at most (default 1: each takes a core while it runs). */
  concurrency?: number;
  /** How long one transcription may take (default 120 s). */
  timeoutMs?: number;
  /** Where the 16 kHz copies are written while they are decoded (default the system's temp folder). */
  tmpDir?: string;
};

/** The model's rate. */
const MODEL_RATE = 16_000;
/** Peak of the uniform noise floor added to the upsampled audio (of 32,768; about −57 dBFS RMS). */
const NOISE_PEAK = 100;

export class PocketsphinxStt implements SpeechToText {
  readonly name = 'pocketsphinx';
  readonly #options: Required<PocketsphinxOptions>;
  readonly #slots: Slots;

  constructor(options: PocketsphinxOptions = {}) {
    this.#options = { modelDir: '/usr/share/pocketsphinx/model/en-us', binary: '/usr/bin/pocketsphinx_continuous', concurrency: 1, timeoutMs: 120_000, tmpDir: os.tmpdir(), ...options };
    this.#slots = new Slots(this.#options.concurrency);
  }

  get available(): boolean {
    return existsSync(this.#options.binary) && existsSync(path.join(this.#options.modelDir, 'en-us'));
  }

  async transcribe(file: string, options: { language?: string } = {}): Promise<string> {
    return this.#run(async () => decodeWav(await readFile(file)), options);
  }

  transcribeSamples(samples: Int16Array, options: { language?: string } = {}): Promise<string> {
    return this.#run(async () => samples, options);
  }

  async #run(read: () => Promise<Int16Array>, options: { language?: string }): Promise<string> {
    const language = (options.language ?? 'en-US').toLowerCase();
    if (!language.startsWith('en')) throw new SttError('STT_UNSUPPORTED', `pocketsphinx here has an English model only (asked: ${options.language})`);
    if (!this.available) {
      throw new SttError('STT_UNAVAILABLE', `speech to text needs pocketsphinx and its model (${this.#options.binary}, ${this.#options.modelDir}): apt-get install -y pocketsphinx pocketsphinx-en-us`);
    }
    const wide = path.join(this.#options.tmpDir, `stt-${randomBytes(6).toString('hex')}.wav`);
    return this.#slots.run(async () => {
      try {
        await writeFile(wide, widen(await read()));
        return await this.#decode(wide);
      } finally {
        await rm(wide, { force: true });
      }
    });
  }

  #decode(file: string): Promise<string> {
    const m = this.#options.modelDir;
    const child = spawn(this.#options.binary, [
      '-infile', file, '-hmm', path.join(m, 'en-us'), '-lm', path.join(m, 'en-us.lm.bin'), '-dict', path.join(m, 'cmudict-en-us.dict'), '-logfn', '/dev/null',
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let errors = '';
    child.stdout.on('data', (c: Buffer) => { out += c.toString('utf8'); });
    child.stderr.on('data', (c: Buffer) => { errors = (errors + c.toString()).slice(-2000); });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new SttError('STT_FAILED', `pocketsphinx took longer than ${this.#options.timeoutMs} ms`)); }, this.#options.timeoutMs);
      child.on('error', (e) => { clearTimeout(timer); reject(new SttError('STT_FAILED', `pocketsphinx did not start: ${e.message}`)); });
      child.on('exit', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve(out.split('\n').map((l) => l.trim()).filter(Boolean).join(' '));
        else reject(new SttError('STT_FAILED', `pocketsphinx failed (${code}): ${errors.trim() || 'no output'}`));
      });
    });
  }

}

/** 8 kHz samples as a 16 kHz WAV file with a faint noise floor (deterministic: the same audio reads the same). */
export function widen(samples: Int16Array): Buffer {
  const up = resample(Float32Array.from(samples), RATE, MODEL_RATE);
  let seed = 0x2545f491;
  const out = new Int16Array(up.length);
  for (let i = 0; i < up.length; i++) {
    seed = (seed * 1_103_515_245 + 12_345) >>> 0;
    const noise = ((seed >>> 8) / 0x1000000 - 0.5) * 2 * NOISE_PEAK;
    out[i] = Math.max(-32768, Math.min(32767, Math.round(up[i]! + noise)));
  }
  return encodeWav(out, 1, MODEL_RATE);
}
