/**
 * SRTP and SRTCP (RFC 3711) with the SDES suites AES_CM_128_HMAC_SHA1_80 and _32 (RFC 4568 §6.2):
 * AES-128 in counter mode for the payload, HMAC-SHA1 over the packet and its rollover counter.
 * Session keys come from the master key and salt by the key derivation of §4.3 (key derivation
 * rate 0). One context protects what one side sends, or checks and opens what it receives (with
 * rollover-counter estimation, §3.3.1, and a 64-packet replay window, §3.3.2).
 */
import { createCipheriv, createHmac, randomBytes, timingSafeEqual, type Cipheriv } from 'node:crypto';

export type SrtpSuite = 'AES_CM_128_HMAC_SHA1_80' | 'AES_CM_128_HMAC_SHA1_32';
export const SRTP_SUITES: readonly SrtpSuite[] = ['AES_CM_128_HMAC_SHA1_80', 'AES_CM_128_HMAC_SHA1_32'];

/** A master key (16 bytes) and salt (14 bytes), as one SDES inline key carries them. */
export type SrtpKey = { suite: SrtpSuite; key: Buffer; salt: Buffer };

export class SrtpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SrtpError';
  }
}

export function newSrtpKey(suite: SrtpSuite): SrtpKey {
  return { suite, key: randomBytes(16), salt: randomBytes(14) };
}

/** AES-CM keystream generation by encrypting counter blocks with one reusable ECB cipher. */
class AesCm {
  readonly #ecb: Cipheriv;
  #counters = Buffer.alloc(0);

  constructor(key: Buffer) {
    this.#ecb = createCipheriv('aes-128-ecb', key, null);
    this.#ecb.setAutoPadding(false);
  }

  /** XORs `data` in place with the keystream that starts at `iv` (16 bytes, the last two the block counter). */
  apply(iv: Buffer, data: Buffer): void {
    const blocks = Math.ceil(data.length / 16);
    if (this.#counters.length < blocks * 16) this.#counters = Buffer.alloc(blocks * 16);
    const counters = this.#counters.subarray(0, blocks * 16);
    for (let b = 0; b < blocks; b++) {
      iv.copy(counters, b * 16, 0, 14);
      counters.writeUInt16BE((iv.readUInt16BE(14) + b) & 0xffff, b * 16 + 14);
    }
    const stream = this.#ecb.update(counters);
    for (let i = 0; i < data.length; i++) data[i]! ^= stream[i]!;
  }
}

/** The session key of `label` and `length` bytes (§4.3.1 with key derivation rate 0, §4.3.3 PRF). */
export function deriveKey(master: SrtpKey, label: number, length: number): Buffer {
  const x = Buffer.alloc(16);
  master.salt.copy(x, 0, 0, 14);
  x[7]! ^= label; // key_id = label || index/kdr (0), right-aligned under the 112-bit salt
  const out = Buffer.alloc(Math.ceil(length / 16) * 16);
  new AesCm(master.key).apply(x, out);
  return out.subarray(0, length);
}

type SessionKeys = { cipher: AesCm; auth: Buffer; salt: Buffer };

function sessionKeys(master: SrtpKey, rtcp: boolean): SessionKeys {
  const base = rtcp ? 3 : 0;
  return { cipher: new AesCm(deriveKey(master, base, 16)), auth: deriveKey(master, base + 1, 20), salt: deriveKey(master, base + 2, 14) };
}

function iv(salt: Buffer, ssrc: number, index: number): Buffer {
  const v = Buffer.alloc(16);
  salt.copy(v, 0, 0, 14);
  v.writeUInt32BE((v.readUInt32BE(4) ^ ssrc) >>> 0, 4);
  const high = Math.floor(index / 0x1_0000_0000); // index < 2^48
  v.writeUInt16BE((v.readUInt16BE(8) ^ high) & 0xffff, 8);
  v.writeUInt32BE((v.readUInt32BE(10) ^ (index >>> 0)) >>> 0, 10);
  return v;
}

function rtpHeaderLength(p: Buffer): number {
  let at = 12 + 4 * (p[0]! & 0x0f);
  if (p[0]! & 0x10) at += 4 + 4 * p.readUInt16BE(at + 2);
  return at;
}

/** A 64-packet replay window over indexes (§3.3.2). */
class ReplayWindow {
  #top = -1;
  #bits = 0n;

  check(index: number): boolean {
    if (this.#top < 0 || index > this.#top) return true;
    const age = this.#top - index;
    return age < 64 && ((this.#bits >> BigInt(age)) & 1n) === 0n;
  }

  add(index: number): void {
    if (index > this.#top) {
      const shift = this.#top < 0 ? 64 : index - this.#top;
      this.#bits = shift >= 64 ? 1n : ((this.#bits << BigInt(shift)) | 1n) & 0xffff_ffff_ffff_ffffn;
      this.#top = index;
    } else {
      this.#bits |= 1n << BigInt(this.#top - index);
    }
  }
}

/** Protects the RTP and RTCP we send with one master key. */
export class SrtpSender {
  readonly #rtp: SessionKeys;
  readonly #rtcp: SessionKeys;
  readonly #tag: number;
  /** Per SSRC: rollover counter and last sequence number sent. */
  readonly #roc = new Map<number, { roc: number; last: number }>();
  #rtcpIndex = 0;

  constructor(master: SrtpKey) {
    this.#rtp = sessionKeys(master, false);
    this.#rtcp = sessionKeys(master, true);
    this.#tag = master.suite === 'AES_CM_128_HMAC_SHA1_80' ? 10 : 4;
  }

  protectRtp(packet: Buffer): Buffer {
    const ssrc = packet.readUInt32BE(8);
    const seq = packet.readUInt16BE(2);
    let state = this.#roc.get(ssrc);
    if (!state) this.#roc.set(ssrc, (state = { roc: 0, last: seq }));
    else if (seq < state.last && state.last - seq > 0x8000) state.roc += 1;
    state.last = seq;
    const header = rtpHeaderLength(packet);
    const out = Buffer.allocUnsafe(packet.length + this.#tag);
    packet.copy(out);
    this.#rtp.cipher.apply(iv(this.#rtp.salt, ssrc, state.roc * 0x10000 + seq), out.subarray(header, packet.length));
    const mac = createHmac('sha1', this.#rtp.auth).update(out.subarray(0, packet.length));
    const roc = Buffer.allocUnsafe(4);
    roc.writeUInt32BE(state.roc >>> 0);
    mac.update(roc).digest().copy(out, packet.length, 0, this.#tag);
    return out;
  }

  /** SRTCP (§3.4): the part after the first SSRC encrypted, E flag and index, an 80-bit tag for both suites. */
  protectRtcp(packet: Buffer): Buffer {
    const index = this.#rtcpIndex;
    this.#rtcpIndex = (this.#rtcpIndex + 1) & 0x7fffffff;
    const out = Buffer.allocUnsafe(packet.length + 4 + 10);
    packet.copy(out);
    this.#rtcp.cipher.apply(iv(this.#rtcp.salt, packet.readUInt32BE(4), index), out.subarray(8, packet.length));
    out.writeUInt32BE((0x80000000 | index) >>> 0, packet.length);
    createHmac('sha1', this.#rtcp.auth).update(out.subarray(0, packet.length + 4)).digest().copy(out, packet.length + 4, 0, 10);
    return out;
  }
}

/** Checks and opens the SRTP and SRTCP the far end sends with its master key. */
export class SrtpReceiver {
  readonly #rtp: SessionKeys;
  readonly #rtcp: SessionKeys;
  readonly #tag: number;
  readonly #sources = new Map<number, { roc: number; highest: number; window: ReplayWindow }>();
  readonly #rtcpWindow = new ReplayWindow();

  constructor(master: SrtpKey) {
    this.#rtp = sessionKeys(master, false);
    this.#rtcp = sessionKeys(master, true);
    this.#tag = master.suite === 'AES_CM_128_HMAC_SHA1_80' ? 10 : 4;
  }

  /** The plain RTP packet, or undefined for one that fails authentication or is replayed. */
  unprotectRtp(packet: Buffer): Buffer | undefined {
    if (packet.length < 12 + this.#tag) return undefined;
    const body = packet.length - this.#tag;
    const ssrc = packet.readUInt32BE(8);
    const seq = packet.readUInt16BE(2);
    const source = this.#sources.get(ssrc);
    // Estimate the rollover counter from the highest sequence number seen (Appendix A).
    let roc = source?.roc ?? 0;
    if (source) {
      const s = source.highest;
      if (s < 0x8000) { if (seq - s > 0x8000) roc = source.roc - 1; } else if (s - 0x8000 > seq) roc = source.roc + 1;
    }
    if (roc < 0) return undefined;
    const index = roc * 0x10000 + seq;
    if (source && !source.window.check(index)) return undefined;
    const rocBytes = Buffer.allocUnsafe(4);
    rocBytes.writeUInt32BE(roc >>> 0);
    const mac = createHmac('sha1', this.#rtp.auth).update(packet.subarray(0, body)).update(rocBytes).digest().subarray(0, this.#tag);
    if (!timingSafeEqual(mac, packet.subarray(body))) return undefined;
    const out = Buffer.from(packet.subarray(0, body));
    const header = rtpHeaderLength(out);
    if (header > out.length) return undefined;
    this.#rtp.cipher.apply(iv(this.#rtp.salt, ssrc, index), out.subarray(header));
    const state = source ?? { roc, highest: seq, window: new ReplayWindow() };
    if (!source) this.#sources.set(ssrc, state);
    else if (index > state.roc * 0x10000 + state.highest) { state.roc = roc; state.highest = seq; }
    state.window.add(index);
    return out;
  }

  unprotectRtcp(packet: Buffer): Buffer | undefined {
    if (packet.length < 8 + 4 + 10) return undefined;
    const body = packet.length - 14;
    const mac = createHmac('sha1', this.#rtcp.auth).update(packet.subarray(0, body + 4)).digest().subarray(0, 10);
    if (!timingSafeEqual(mac, packet.subarray(body + 4))) return undefined;
    const word = packet.readUInt32BE(body);
    const index = word & 0x7fffffff;
    if (!this.#rtcpWindow.check(index)) return undefined;
    this.#rtcpWindow.add(index);
    const out = Buffer.from(packet.subarray(0, body));
    if (word & 0x80000000) this.#rtcp.cipher.apply(iv(this.#rtcp.salt, out.readUInt32BE(4), index), out.subarray(8));
    return out;
  }
}
