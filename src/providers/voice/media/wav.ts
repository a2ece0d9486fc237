/**
 * WAV files: reading a prompt (PCM 8/16/24/32-bit, IEEE float, µ-law or A-law; any rate, mono or
 * more channels) into what a call plays (8 kHz, 16-bit, mono), and writing a recording as it grows
 * (16-bit PCM at 8 kHz, one or two channels; the sizes in the header are filled in at the end).
 */
import { open, type FileHandle } from 'node:fs/promises';
import { decodeG711 } from './g711.ts';

export const RATE = 8000;

export class WavError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WavError';
  }
}

/** The samples of a WAV file as 8 kHz mono 16-bit PCM. */
export function decodeWav(file: Buffer): Int16Array {
  if (file.length < 12 || file.toString('latin1', 0, 4) !== 'RIFF' || file.toString('latin1', 8, 12) !== 'WAVE') throw new WavError('not a WAV file (no RIFF/WAVE header)');
  let format: { tag: number; channels: number; rate: number; bits: number } | undefined;
  let data: Buffer | undefined;
  let at = 12;
  while (at + 8 <= file.length) {
    const id = file.toString('latin1', at, at + 4);
    let size = file.readUInt32LE(at + 4);
    const body = at + 8;
    // A streamed file may say 0 or 0xffffffff for data: take the rest.
    if (id === 'data' && (size === 0 || size === 0xffffffff || body + size > file.length)) size = file.length - body;
    if (id === 'fmt ' && size >= 16) {
      let tag = file.readUInt16LE(body);
      if (tag === 0xfffe && size >= 40) tag = file.readUInt16LE(body + 24); // WAVE_FORMAT_EXTENSIBLE: the sub-format's first two bytes
      format = { tag, channels: file.readUInt16LE(body + 2), rate: file.readUInt32LE(body + 4), bits: file.readUInt16LE(body + 14) };
    } else if (id === 'data') {
      data = file.subarray(body, body + size);
    }
    at = body + size + (size & 1);
  }
  if (!format) throw new WavError('the WAV file has no fmt chunk');
  if (!data) throw new WavError('the WAV file has no data chunk');
  if (format.channels < 1 || format.rate < 1000 || format.rate > 384_000) throw new WavError(`unsupported WAV layout: ${format.channels} channels at ${format.rate} Hz`);
  const samples = toFloatMono(data, format);
  return toInt16(format.rate === RATE ? samples : resample(samples, format.rate, RATE));
}

function toFloatMono(data: Buffer, f: { tag: number; channels: number; bits: number }): Float32Array {
  const width = f.bits / 8;
  const frame = width * f.channels;
  if (!Number.isInteger(width) || width < 1) throw new WavError(`unsupported WAV sample size: ${f.bits} bits`);
  const frames = Math.floor(data.length / frame);
  const out = new Float32Array(frames);
  const read = sampleReader(data, f.tag, f.bits);
  for (let i = 0; i < frames; i++) {
    let sum = 0;
    for (let c = 0; c < f.channels; c++) sum += read(i * frame + c * width);
    out[i] = sum / f.channels;
  }
  return out;
}

/** A reader of one sample at a byte offset, scaled to [-1, 1]. */
function sampleReader(data: Buffer, tag: number, bits: number): (at: number) => number {
  if (tag === 1 && bits === 8) return (at) => (data[at]! - 128) / 128;
  if (tag === 1 && bits === 16) return (at) => data.readInt16LE(at) / 32768;
  if (tag === 1 && bits === 24) return (at) => data.readIntLE(at, 3) / 8_388_608;
  if (tag === 1 && bits === 32) return (at) => data.readInt32LE(at) / 2_147_483_648;
  if (tag === 3 && bits === 32) return (at) => data.readFloatLE(at);
  if (tag === 3 && bits === 64) return (at) => data.readDoubleLE(at);
  if ((tag === 7 || tag === 6) && bits === 8) {
    const table = decodeG711(tag === 7 ? 'PCMU' : 'PCMA', Uint8Array.from({ length: 256 }, (_, i) => i));
    return (at) => table[data[at]!]! / 32768;
  }
  throw new WavError(`unsupported WAV encoding: format ${tag}, ${bits} bits`);
}

function toInt16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = Math.max(-32768, Math.min(32767, Math.round(samples[i]! * 32768)));
  return out;
}

/**
 * Band-limited resampling: each output sample is the input convolved with a Hann-windowed sinc
 * whose cutoff is just under the lower of the two Nyquist frequencies (so 22.05 kHz speech loses
 * what 8 kHz cannot carry instead of folding it back as noise).
 */
export function resample(input: Float32Array, from: number, to: number): Float32Array {
  const ratio = to / from;
  const cutoff = 0.94 * Math.min(1, ratio); // of the input's Nyquist frequency
  const zeroCrossings = 16;
  const half = Math.ceil(zeroCrossings / cutoff);
  const out = new Float32Array(Math.floor(input.length * ratio));
  for (let n = 0; n < out.length; n++) {
    const t = n / ratio;
    const centre = Math.floor(t);
    let sum = 0;
    for (let k = centre - half + 1; k <= centre + half; k++) {
      if (k < 0 || k >= input.length) continue;
      const x = t - k;
      const w = 0.5 + 0.5 * Math.cos((Math.PI * x) / half);
      const arg = Math.PI * cutoff * x;
      sum += input[k]! * (x === 0 ? cutoff : (cutoff * Math.sin(arg)) / arg) * w;
    }
    out[n] = sum;
  }
  return out;
}

/** The 44-byte header of a 16-bit PCM WAV file. */
export function wavHeader(channels: 1 | 2, dataBytes: number, rate = RATE): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8, 'latin1');
  h.write('fmt ', 12, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2 * channels, 28);
  h.writeUInt16LE(2 * channels, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** A whole 16-bit PCM WAV file of interleaved samples. */
export function encodeWav(samples: Int16Array, channels: 1 | 2 = 1, rate = RATE): Buffer {
  const data = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
  return Buffer.concat([wavHeader(channels, data.length, rate), data]);
}

/**
 * A WAV file written as a call goes: blocks appended in order (one write at a time, never blocking
 * the caller), the header's sizes set by `finish`.
 */
export class WavWriter {
  readonly path: string;
  readonly channels: 1 | 2;
  #handle: Promise<FileHandle>;
  #bytes = 0;
  #chain: Promise<unknown>;
  #failed: Error | undefined;

  constructor(path: string, channels: 1 | 2) {
    this.path = path;
    this.channels = channels;
    this.#handle = open(path, 'w');
    this.#chain = this.#handle.then((h) => h.write(wavHeader(channels, 0), 0, 44, 0)).catch((e: Error) => { this.#failed = e; });
  }

  /** Interleaved samples (channels × frames). */
  append(samples: Int16Array): void {
    if (this.#failed) return;
    const copy = Buffer.from(samples.buffer.slice(samples.byteOffset, samples.byteOffset + samples.byteLength));
    const at = 44 + this.#bytes;
    this.#bytes += copy.length;
    this.#chain = this.#chain.then(async () => {
      if (this.#failed) return;
      const h = await this.#handle;
      await h.write(copy, 0, copy.length, at);
    }).catch((e: Error) => { this.#failed = e; });
  }

  get seconds(): number {
    return this.#bytes / (2 * this.channels * RATE);
  }

  async finish(): Promise<{ path: string; seconds: number; channels: 1 | 2; bytes: number }> {
    await this.#chain;
    const h = await this.#handle.catch(() => undefined);
    if (h) {
      if (!this.#failed) await h.write(wavHeader(this.channels, this.#bytes), 0, 44, 0).catch((e: Error) => { this.#failed = e; });
      await h.close().catch(() => {});
    }
    if (this.#failed) throw this.#failed;
    return { path: this.path, seconds: this.seconds, channels: this.channels, bytes: 44 + this.#bytes };
  }
}

/** Seconds of audio a PCM WAV file holds (its data chunk over its byte rate); 0 when it is not one. */
export function wavSeconds(file: Buffer): number {
  if (file.length < 12 || file.toString('latin1', 0, 4) !== 'RIFF' || file.toString('latin1', 8, 12) !== 'WAVE') return 0;
  let byteRate = 0;
  for (let at = 12; at + 8 <= file.length;) {
    const id = file.toString('latin1', at, at + 4);
    const size = file.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 20 <= file.length) byteRate = file.readUInt32LE(at + 16);
    if (id === 'data') return byteRate > 0 ? Math.min(size, file.length - at - 8) / byteRate : 0;
    at += 8 + size + (size % 2);
  }
  return 0;
}
