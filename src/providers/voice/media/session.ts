/**
 * One call's media on the media thread: an RTP socket and the RTCP socket beside it, what the call
 * plays (one 20 ms frame per clock tick: a prompt, RFC 4733 key events, or silence), what it hears
 * (keys reported, audio into the recording), and the recording itself.
 *
 * Symmetric RTP and RTCP (RFC 4961): we send from the ports we receive on, and once the far end's
 * first valid packet arrives from another address than its SDP said (a NAT), we send there and
 * take plain RTP from there only.
 */
import dgram from 'node:dgram';
import { randomBytes, randomInt } from 'node:crypto';
import { buildRtcpBye, buildRtcpReport, buildRtp, isRtcp, parseRtcpSenderReports, parseRtp, ReceptionStats } from './rtp.ts';
import { decodeG711, encodeG711, FRAME, SILENCE } from './g711.ts';
import { DtmfReceiver, dtmfSteps, type DtmfStep } from './dtmf.ts';
import { SrtpReceiver, SrtpSender, type SrtpKey } from './srtp.ts';
import { WavWriter } from './wav.ts';
import { rms, silenceDue, VoiceActivity, type VadOptions } from './vad.ts';
import type { Endpoint, FromMedia, RecordingDone, SessionSetup, SessionStats, SilenceWatch } from './protocol.ts';
import type { MixMember } from './mixer.ts';

/** Frames a received packet may arrive late and still be in the recording (the recording's jitter buffer). */
const RECORD_DELAY = 10;
/** Frames buffered before a recording block is written (one second). */
const RECORD_BLOCK = 50;
const RTCP_EVERY = 250; // ticks: 5 s
/** Ticks without audio from a far end that is speaking before silence is heard in its place. */
const LISTEN_GAP = 3;

/** A recording going on: its file, the slots written and buffered, and (with a silence watch) the far end's voiced slots. */
type Recorder = {
  writer: WavWriter; firstSlot: number; nextSlot: number; block: Int16Array; blockFrames: number;
  silence?: SilenceWatch & { reported: boolean }; firstVoiced?: number; lastVoiced?: number;
};

type Playback = { playId: number; samples: Int16Array; at: number };

export type SessionHost = {
  post(message: FromMedia): void;
};

export class MediaSession {
  readonly id: string;
  readonly #host: SessionHost;
  readonly #rtp: dgram.Socket;
  readonly #rtcp: dgram.Socket;
  readonly port: number;
  #setup: SessionSetup | undefined;
  #remote: Endpoint | undefined;
  #remoteRtcp: Endpoint | undefined;
  #latched = false;
  #srtpOut: SrtpSender | undefined;
  #srtpIn: SrtpReceiver | undefined;
  readonly #ssrc = randomBytes(4).readUInt32BE();
  #seq = randomInt(0, 0x10000);
  #timestamp = randomBytes(4).readUInt32BE();
  #sent = 0;
  #octets = 0;
  readonly #stats = new ReceptionStats();
  #playback: Playback | undefined;
  readonly #queue: Playback[] = [];
  /** Key events still to send, one step per tick, and the timestamp of the key being sent. */
  #dtmf: { steps: DtmfStep[]; timestamp: number | undefined; gap: number; done: () => void }[] = [];
  readonly #dtmfIn = new DtmfReceiver();
  #tick = 0;
  /** The tick of the last valid RTP packet received (or of the setup), and whether silence was reported. */
  #heardAt = 0;
  #inactiveReported = false;
  #closed = false;
  // Recording: what we sent and what we heard per frame slot (by tick), written RECORD_DELAY ticks later.
  #recorder: Recorder | undefined;
  readonly #sentFrames = new Map<number, Int16Array>();
  readonly #heardFrames = new Map<number, Int16Array>();
  /** Received audio maps onto ticks: slot = anchor + (timestamp - anchorTimestamp) / FRAME. */
  #anchor: { slot: number; timestamp: number; ssrc: number } | undefined;
  /** Listening for the far end's utterances (voice activity), and the tick its last audio came. */
  #listener: VoiceActivity | undefined;
  #listenHeardAt = 0;
  readonly #frame = new Int16Array(FRAME);
  readonly #encoded = new Uint8Array(FRAME);
  /** The room this call's audio is mixed in (mixer.ts): it hears what we receive and adds to what we send. */
  #member: MixMember | undefined;

  private constructor(id: string, host: SessionHost, rtp: dgram.Socket, rtcp: dgram.Socket) {
    this.id = id;
    this.#host = host;
    this.#rtp = rtp;
    this.#rtcp = rtcp;
    this.port = rtp.address().port;
    rtp.on('message', (b, r) => this.#receiveRtp(b, r));
    rtcp.on('message', (b, r) => this.#receiveRtcp(b, r));
    const warn = (e: Error) => host.post({ op: 'warn', id, message: `media socket: ${e.message}` });
    rtp.on('error', warn);
    rtcp.on('error', warn);
  }

  /** Binds an even RTP port and the odd one above it in [min, max] (RFC 3550 §11). */
  static async open(id: string, host: SessionHost, address: string, range: { min: number; max: number; next: number }): Promise<MediaSession> {
    const family = address.includes(':') ? 'udp6' : 'udp4';
    const span = Math.floor((range.max - range.min) / 2);
    for (let attempt = 0; attempt < span; attempt++) {
      const port = range.min + 2 * ((range.next + attempt) % span);
      const rtp = dgram.createSocket({ type: family });
      const rtcp = dgram.createSocket({ type: family });
      try {
        await bind(rtp, port, address);
        await bind(rtcp, port + 1, address);
        range.next = (range.next + attempt + 1) % span;
        return new MediaSession(id, host, rtp, rtcp);
      } catch {
        rtp.close();
        rtcp.close();
      }
    }
    throw new Error(`no free RTP port pair in ${range.min}-${range.max}`);
  }

  setup(s: SessionSetup): void {
    this.#setup = s;
    this.#heardAt = this.#tick;
    this.#inactiveReported = false;
    if (!this.#latched) {
      this.#remote = s.remote;
      this.#remoteRtcp = s.remoteRtcp;
    }
    // Keys crossed the thread boundary as plain byte arrays: Buffers again.
    const key = (k: SrtpKey): SrtpKey => ({ suite: k.suite, key: Buffer.from(k.key), salt: Buffer.from(k.salt) });
    this.#srtpOut = s.srtp ? new SrtpSender(key(s.srtp.send)) : undefined;
    this.#srtpIn = s.srtp ? new SrtpReceiver(key(s.srtp.receive)) : undefined;
  }

  play(playId: number, samples: Int16Array): void {
    const p = { playId, samples, at: 0 };
    if (!this.#playback) this.#playback = p;
    else this.#queue.push(p);
  }

  /** Stops what plays and what is queued; each reports it did not complete. */
  stopPlaying(): void {
    for (const p of [this.#playback, ...this.#queue]) if (p) this.#host.post({ op: 'played', id: this.id, playId: p.playId, completed: false });
    this.#playback = undefined;
    this.#queue.length = 0;
  }

  /** Sends keys as RFC 4733 events (100 ms each, 60 ms apart); resolves when the last is sent. */
  sendDtmf(keys: string): Promise<void> {
    if (!this.#setup?.dtmfPayloadType) return Promise.reject(new Error('the far end takes no telephone-event (RFC 4733) payload'));
    const list = [...keys];
    return new Promise((resolve, reject) => {
      try {
        list.forEach((key, i) => this.#dtmf.push({ steps: dtmfSteps(key), timestamp: undefined, gap: 3, done: i === list.length - 1 ? resolve : () => {} }));
      } catch (e) {
        reject(e);
      }
    });
  }

  /** Puts the call's audio in a room's mix (mixer.ts), or takes it out (undefined). */
  mix(member: MixMember | undefined): void {
    this.#member = member;
  }

  /** One 20 ms tick: send this frame, write what is due to the recording, RTCP now and then. */
  tick(): void {
    if (this.#closed) return;
    this.#tick += 1;
    const setup = this.#setup;
    if (setup && this.#remote) {
      const dtmf = this.#dtmf[0];
      if (dtmf && dtmf.steps.length > 0) {
        this.#sendDtmfStep(dtmf, setup);
        this.#frameSent(undefined);
      } else {
        if (dtmf && dtmf.gap-- <= 0) {
          this.#dtmf.shift();
          dtmf.done();
        }
        this.#sendAudio(setup);
      }
      if (this.#tick % RTCP_EVERY === 0) this.#sendRtcp();
      if (setup.inactivityMs !== undefined && !this.#inactiveReported && (this.#tick - this.#heardAt) * 20 >= setup.inactivityMs) {
        this.#inactiveReported = true;
        this.#host.post({ op: 'inactive', id: this.id, silentMs: (this.#tick - this.#heardAt) * 20 });
      }
    }
    // A far end that stops sending (silence suppression) ends its utterance all the same.
    if (this.#listener?.speaking && this.#tick - this.#listenHeardAt > LISTEN_GAP) this.#hear(new Int16Array(FRAME));
    if (this.#recorder) {
      this.#watchSilence(this.#recorder);
      this.#flushRecording(false);
    }
  }

  /** A recording with a silence watch: reports once when the far end has not spoken for its `ms`. */
  #watchSilence(r: Recorder): void {
    const w = r.silence;
    if (!w || w.reported) return;
    const silentMs = silenceDue(w, this.#tick, r.firstSlot, r.lastVoiced);
    if (silentMs === undefined) return;
    w.reported = true;
    this.#host.post({ op: 'silence', id: this.id, silentMs });
  }

  /** `n` ticks that were skipped: the media clock moves on by them (nothing was sent for them). */
  skip(n: number): void {
    this.#tick += n;
    this.#timestamp = (this.#timestamp + n * FRAME) >>> 0;
  }

  #sendAudio(setup: SessionSetup): void {
    const p = this.#playback;
    const frame = this.#frame;
    const mixed = this.#member?.outgoing();
    if (mixed && !p) {
      frame.set(mixed);
      encodeG711(setup.codec, frame, this.#encoded);
      this.#frameSent(frame);
    } else if (p) {
      const n = Math.min(FRAME, p.samples.length - p.at);
      frame.set(p.samples.subarray(p.at, p.at + n));
      if (n < FRAME) frame.fill(0, n);
      p.at += n;
      if (mixed) for (let i = 0; i < FRAME; i++) frame[i] = Math.max(-32768, Math.min(32767, frame[i]! + mixed[i]!));
      encodeG711(setup.codec, frame, this.#encoded);
      if (p.at >= p.samples.length) {
        this.#host.post({ op: 'played', id: this.id, playId: p.playId, completed: true });
        this.#playback = this.#queue.shift();
      }
      this.#frameSent(frame);
    } else {
      this.#encoded.fill(SILENCE[setup.codec]);
      this.#frameSent(undefined);
    }
    // A new talk spurt after silence would set the marker; a continuous stream sets it once, first.
    this.#send(setup.payloadType, this.#sent === 0, this.#timestamp, Buffer.from(this.#encoded.buffer, this.#encoded.byteOffset, FRAME));
    this.#timestamp = (this.#timestamp + FRAME) >>> 0;
  }

  #sendDtmfStep(d: { steps: DtmfStep[]; timestamp: number | undefined }, setup: SessionSetup): void {
    const step = d.steps.shift()!;
    if (d.timestamp === undefined) d.timestamp = this.#timestamp;
    this.#send(setup.dtmfPayloadType!, step.marker, d.timestamp, step.payload);
    // The media clock runs on while the key lasts; the next audio frame continues from it.
    this.#timestamp = (this.#timestamp + FRAME) >>> 0;
  }

  #send(payloadType: number, marker: boolean, timestamp: number, payload: Buffer): void {
    const packet = buildRtp({ payloadType, marker, sequence: this.#seq, timestamp, ssrc: this.#ssrc, payload });
    this.#seq = (this.#seq + 1) & 0xffff;
    this.#sent += 1;
    this.#octets += payload.length;
    const out = this.#srtpOut ? this.#srtpOut.protectRtp(packet) : packet;
    this.#rtp.send(out, this.#remote!.port, this.#remote!.host);
  }

  #sendRtcp(): void {
    if (!this.#remoteRtcp) return;
    const report = buildRtcpReport({ ssrc: this.#ssrc, nowMs: Date.now(), rtpTimestamp: this.#timestamp, packets: this.#sent, octets: this.#octets }, this.#sent > 0, this.#stats, `media-${this.id}`);
    this.#rtcp.send(this.#srtpOut ? this.#srtpOut.protectRtcp(report) : report, this.#remoteRtcp.port, this.#remoteRtcp.host);
  }

  #receiveRtp(b: Buffer, from: dgram.RemoteInfo): void {
    const setup = this.#setup;
    if (!setup || this.#closed) return;
    if (isRtcp(b)) return this.#receiveRtcp(b, from); // rtcp-mux from a far end that muxes anyway
    const plain = this.#srtpIn ? this.#srtpIn.unprotectRtp(b) : b;
    if (!plain) return;
    const p = parseRtp(plain);
    if (!p) return;
    if (p.payloadType !== setup.payloadType && p.payloadType !== setup.dtmfPayloadType) return;
    if (!this.#latch(from)) return;
    this.#heardAt = this.#tick;
    this.#stats.add(p, Math.round(performance.now() * 8));
    if (p.payloadType === setup.dtmfPayloadType) {
      const key = this.#dtmfIn.receive(p.timestamp, p.payload);
      if (key) this.#host.post({ op: 'dtmf', id: this.id, key });
      return;
    }
    this.#member?.heard(p.timestamp, p.ssrc, decodeG711(setup.codec, p.payload));
    if (this.#listener) {
      this.#listenHeardAt = this.#tick;
      for (let at = 0; at < p.payload.length; at += FRAME) this.#hear(decodeG711(setup.codec, p.payload.subarray(at, at + FRAME), new Int16Array(FRAME)));
    }
    if (!this.#recorder) return;
    if (!this.#anchor || this.#anchor.ssrc !== p.ssrc) this.#anchor = { slot: this.#tick, timestamp: p.timestamp, ssrc: p.ssrc };
    const offset = ((p.timestamp - this.#anchor.timestamp) | 0) / FRAME;
    const first = this.#anchor.slot + Math.round(offset);
    // A packet of more than 20 ms (ptime 30, 40…) fills consecutive slots.
    for (let at = 0, slot = first; at < p.payload.length; at += FRAME, slot++) {
      if (slot < this.#recorder.nextSlot || slot > this.#tick + RECORD_DELAY) continue; // too late for the recording, or nonsense
      const frame = decodeG711(setup.codec, p.payload.subarray(at, at + FRAME), new Int16Array(FRAME));
      this.#heardFrames.set(slot, frame);
      const r = this.#recorder;
      if (r.silence && rms(frame) >= r.silence.rms) {
        r.firstVoiced = Math.min(r.firstVoiced ?? slot, slot);
        r.lastVoiced = Math.max(r.lastVoiced ?? slot, slot);
      }
    }
  }

  /**
   * Symmetric RTP: the first valid packet fixes where the far end is. After that, plain RTP from
   * anywhere else is dropped (no one else can put audio or keys into the call); SRTP that
   * authenticates may move it (the far end's NAT binding changed).
   */
  #latch(from: dgram.RemoteInfo): boolean {
    const same = !!this.#remote && from.address === this.#remote.host && from.port === this.#remote.port;
    if (this.#latched && (same || !this.#srtpIn)) return same;
    this.#latched = true;
    if (same) return true;
    this.#remote = { host: from.address, port: from.port };
    this.#remoteRtcp = { host: from.address, port: from.port + 1 };
    this.#host.post({ op: 'latched', id: this.id, remote: this.#remote });
    return true;
  }

  #receiveRtcp(b: Buffer, from: dgram.RemoteInfo): void {
    if (!this.#setup || this.#closed) return;
    const plain = this.#srtpIn ? this.#srtpIn.unprotectRtcp(b) : b;
    if (!plain || !isRtcp(plain)) return;
    if (this.#latched && this.#remoteRtcp && from.address === this.#remote?.host) this.#remoteRtcp = { host: from.address, port: from.port };
    for (const sr of parseRtcpSenderReports(plain)) {
      this.#stats.lastSrNtpMiddle = sr.ntpMiddle;
      this.#stats.lastSrAt = Date.now();
    }
  }

  #frameSent(frame: Int16Array | undefined): void {
    if (!this.#recorder) return;
    if (frame) this.#sentFrames.set(this.#tick, Int16Array.from(frame));
  }

  /** Listens for the far end's utterances (`voice` when one starts, `utterance` with its audio when it ends); undefined stops. */
  listen(vad: VadOptions | undefined): void {
    this.#listener = vad ? new VoiceActivity(vad) : undefined;
    this.#listenHeardAt = this.#tick;
  }

  #hear(frame: Int16Array): void {
    const e = this.#listener?.frame(frame);
    if (e?.type === 'start') this.#host.post({ op: 'voice', id: this.id });
    else if (e?.type === 'end') this.#host.post({ op: 'utterance', id: this.id, samples: e.samples, silentMs: e.silentMs });
  }

  startRecording(path: string, channels: 1 | 2, silence?: SilenceWatch): void {
    if (this.#recorder) throw new Error('the call is already being recorded');
    this.#recorder = {
      writer: new WavWriter(path, channels), firstSlot: this.#tick + 1, nextSlot: this.#tick + 1, block: new Int16Array(RECORD_BLOCK * FRAME * channels), blockFrames: 0,
      ...(silence ? { silence: { ...silence, reported: false } } : {}),
    };
  }

  async stopRecording(): Promise<RecordingDone | undefined> {
    const r = this.#recorder;
    if (!r) return undefined;
    this.#flushRecording(true);
    this.#recorder = undefined;
    this.#sentFrames.clear();
    this.#heardFrames.clear();
    const done = await r.writer.finish();
    if (r.firstVoiced === undefined || r.lastVoiced === undefined) return done;
    return { ...done, voiced: { from: ((r.firstVoiced - r.firstSlot) * FRAME) / 8000, until: ((r.lastVoiced - r.firstSlot + 1) * FRAME) / 8000 } };
  }

  /**
   * Writes the slots that are due (all of them at the end): mono mixes both directions (clipped),
   * two channels put the far end on the left and the service on the right.
   */
  #flushRecording(all: boolean): void {
    const r = this.#recorder!;
    const until = all ? this.#tick : this.#tick - RECORD_DELAY;
    for (; r.nextSlot <= until; r.nextSlot++) {
      const sent = this.#sentFrames.get(r.nextSlot);
      const heard = this.#heardFrames.get(r.nextSlot);
      this.#sentFrames.delete(r.nextSlot);
      this.#heardFrames.delete(r.nextSlot);
      const base = r.blockFrames * FRAME * r.writer.channels;
      for (let i = 0; i < FRAME; i++) {
        const a = heard?.[i] ?? 0;
        const b = sent?.[i] ?? 0;
        if (r.writer.channels === 1) r.block[base + i] = Math.max(-32768, Math.min(32767, a + b));
        else {
          r.block[base + 2 * i] = a;
          r.block[base + 2 * i + 1] = b;
        }
      }
      r.blockFrames += 1;
      if (r.blockFrames === RECORD_BLOCK) {
        r.writer.append(r.block);
        r.blockFrames = 0;
      }
    }
    if (all && r.blockFrames > 0) {
      r.writer.append(r.block.subarray(0, r.blockFrames * FRAME * r.writer.channels));
      r.blockFrames = 0;
    }
  }

  stats(): SessionStats {
    return { sent: this.#sent, received: this.#stats.received, lost: this.#stats.lost, jitterMs: this.#stats.jitter / 8 };
  }

  async close(): Promise<RecordingDone | undefined> {
    if (this.#closed) return undefined;
    const recording = await this.stopRecording().catch(() => undefined);
    this.stopPlaying();
    this.#listener = undefined;
    for (const d of this.#dtmf) d.done();
    this.#dtmf = [];
    if (this.#remoteRtcp && this.#setup) {
      const bye = Buffer.concat([buildRtcpReport({ ssrc: this.#ssrc, nowMs: Date.now(), rtpTimestamp: this.#timestamp, packets: this.#sent, octets: this.#octets }, this.#sent > 0, this.#stats, `media-${this.id}`), buildRtcpBye(this.#ssrc)]);
      this.#rtcp.send(this.#srtpOut ? this.#srtpOut.protectRtcp(bye) : bye, this.#remoteRtcp.port, this.#remoteRtcp.host);
    }
    this.#closed = true;
    await new Promise<void>((r) => setImmediate(r));
    this.#rtp.close();
    this.#rtcp.close();
    return recording;
  }
}

function bind(socket: dgram.Socket, port: number, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ port, address, exclusive: true }, () => {
      socket.off('error', reject);
      resolve();
    });
  });
}
