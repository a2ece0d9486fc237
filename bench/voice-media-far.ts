/**
 * The far ends of the media bench (a child process of bench/voice-media.ts, driven over IPC): one
 * UDP socket per call that sends a µ-law tone every 20 ms (one clock for all, absolute time) and
 * notes when each packet from the service arrives and its sequence number. Its report: how far
 * the intervals between consecutive packets strayed from 20 ms, and how many packets never came.
 */
import dgram from 'node:dgram';

type Stream = { socket: dgram.Socket; target: number | undefined; seq: number; ts: number; ssrc: number; arrivals: Float64Array; seqs: Int32Array; count: number; payloadTypes: Set<number>; sizes: Set<number> };
const streams: Stream[] = [];
let capacity = 0;
let measuring = false;
let timer: NodeJS.Timeout | undefined;
let sendStart = 0;
let sendTicks = 0;
/** How late this process's own 20 ms clock fired while measuring: the machine's scheduling noise, beside the engines' figures. */
const clockLate: number[] = [];

// A 440 Hz tone in µ-law, 50 frames (one second) reused.
const frames: Buffer[] = [];
for (let f = 0; f < 50; f++) {
  const b = Buffer.alloc(172);
  for (let i = 0; i < 160; i++) b[12 + i] = mulaw(Math.round(6000 * Math.sin((2 * Math.PI * 440 * (f * 160 + i)) / 8000)));
  frames.push(b);
}

function mulaw(sample: number): number {
  const BIAS = 0x84;
  const sign = sample < 0 ? 0x80 : 0;
  let s = Math.min(32635, Math.abs(sample)) + BIAS;
  let exponent = 7;
  for (let mask = 0x4000; (s & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
  const mantissa = (s >> (exponent + 3)) & 0x0f;
  s = ~(sign | (exponent << 4) | mantissa);
  return s & 0xff;
}

function tick(): void {
  timer = undefined;
  const now = performance.now();
  if (measuring) clockLate.push(now - (sendStart + (sendTicks + 1) * 20));
  while (sendStart + (sendTicks + 1) * 20 <= now + 0.5) {
    sendTicks += 1;
    const frame = frames[sendTicks % 50]!;
    for (const s of streams) {
      if (s.target === undefined) continue;
      frame[0] = 0x80;
      frame[1] = 0;
      frame.writeUInt16BE(s.seq, 2);
      frame.writeUInt32BE(s.ts >>> 0, 4);
      frame.writeUInt32BE(s.ssrc, 8);
      s.socket.send(frame, s.target, '127.0.0.1');
      s.seq = (s.seq + 1) & 0xffff;
      s.ts = (s.ts + 160) >>> 0;
    }
  }
  timer = setTimeout(tick, Math.max(0, sendStart + (sendTicks + 1) * 20 - performance.now()));
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! : NaN;
}

function report(): object {
  const deviations: number[] = [];
  let received = 0;
  let lost = 0;
  let streamsHeard = 0;
  const payloadTypes = new Set<number>();
  const sizes = new Set<number>();
  for (const s of streams) {
    if (s.count === 0) continue;
    streamsHeard += 1;
    s.payloadTypes.forEach((p) => payloadTypes.add(p));
    s.sizes.forEach((p) => sizes.add(p));
    received += s.count;
    // Unwrapped sequence numbers: expected = highest - lowest + 1.
    let base = s.seqs[0]!;
    let max = base;
    let min = base;
    let cycles = 0;
    let prev = base;
    const seen = new Set<number>();
    for (let i = 0; i < s.count; i++) {
      let q = s.seqs[i]! + cycles;
      if (q - prev < -0x8000) { cycles += 0x10000; q += 0x10000; } else if (q - prev > 0x8000) q -= 0x10000;
      seen.add(q);
      if (q > max) max = q;
      if (q < min) min = q;
      if (i > 0 && q === prev + 1) deviations.push(Math.abs(s.arrivals[i]! - s.arrivals[i - 1]! - 20));
      prev = q;
    }
    base = min;
    lost += max - base + 1 - seen.size;
  }
  const sorted = Float64Array.from(deviations).sort();
  const late = Float64Array.from(clockLate).sort();
  return { clockLateP99: percentile(late, 0.99), streams: streams.length, streamsHeard, received, lost, intervals: sorted.length, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), p999: percentile(sorted, 0.999), max: sorted.length ? sorted[sorted.length - 1] : NaN, payloadTypes: [...payloadTypes], payloadBytes: [...sizes].slice(0, 8) };
}

process.on('message', async (m: { op: string; count?: number; seconds?: number; targets?: (number | null)[] }) => {
  if (m.op === 'open') {
    capacity = Math.ceil((m.seconds ?? 60) * 50 * 1.2) + 200;
    for (let i = 0; i < m.count!; i++) {
      const socket = dgram.createSocket('udp4');
      socket.on('error', () => {});
      await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
      const s: Stream = { socket, target: undefined, seq: (Math.random() * 0xffff) | 0, ts: (Math.random() * 0xffffffff) >>> 0, ssrc: (Math.random() * 0xffffffff) >>> 0, arrivals: new Float64Array(capacity), seqs: new Int32Array(capacity), count: 0, payloadTypes: new Set(), sizes: new Set() };
      socket.on('message', (b) => {
        if (!measuring || b.length < 12 || (b[1]! >= 200 && b[1]! <= 204)) return;
        if (s.count >= capacity) return;
        const pt = b[1]! & 0x7f;
        if (pt === 101 || pt === 96) return; // key events: not audio pacing
        s.payloadTypes.add(pt);
        s.sizes.add(b.length - 12);
        s.arrivals[s.count] = performance.now();
        s.seqs[s.count] = b.readUInt16BE(2);
        s.count += 1;
      });
      streams.push(s);
    }
    process.send!({ op: 'opened', ports: streams.map((s) => s.socket.address().port) });
  } else if (m.op === 'send') {
    m.targets!.forEach((t, i) => { streams[i]!.target = t ?? undefined; });
    if (!timer) {
      sendStart = performance.now();
      sendTicks = 0;
      timer = setTimeout(tick, 20);
    }
    process.send!({ op: 'sending' });
  } else if (m.op === 'measure') {
    for (const s of streams) { s.count = 0; s.payloadTypes.clear(); s.sizes.clear(); }
    clockLate.length = 0;
    measuring = true;
    process.send!({ op: 'measuring' });
  } else if (m.op === 'report') {
    measuring = false;
    process.send!({ op: 'report', report: report() });
  } else if (m.op === 'stop') {
    if (timer) clearTimeout(timer);
    for (const s of streams) s.socket.close();
    process.send!({ op: 'stopped' });
    process.exit(0);
  }
});
