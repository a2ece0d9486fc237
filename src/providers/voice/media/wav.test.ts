import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { decodeWav, encodeWav, WavError, WavWriter, wavHeader } from './wav.ts';
import { encodeG711 } from './g711.ts';
import { goertzel, tone } from '../../../../test/helpers/audio.ts';

/** A WAV file of raw sample bytes with the given format fields. */
function wav(tag: number, channels: number, rate: number, bits: number, data: Buffer): Buffer {
  const h = wavHeader(1, data.length);
  h.writeUInt16LE(tag, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt16LE(bits, 34);
  return Buffer.concat([h, data]);
}

describe('WAV prompts', () => {
  it('reads 16-bit 8 kHz mono as it is', () => {
    const t = tone(1000, 0.1);
    expect([...decodeWav(encodeWav(t))]).toEqual([...t]);
  });

  it('resamples 22.05 kHz speech-rate audio to 8 kHz keeping the tone, and drops what 8 kHz cannot carry', () => {
    const rate = 22050;
    const mixed = new Int16Array(rate);
    for (let i = 0; i < mixed.length; i++) mixed[i] = Math.round(6000 * Math.sin((2 * Math.PI * 1000 * i) / rate) + 6000 * Math.sin((2 * Math.PI * 6000 * i) / rate));
    const out = decodeWav(encodeWav(mixed, 1, rate));
    expect(out.length).toBe(8000);
    expect(goertzel(out.subarray(400, 7600), 1000)).toBeGreaterThan(0.4);
    // 6 kHz would fold back to 2 kHz without the low-pass filter.
    expect(goertzel(out.subarray(400, 7600), 2000)).toBeLessThan(0.01);
  });

  it('reads 8-bit unsigned, µ-law, float and stereo (mixed down) files', () => {
    const t = tone(440, 0.1, 12000);
    const u8 = Buffer.from(Array.from(t, (v) => (v >> 8) + 128));
    const fl = Buffer.alloc(t.length * 4);
    t.forEach((v, i) => fl.writeFloatLE(v / 32768, i * 4));
    const stereo = Buffer.alloc(t.length * 4);
    t.forEach((v, i) => { stereo.writeInt16LE(v, i * 4); stereo.writeInt16LE(0, i * 4 + 2); });
    for (const [file, tolerance] of [
      [wav(1, 1, 8000, 8, u8), 300], [wav(7, 1, 8000, 8, Buffer.from(encodeG711('PCMU', t))), 400], [wav(3, 1, 8000, 32, fl), 1],
    ] as const) {
      const back = decodeWav(file);
      back.forEach((v, i) => expect(Math.abs(v - t[i]!)).toBeLessThanOrEqual(tolerance));
    }
    const mixed = decodeWav(wav(1, 2, 8000, 16, stereo));
    mixed.forEach((v, i) => expect(Math.abs(v - t[i]! / 2)).toBeLessThanOrEqual(1));
  });

  it('refuses what is not a WAV file or an encoding it cannot read', () => {
    expect(() => decodeWav(Buffer.from('ID3 an mp3'))).toThrow(WavError);
    expect(() => decodeWav(wav(2, 1, 8000, 4, Buffer.alloc(10)))).toThrow(/unsupported WAV/);
  });

  it('a recording written block by block gets its sizes in the header at the end', async () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'wav-')), 'r.wav');
    const w = new WavWriter(file, 2);
    w.append(Int16Array.from([1, 2, 3, 4]));
    w.append(Int16Array.from([5, 6]));
    expect(await w.finish()).toEqual({ path: file, seconds: 3 / 8000, channels: 2, bytes: 56 });
    const b = readFileSync(file);
    expect(b.readUInt32LE(40)).toBe(12);
    expect(b.readUInt16LE(22)).toBe(2);
    expect([...new Int16Array(b.buffer.slice(b.byteOffset + 44, b.byteOffset + 56))]).toEqual([1, 2, 3, 4, 5, 6]);
  });
});
