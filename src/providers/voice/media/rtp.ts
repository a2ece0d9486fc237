/**
 * RTP and RTCP packets (RFC 3550): the fixed RTP header, and the RTCP sender and receiver reports
 * a session sends every few seconds (symmetric RTCP: from the port after the RTP port, to the
 * address the far end's RTCP comes from).
 */

export type RtpPacket = {
  payloadType: number;
  marker: boolean;
  sequence: number;
  timestamp: number;
  ssrc: number;
  payload: Buffer;
};

export const RTP_HEADER = 12;

/** An RTP packet with no CSRCs, extension or padding (what the service sends). */
export function buildRtp(p: RtpPacket): Buffer {
  const out = Buffer.allocUnsafe(RTP_HEADER + p.payload.length);
  out[0] = 0x80;
  out[1] = (p.marker ? 0x80 : 0) | (p.payloadType & 0x7f);
  out.writeUInt16BE(p.sequence & 0xffff, 2);
  out.writeUInt32BE(p.timestamp >>> 0, 4);
  out.writeUInt32BE(p.ssrc >>> 0, 8);
  p.payload.copy(out, RTP_HEADER);
  return out;
}

/**
 * Reads an RTP packet (version 2): skips CSRCs and a header extension, drops padding. Undefined
 * for anything else (an RTCP packet on a muxed port, garbage).
 */
export function parseRtp(b: Buffer): RtpPacket | undefined {
  if (b.length < RTP_HEADER || b[0]! >> 6 !== 2) return undefined;
  const pt = b[1]! & 0x7f;
  if (pt >= 72 && pt <= 76) return undefined; // RTCP on the same port (RFC 5761)
  let offset = RTP_HEADER + 4 * (b[0]! & 0x0f);
  if (b[0]! & 0x10) {
    if (b.length < offset + 4) return undefined;
    offset += 4 + 4 * b.readUInt16BE(offset + 2);
  }
  let end = b.length;
  if (b[0]! & 0x20) end -= b[b.length - 1]!;
  if (end < offset) return undefined;
  return { payloadType: pt, marker: (b[1]! & 0x80) !== 0, sequence: b.readUInt16BE(2), timestamp: b.readUInt32BE(4), ssrc: b.readUInt32BE(8), payload: b.subarray(offset, end) };
}

/** How many packets a receiver expected and got (RFC 3550 A.3), kept per far-end source. */
export class ReceptionStats {
  #base = -1;
  #maxSeq = 0;
  #cycles = 0;
  received = 0;
  #expectedPrior = 0;
  #receivedPrior = 0;
  /** Interarrival jitter in timestamp units (RFC 3550 A.8). */
  jitter = 0;
  #lastTransit: number | undefined;
  lastSrNtpMiddle = 0;
  lastSrAt = 0;
  ssrc = 0;

  /** Counts a packet; `arrival` in timestamp units of the same clock as the packet's timestamp. */
  add(p: RtpPacket, arrival: number): void {
    this.ssrc = p.ssrc;
    if (this.#base < 0) {
      this.#base = p.sequence;
      this.#maxSeq = p.sequence;
    } else {
      const delta = (p.sequence - this.#maxSeq) & 0xffff;
      if (delta < 0x8000) {
        if (p.sequence < this.#maxSeq) this.#cycles += 0x10000;
        this.#maxSeq = p.sequence;
      }
    }
    this.received += 1;
    const transit = arrival - p.timestamp;
    if (this.#lastTransit !== undefined) {
      const d = Math.abs(transit - this.#lastTransit);
      this.jitter += (d - this.jitter) / 16;
    }
    this.#lastTransit = transit;
  }

  get expected(): number {
    return this.#base < 0 ? 0 : this.#cycles + this.#maxSeq - this.#base + 1;
  }

  get lost(): number {
    return Math.max(0, this.expected - this.received);
  }

  get extendedMaxSeq(): number {
    return this.#cycles + this.#maxSeq;
  }

  /** The fraction lost since the last report (0–255) and the cumulative count lost, then resets the interval. */
  interval(): { fraction: number; cumulative: number } {
    const expected = this.expected;
    const expectedInterval = expected - this.#expectedPrior;
    const receivedInterval = this.received - this.#receivedPrior;
    this.#expectedPrior = expected;
    this.#receivedPrior = this.received;
    const lostInterval = expectedInterval - receivedInterval;
    const fraction = expectedInterval <= 0 || lostInterval <= 0 ? 0 : Math.min(255, Math.floor((lostInterval << 8) / expectedInterval));
    return { fraction, cumulative: Math.min(0x7fffff, Math.max(0, expected - this.received)) };
  }
}

/** NTP time (seconds since 1900) of a Unix time in ms, as two 32-bit words. */
export function ntp(ms: number): [number, number] {
  const seconds = Math.floor(ms / 1000) + 2_208_988_800;
  const fraction = Math.floor(((ms % 1000) / 1000) * 0x1_0000_0000);
  return [seconds >>> 0, fraction >>> 0];
}

export type SenderInfo = { ssrc: number; nowMs: number; rtpTimestamp: number; packets: number; octets: number };

/**
 * A compound RTCP packet: a sender report (when we sent since the last one) or a receiver report,
 * with one report block for the far end's source, then an SDES with our CNAME (RFC 3550 §6.1).
 */
export function buildRtcpReport(sender: SenderInfo, sending: boolean, remote: ReceptionStats | undefined, cname: string): Buffer {
  const blocks: Buffer[] = [];
  if (remote && remote.received > 0) {
    const block = Buffer.alloc(24);
    const { fraction, cumulative } = remote.interval();
    block.writeUInt32BE(remote.ssrc >>> 0, 0);
    block[4] = fraction;
    block.writeUIntBE(cumulative, 5, 3);
    block.writeUInt32BE(remote.extendedMaxSeq >>> 0, 8);
    block.writeUInt32BE(Math.round(remote.jitter) >>> 0, 12);
    block.writeUInt32BE(remote.lastSrNtpMiddle >>> 0, 16);
    const dlsr = remote.lastSrAt ? Math.round(((sender.nowMs - remote.lastSrAt) / 1000) * 65536) : 0;
    block.writeUInt32BE(dlsr >>> 0, 20);
    blocks.push(block);
  }
  let report: Buffer;
  if (sending) {
    report = Buffer.alloc(28 + 24 * blocks.length);
    report[0] = 0x80 | blocks.length;
    report[1] = 200;
    const [hi, lo] = ntp(sender.nowMs);
    report.writeUInt32BE(sender.ssrc >>> 0, 4);
    report.writeUInt32BE(hi, 8);
    report.writeUInt32BE(lo, 12);
    report.writeUInt32BE(sender.rtpTimestamp >>> 0, 16);
    report.writeUInt32BE(sender.packets >>> 0, 20);
    report.writeUInt32BE(sender.octets >>> 0, 24);
    blocks.forEach((b, i) => b.copy(report, 28 + 24 * i));
  } else {
    report = Buffer.alloc(8 + 24 * blocks.length);
    report[0] = 0x80 | blocks.length;
    report[1] = 201;
    report.writeUInt32BE(sender.ssrc >>> 0, 4);
    blocks.forEach((b, i) => b.copy(report, 8 + 24 * i));
  }
  report.writeUInt16BE(report.length / 4 - 1, 2);
  // SDES: one chunk, CNAME item, null-terminated and padded to 32 bits.
  const name = Buffer.from(cname, 'utf8').subarray(0, 255);
  const chunkLength = 4 + 2 + name.length + 1;
  const padded = Math.ceil(chunkLength / 4) * 4;
  const sdes = Buffer.alloc(4 + padded);
  sdes[0] = 0x81;
  sdes[1] = 202;
  sdes.writeUInt16BE(sdes.length / 4 - 1, 2);
  sdes.writeUInt32BE(sender.ssrc >>> 0, 4);
  sdes[8] = 1;
  sdes[9] = name.length;
  name.copy(sdes, 10);
  return Buffer.concat([report, sdes]);
}

/** A BYE for our source, sent when the session closes. */
export function buildRtcpBye(ssrc: number): Buffer {
  const b = Buffer.alloc(8);
  b[0] = 0x81;
  b[1] = 203;
  b.writeUInt16BE(1, 2);
  b.writeUInt32BE(ssrc >>> 0, 4);
  return b;
}

/** The sender reports in a compound RTCP packet: who sent it and the middle of its NTP time (for LSR). */
export function parseRtcpSenderReports(b: Buffer): { ssrc: number; ntpMiddle: number }[] {
  const out: { ssrc: number; ntpMiddle: number }[] = [];
  let at = 0;
  while (at + 4 <= b.length) {
    if (b[at]! >> 6 !== 2) break;
    const length = (b.readUInt16BE(at + 2) + 1) * 4;
    if (at + length > b.length) break;
    if (b[at + 1] === 200 && length >= 28) out.push({ ssrc: b.readUInt32BE(at + 4), ntpMiddle: ((b.readUInt32BE(at + 8) & 0xffff) << 16 | (b.readUInt32BE(at + 12) >>> 16)) >>> 0 });
    at += length;
  }
  return out;
}

/** Whether a datagram is RTCP (packet types 200–204 in the second byte, RFC 5761 §4). */
export function isRtcp(b: Buffer): boolean {
  return b.length >= 8 && b[0]! >> 6 === 2 && b[1]! >= 200 && b[1]! <= 204;
}
