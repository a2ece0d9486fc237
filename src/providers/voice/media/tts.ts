/**
 * Text to speech for prompts: an adapter port, and its embedded default, espeak-ng (Debian's
 * `espeak-ng` package), which works offline. A rendered prompt is a WAV file kept in a cache
 * directory under a name derived from the text, voice and language, so a greeting played on many
 * calls is rendered once; renders of the same prompt at the same time share one espeak-ng run.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Slots } from '../../../platform/slots.ts';

export type SpeechRequest = {
  text: string;
  /** BCP 47 language, e.g. en-US (default en-US). */
  language?: string;
  /** A voice variant of the engine (espeak-ng: m1–m7, f1–f5, …); default: the language's own. */
  voice?: string;
};

export interface TextToSpeech {
  readonly name: string;
  /** A WAV file of the text spoken (from the cache when rendered before). */
  render(request: SpeechRequest): Promise<string>;
}

export class TtsError extends Error {
  readonly code: 'TTS_UNAVAILABLE' | 'TTS_INVALID' | 'TTS_FAILED';
  constructor(code: TtsError['code'], message: string) {
    super(message);
    this.name = 'TtsError';
    this.code = code;
  }
}

const LANGUAGE = /^[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$/;
const VOICE = /^[A-Za-z0-9_]{1,20}$/;
export const MAX_PROMPT_CHARS = 4000;

export type EspeakOptions = {
  /** Where rendered prompts are kept. */
  cacheDir: string;
  /** The espeak-ng program (default /usr/bin/espeak-ng). */
  binary?: string;
  /** Words per minute (espeak-ng -s; default 160). */
  wordsPerMinute?: number;
  /** espeak-ng runs at once at most (default 2). */
  concurrency?: number;
  /** How long one render may take (default 30 s). */
  timeoutMs?: number;
};

export class EspeakTts implements TextToSpeech {
  readonly name = 'espeak-ng';
  readonly #options: Required<EspeakOptions>;
  readonly #inFlight = new Map<string, Promise<string>>();
  readonly #slots: Slots;

  constructor(options: EspeakOptions) {
    this.#options = { binary: '/usr/bin/espeak-ng', wordsPerMinute: 160, concurrency: 2, timeoutMs: 30_000, ...options };
    this.#slots = new Slots(this.#options.concurrency);
  }

  /** Whether the engine is installed here (the Debian package espeak-ng). */
  get available(): boolean {
    return existsSync(this.#options.binary);
  }

  /** The cache file of a request: sha256 of engine, voice, language and text. */
  cacheFile(request: SpeechRequest): string {
    const { text, language, voice } = normalize(request);
    const key = createHash('sha256').update(JSON.stringify([this.name, this.#options.wordsPerMinute, voice, language, text])).digest('hex');
    return path.join(this.#options.cacheDir, `${key}.wav`);
  }

  render(request: SpeechRequest): Promise<string> {
    const file = this.cacheFile(request);
    const running = this.#inFlight.get(file);
    if (running) return running;
    const work = this.#render(normalize(request), file).finally(() => this.#inFlight.delete(file));
    this.#inFlight.set(file, work);
    return work;
  }

  async #render(r: Required<SpeechRequest>, file: string): Promise<string> {
    if (await stat(file).then((s) => s.size > 44, () => false)) return file;
    if (!this.available) throw new TtsError('TTS_UNAVAILABLE', `text to speech needs espeak-ng (${this.#options.binary} is missing): apt-get install -y espeak-ng`);
    await mkdir(this.#options.cacheDir, { recursive: true });
    const partial = `${file}.${randomBytes(4).toString('hex')}.part`;
    return this.#slots.run(async () => {
      try {
        await this.#espeak(r, partial);
        await rename(partial, file);
        return file;
      } catch (e) {
        await rm(partial, { force: true });
        throw e;
      }
    });
  }

  #espeak(r: Required<SpeechRequest>, out: string): Promise<void> {
    const voice = r.voice ? `${espeakLanguage(r.language)}+${r.voice}` : espeakLanguage(r.language);
    // The text goes on stdin (never on the command line), as plain text (no SSML: -m is off).
    const child = spawn(this.#options.binary, ['-v', voice, '-s', String(this.#options.wordsPerMinute), '-w', out, '--stdin'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let errors = '';
    child.stderr.on('data', (c: Buffer) => { errors = (errors + c.toString()).slice(-2000); });
    child.stdin.on('error', () => {});
    child.stdin.end(r.text);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new TtsError('TTS_FAILED', `espeak-ng took longer than ${this.#options.timeoutMs} ms`)); }, this.#options.timeoutMs);
      child.on('error', (e) => { clearTimeout(timer); reject(new TtsError('TTS_FAILED', `espeak-ng did not start: ${e.message}`)); });
      child.on('exit', (code) => {
        clearTimeout(timer);
        // espeak-ng exits 0 and prints to stderr for an unknown voice.
        if (code === 0 && !/voice.*(does not exist|not found)|unknown voice/i.test(errors)) resolve();
        else reject(new TtsError(/voice/i.test(errors) ? 'TTS_INVALID' : 'TTS_FAILED', `espeak-ng failed (${code}): ${errors.trim() || 'no output'}`));
      });
    });
  }

}

function normalize(r: SpeechRequest): Required<SpeechRequest> {
  const text = r.text.replace(/\s+/g, ' ').trim();
  if (!text) throw new TtsError('TTS_INVALID', 'the prompt text is empty');
  if (text.length > MAX_PROMPT_CHARS) throw new TtsError('TTS_INVALID', `the prompt text is longer than ${MAX_PROMPT_CHARS} characters`);
  const language = r.language ?? 'en-US';
  if (!LANGUAGE.test(language)) throw new TtsError('TTS_INVALID', `not a language code: ${language}`);
  const voice = r.voice ?? '';
  if (voice && !VOICE.test(voice)) throw new TtsError('TTS_INVALID', `not a voice name: ${voice}`);
  return { text, language, voice };
}

/** espeak-ng names voices in lower case (en-us, pt-br); a bare language is its default voice. */
function espeakLanguage(language: string): string {
  return language.toLowerCase();
}
