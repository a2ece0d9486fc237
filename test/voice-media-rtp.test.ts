/**
 * The media engine's packets as a far end sees them on the wire (a plain UDP socket, read with the
 * RFC's field layout, not the engine's parser): the audio stream's sequence numbers, timestamps and
 * marker; a key sent as RFC 4733 events; a key received reported once; symmetric RTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import dgram from 'node:dgram';
import { RtpEngine, type RtpLeg } from '../src/providers/voice/media/engine.ts';
import { tone } from './helpers/audio.ts';
import { eventually } from './helpers/assertions.ts';

type Seen = { pt: number; marker: boolean; seq: number; ts: number; ssrc: number; payload: Buffer };
let engine: RtpEngine;
let far: dgram.Socket;
const seen: Seen[] = [];

beforeAll(async () => {
  const portMin = 48000 + 2 * Math.floor(Math.random() * 500);
  engine = new RtpEngine({ portMin, portMax: portMin + 50 });
  far = dgram.createSocket('udp4');
  far.on('message', (b) => {
    if (b[1]! >= 200 && b[1]! <= 204) return; // RTCP
    seen.push({ pt: b[1]! & 0x7f, marker: (b[1]! & 0x80) !== 0, seq: b.readUInt16BE(2), ts: b.readUInt32BE(4), ssrc: b.readUInt32BE(8), payload: b.subarray(12) });
  });
  await new Promise<void>((r) => far.bind(0, '127.0.0.1', () => r()));
});

afterAll(async () => {
  far.close();
  await engine.close();
});

const until = (what: string, check: () => boolean, ms = 8000): Promise<unknown> => eventually(what, () => check() || undefined, ms, 20);

describe('the media engine on the wire', () => {
  let leg: RtpLeg;

  it('sends one 20 ms frame per tick: consecutive sequence numbers, timestamps in steps of 160, one SSRC, the marker on the first', async () => {
    leg = await engine.open('wire', '127.0.0.1');
    await leg.setup({ remote: { host: '127.0.0.1', port: far.address().port }, remoteRtcp: { host: '127.0.0.1', port: far.address().port + 1 }, codec: 'PCMA', payloadType: 8, dtmfPayloadType: 101 });
    const played = leg.play(new Int16Array(tone(440, 0.2)));
    expect(await played).toEqual({ completed: true });
    await until('30 frames', () => seen.length >= 30);
    const audio = seen.filter((p) => p.pt === 8);
    expect(audio[0]!.marker).toBe(true);
    expect(audio.slice(1).every((p) => !p.marker)).toBe(true);
    expect(new Set(audio.map((p) => p.ssrc)).size).toBe(1);
    for (let i = 1; i < audio.length; i++) {
      expect((audio[i]!.seq - audio[i - 1]!.seq) & 0xffff).toBe(1);
      // 160 a frame; more only where a starved clock skipped ticks (the media clock keeps to the wall clock).
      const step = (audio[i]!.ts - audio[i - 1]!.ts) >>> 0;
      expect(step % 160 === 0 && step >= 160 && step < 160 * 1000).toBe(true);
      expect(audio[i]!.payload.length).toBe(160);
    }
  });

  it('a key goes out as RFC 4733 events on the audio stream: one timestamp, growing duration, end three times', async () => {
    seen.length = 0;
    await leg.sendDtmf('3');
    await until('the key and audio after it', () => seen.filter((p) => p.pt === 8).length > 5 && seen.some((p) => p.pt === 101));
    const first = seen.findIndex((p) => p.pt === 101);
    const events = seen.filter((p) => p.pt === 101);
    expect(events).toHaveLength(7);
    expect(events[0]!.marker).toBe(true);
    expect(new Set(events.map((p) => p.ts)).size).toBe(1);
    expect(events.map((p) => p.payload[0])).toEqual(Array(7).fill(3));
    expect(events.map((p) => (p.payload[1]! & 0x80) !== 0)).toEqual([false, false, false, false, true, true, true]);
    expect(events.map((p) => p.payload.readUInt16BE(2))).toEqual([160, 320, 480, 640, 800, 800, 800]);
    // The stream's sequence numbers run on through the key, and the audio after it continues the clock.
    const around = seen.slice(Math.max(0, first - 1));
    for (let i = 1; i < around.length; i++) expect((around[i]!.seq - around[i - 1]!.seq) & 0xffff).toBe(1);
    const after = around.find((p, i) => i > 0 && p.pt === 8 && around[i - 1]!.pt === 101) ?? seen.filter((p) => p.pt === 8).at(-1)!;
    expect((after.ts - events[0]!.ts) >>> 0).toBeGreaterThanOrEqual(800);
  });

  it('keys the far end sends are reported once each; media follows the far end to where it sends from, and takes plain RTP from there only (symmetric RTP)', async () => {
    const keys: string[] = [];
    leg.onKey((k) => keys.push(k));
    const other = dgram.createSocket('udp4');
    await new Promise<void>((r) => other.bind(0, '127.0.0.1', () => r()));
    const heardAtOther: number[] = [];
    other.on('message', (b) => { if (b[1]! < 200) heardAtOther.push(b.readUInt16BE(2)); });
    try {
      const event = (seq: number, key: number, end: boolean, duration: number) => {
        const b = Buffer.alloc(16);
        b[0] = 0x80; b[1] = (seq === 1 ? 0x80 : 0) | 101; b.writeUInt16BE(seq, 2); b.writeUInt32BE(8000, 4); b.writeUInt32BE(0xabc, 8);
        b[12] = key; b[13] = end ? 0x8a : 0x0a; b.writeUInt16BE(duration, 14);
        return b;
      };
      // Key 9 from a new address: three progress packets and the end three times.
      for (const [seq, end, d] of [[1, false, 160], [2, false, 320], [3, false, 480], [4, true, 640], [5, true, 640], [6, true, 640]] as const) other.send(event(seq, 9, end, d), leg.port, '127.0.0.1');
      await until('key 9', () => keys.length > 0);
      await until('media at the new address', () => heardAtOther.length > 3);
      // Plain RTP from anywhere else is not the far end any more: its key is not reported.
      far.send(event(7, 4, false, 160), leg.port, '127.0.0.1');
      other.send(event(8, 6, true, 160), leg.port, '127.0.0.1');
      await until('key 6', () => keys.includes('6'));
      await new Promise((r) => setTimeout(r, 200));
      expect(keys).toEqual(['9', '6']);
    } finally {
      other.close();
    }
  });

  it('records the call: the mono mix holds what it sent, written when the recording stops', async () => {
    const path = `${process.env.TMPDIR ?? '/tmp'}/engine-wire-${process.pid}.wav`;
    await leg.startRecording(path, 1);
    await leg.play(new Int16Array(tone(1000, 0.5)));
    const done = await leg.stopRecording();
    expect(done).toMatchObject({ path, channels: 1 });
    expect(done!.seconds).toBeGreaterThanOrEqual(0.5);
    const closed = await leg.close();
    expect(closed.stats!.sent).toBeGreaterThan(50);
  });
});
