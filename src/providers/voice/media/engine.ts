/**
 * The media engine as the service's thread sees it: starts the media thread on first use and talks
 * to it by messages (thread.ts). Each call's media is a `RtpLeg`: open it (an RTP port pair), set
 * it up once the SDP exchange says where and how to send, then play, send keys, record, close.
 */
import { Worker } from 'node:worker_threads';
import type { EngineStats, FromMedia, RecordingDone, SessionSetup, SessionStats, SilenceWatch, ToMedia } from './protocol.ts';
import type { VadOptions } from './vad.ts';

export type MediaEngineOptions = {
  /** RTP ports are taken in pairs from this range. */
  portMin: number;
  portMax: number;
  /** The media thread's nice value (Linux; below 0 needs root or CAP_SYS_NICE). Undefined: as the process. */
  threadNice?: number;
  log?: (level: 'warn' | 'info', message: string, detail?: Record<string, unknown>) => void;
};

type Waiter = { resolve: (m: Extract<FromMedia, { op: 'reply' }>) => void; reject: (e: Error) => void };

export class RtpEngine {
  readonly #options: MediaEngineOptions;
  #worker: Worker | undefined;
  #rid = 0;
  readonly #waiting = new Map<number, Waiter>();
  readonly #legs = new Map<string, RtpLeg>();

  constructor(options: MediaEngineOptions) {
    this.#options = options;
  }

  #thread(): Worker {
    if (this.#worker) return this.#worker;
    const w = new Worker(new URL('./thread.ts', import.meta.url), { workerData: { portMin: this.#options.portMin, portMax: this.#options.portMax, nice: this.#options.threadNice } });
    w.on('message', (m: FromMedia) => this.#receive(m));
    w.on('error', (e) => {
      this.#options.log?.('warn', `media thread failed: ${e.message}`);
      this.#failAll(e);
    });
    w.on('exit', () => {
      if (this.#worker === w) this.#worker = undefined;
      this.#failAll(new Error('the media thread stopped'));
    });
    this.#worker = w;
    return w;
  }

  #failAll(e: Error): void {
    for (const w of this.#waiting.values()) w.reject(e);
    this.#waiting.clear();
    for (const leg of this.#legs.values()) leg.ended(e);
    this.#legs.clear();
  }

  #receive(m: FromMedia): void {
    if (m.op === 'reply') {
      const w = this.#waiting.get(m.rid);
      this.#waiting.delete(m.rid);
      if (!w) return;
      if (m.error) w.reject(new Error(m.error));
      else w.resolve(m);
      return;
    }
    if (m.op === 'warn') {
      this.#options.log?.('warn', m.message, m.id ? { media_id: m.id } : undefined);
      return;
    }
    this.#legs.get(m.id)?.event(m);
  }

  request(m: ToMedia & { rid: number }): Promise<Extract<FromMedia, { op: 'reply' }>> {
    return new Promise((resolve, reject) => {
      this.#waiting.set(m.rid, { resolve, reject });
      this.#thread().postMessage(m);
    });
  }

  post(m: ToMedia): void {
    this.#thread().postMessage(m);
  }

  nextRid(): number {
    return ++this.#rid;
  }

  /** A new leg with its RTP port pair bound on `host` (the address our SDP gives). */
  async open(id: string, host: string): Promise<RtpLeg> {
    if (this.#legs.has(id)) throw new Error(`media leg ${id} is already open`);
    const reply = await this.request({ op: 'open', rid: this.nextRid(), id, host });
    const leg = new RtpLeg(this, id, host, reply.port!, () => this.#legs.delete(id));
    this.#legs.set(id, leg);
    return leg;
  }

  async stats(): Promise<EngineStats | undefined> {
    if (!this.#worker) return undefined;
    return (await this.request({ op: 'stats', rid: this.nextRid() })).engine;
  }

  get openLegs(): number {
    return this.#legs.size;
  }

  async close(): Promise<void> {
    for (const leg of [...this.#legs.values()]) await leg.close().catch(() => undefined);
    const w = this.#worker;
    this.#worker = undefined;
    if (w) await w.terminate();
  }
}

export type PlayOutcome = { completed: boolean };

/** One call's media in the media thread. */
export class RtpLeg {
  readonly id: string;
  readonly host: string;
  readonly port: number;
  readonly #engine: RtpEngine;
  readonly #forget: () => void;
  #playId = 0;
  readonly #plays = new Map<number, (o: PlayOutcome) => void>();
  readonly #keyListeners: ((key: string) => void)[] = [];
  readonly #inactiveListeners: ((silentMs: number) => void)[] = [];
  readonly #silenceListeners: ((silentMs: number) => void)[] = [];
  readonly #voiceListeners: (() => void)[] = [];
  readonly #utteranceListeners: ((samples: Int16Array, silentMs: number) => void)[] = [];
  #closed: Promise<{ recording?: RecordingDone; stats?: SessionStats }> | undefined;

  constructor(engine: RtpEngine, id: string, host: string, port: number, forget: () => void) {
    this.#engine = engine;
    this.id = id;
    this.host = host;
    this.port = port;
    this.#forget = forget;
  }

  async setup(setup: SessionSetup): Promise<void> {
    await this.#engine.request({ op: 'setup', rid: this.#engine.nextRid(), id: this.id, setup });
  }

  /** Plays 8 kHz samples (queued after what plays already); resolves when they end or are stopped. */
  play(samples: Int16Array): Promise<PlayOutcome> {
    if (this.#closed) return Promise.resolve({ completed: false });
    const playId = ++this.#playId;
    return new Promise((resolve) => {
      this.#plays.set(playId, resolve);
      this.#engine.post({ op: 'play', id: this.id, playId, samples });
    });
  }

  stopPlaying(): void {
    if (!this.#closed) this.#engine.post({ op: 'stopPlay', id: this.id });
  }

  async sendDtmf(keys: string): Promise<void> {
    await this.#engine.request({ op: 'dtmf', rid: this.#engine.nextRid(), id: this.id, keys });
  }

  async startRecording(path: string, channels: 1 | 2, silence?: SilenceWatch): Promise<void> {
    await this.#engine.request({ op: 'record', rid: this.#engine.nextRid(), id: this.id, path, channels, ...(silence ? { silence } : {}) });
  }

  async stopRecording(): Promise<RecordingDone | undefined> {
    return (await this.#engine.request({ op: 'stopRecord', rid: this.#engine.nextRid(), id: this.id })).recording;
  }

  /** Mixes this leg's audio in room `room` (mixer.ts), or changes its mute there. */
  async join(room: string, muted: boolean): Promise<void> {
    await this.#engine.request({ op: 'join', rid: this.#engine.nextRid(), id: this.id, room, muted });
  }

  /** Takes this leg out of its room. */
  async leave(): Promise<void> {
    if (!this.#closed) await this.#engine.request({ op: 'leave', rid: this.#engine.nextRid(), id: this.id });
  }

  /** Listens for the far end's utterances with this voice activity detection (undefined: stops). */
  async listen(vad: VadOptions | undefined): Promise<void> {
    await this.#engine.request({ op: 'listen', rid: this.#engine.nextRid(), id: this.id, ...(vad ? { vad } : {}) });
  }

  /** Listening: the far end began an utterance. */
  onVoice(listener: () => void): void {
    this.#voiceListeners.push(listener);
  }

  /** Listening: an utterance ended (`silentMs` ago), with its audio (8 kHz). */
  onUtterance(listener: (samples: Int16Array, silentMs: number) => void): void {
    this.#utteranceListeners.push(listener);
  }

  onKey(listener: (key: string) => void): void {
    this.#keyListeners.push(listener);
  }

  /** The far end sent no RTP for the setup's `inactivityMs`. */
  onInactive(listener: (silentMs: number) => void): void {
    this.#inactiveListeners.push(listener);
  }

  /** The recording's silence watch fired. */
  onSilence(listener: (silentMs: number) => void): void {
    this.#silenceListeners.push(listener);
  }

  /** Closes the sockets; answers the recording still running, if any, and the session's figures. */
  close(): Promise<{ recording?: RecordingDone; stats?: SessionStats }> {
    this.#closed ??= this.#engine.request({ op: 'close', rid: this.#engine.nextRid(), id: this.id }).then(
      (r) => ({ recording: r.recording, stats: r.stats }),
    ).finally(() => {
      this.#forget();
      this.ended(undefined);
    });
    return this.#closed;
  }

  /** @internal */
  event(m: Exclude<FromMedia, { op: 'reply' } | { op: 'warn' }>): void {
    if (m.op === 'dtmf') for (const l of this.#keyListeners) l(m.key);
    else if (m.op === 'inactive') for (const l of this.#inactiveListeners) l(m.silentMs);
    else if (m.op === 'silence') for (const l of this.#silenceListeners) l(m.silentMs);
    else if (m.op === 'voice') for (const l of this.#voiceListeners) l();
    else if (m.op === 'utterance') for (const l of this.#utteranceListeners) l(m.samples, m.silentMs);
    else if (m.op === 'played') {
      const done = this.#plays.get(m.playId);
      this.#plays.delete(m.playId);
      done?.({ completed: m.completed });
    }
  }

  /** @internal the thread ended the session (closed, or the thread failed). */
  ended(_error: Error | undefined): void {
    for (const done of this.#plays.values()) done({ completed: false });
    this.#plays.clear();
  }
}
