import { describe, expect, it } from 'vitest';
import { buildRtcpBye, buildRtcpReport, buildRtp, isRtcp, parseRtcpSenderReports, parseRtp, ReceptionStats } from './rtp.ts';
import { DtmfReceiver, dtmfSteps, parseDtmfPayload } from './dtmf.ts';
import { decodeG711, encodeG711, SILENCE } from './g711.ts';

describe('RTP packets', () => {
  it('builds the RFC 3550 fixed header and reads it back', () => {
    const p = buildRtp({ payloadType: 8, marker: true, sequence: 65535, timestamp: 0xfffffff0, ssrc: 0xdeadbeef, payload: Buffer.from([1, 2, 3]) });
    expect([...p.subarray(0, 12)]).toEqual([0x80, 0x88, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, 0xde, 0xad, 0xbe, 0xef]);
    expect(parseRtp(p)).toMatchObject({ payloadType: 8, marker: true, sequence: 65535, timestamp: 0xfffffff0, ssrc: 0xdeadbeef });
  });

  it('skips CSRCs and a header extension, drops padding; refuses RTCP and other versions', () => {
    const header = Buffer.from([0xb1, 0x00, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]); // V=2, P, X, CC=1
    const csrc = Buffer.alloc(4, 9);
    const ext = Buffer.from([0xbe, 0xde, 0, 1, 1, 2, 3, 4]);
    const packet = Buffer.concat([header, csrc, ext, Buffer.from([7, 7, 0, 0, 3])]); // payload 7 7, padding of 3
    expect([...parseRtp(packet)!.payload]).toEqual([7, 7]);
    expect(parseRtp(buildRtcpBye(5))).toBeUndefined();
    expect(parseRtp(Buffer.from([0x40, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]))).toBeUndefined();
    expect(isRtcp(buildRtcpBye(5))).toBe(true);
  });

  it('counts received and lost packets across a sequence wrap (RFC 3550 A.3)', () => {
    const s = new ReceptionStats();
    const seqs = [65533, 65534, 0, 2, 3]; // 65535 and 1 lost
    seqs.forEach((sequence, i) => s.add({ payloadType: 0, marker: false, sequence, timestamp: i * 160, ssrc: 1, payload: Buffer.alloc(0) }, i * 160));
    expect(s.expected).toBe(7);
    expect(s.received).toBe(5);
    expect(s.lost).toBe(2);
    expect(s.interval()).toEqual({ fraction: Math.floor((2 << 8) / 7), cumulative: 2 });
  });

  it('an RTCP sender report carries our counts and a report block for the far end; its NTP middle is readable', () => {
    const remote = new ReceptionStats();
    remote.add({ payloadType: 0, marker: false, sequence: 10, timestamp: 0, ssrc: 77, payload: Buffer.alloc(0) }, 0);
    const r = buildRtcpReport({ ssrc: 42, nowMs: Date.UTC(2024, 0, 1), rtpTimestamp: 1600, packets: 10, octets: 1600 }, true, remote, 'me');
    expect(r[0]).toBe(0x81);
    expect(r[1]).toBe(200);
    const length = (r.readUInt16BE(2) + 1) * 4;
    expect(length).toBe(52);
    expect(r.readUInt32BE(20)).toBe(10);
    expect(r.readUInt32BE(28)).toBe(77); // report block's source
    expect(r[length + 1]).toBe(202); // SDES follows
    expect(parseRtcpSenderReports(r)).toEqual([{ ssrc: 42, ntpMiddle: ((r.readUInt32BE(8) & 0xffff) << 16 | (r.readUInt32BE(12) >>> 16)) >>> 0 }]);
  });
});

describe('G.711', () => {
  it('encodes silence as 0xFF (µ-law) and 0xD5 (A-law), and round-trips within the codec step', () => {
    expect(SILENCE).toEqual({ PCMU: 0xff, PCMA: 0xd5 });
    const pcm = Int16Array.from([0, 1000, -1000, 12000, -30000]);
    for (const codec of ['PCMU', 'PCMA'] as const) {
      const back = decodeG711(codec, encodeG711(codec, pcm));
      pcm.forEach((v, i) => expect(Math.abs(back[i]! - v)).toBeLessThanOrEqual(Math.max(16, Math.abs(v) / 16)));
    }
  });
});

describe('RFC 4733 key events', () => {
  it('a key is frames of growing duration (the first marked), then its end packet three times', () => {
    const steps = dtmfSteps('5', 100);
    expect(steps).toHaveLength(5 + 2);
    expect(steps.map((s) => s.marker)).toEqual([true, false, false, false, false, false, false]);
    expect(steps.map((s) => parseDtmfPayload(s.payload))).toEqual([
      ...[1, 2, 3, 4].map((i) => ({ event: 5, end: false, volume: 10, duration: 160 * i })),
      ...[1, 2, 3].map(() => ({ event: 5, end: true, volume: 10, duration: 800 })),
    ]);
    expect(parseDtmfPayload(dtmfSteps('#')[0]!.payload)!.event).toBe(11);
    expect(parseDtmfPayload(dtmfSteps('d')[0]!.payload)!.event).toBe(15);
    expect(() => dtmfSteps('x')).toThrow(RangeError);
  });

  it('the receiver reports each key once (by event timestamp), the same key again when pressed again', () => {
    const r = new DtmfReceiver();
    const got: string[] = [];
    const feed = (ts: number, key: string) => { for (const s of dtmfSteps(key)) { const k = r.receive(ts, s.payload); if (k) got.push(k); } };
    feed(1000, '1');
    feed(3000, '1');
    feed(5000, '*');
    // A lost start: only the end packets arrive.
    for (const s of dtmfSteps('9').slice(-3)) { const k = r.receive(7000, s.payload); if (k) got.push(k); }
    expect(got).toEqual(['1', '1', '*', '9']);
    expect(r.receive(9000, Buffer.from([16, 0, 0, 160]))).toBeUndefined(); // flash: no key
  });
});
