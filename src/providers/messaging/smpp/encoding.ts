/**
 * SMS bodies as SMPP short messages: the data_coding (GSM 03.38 default alphabet, 0, or UCS-2, 8),
 * the split into segments and the concatenation of a long message, either by a user data header
 * (UDH, the 8-bit reference information element 00 03 ref total seq; esm_class UDHI) or by the SAR
 * TLVs (sar_msg_ref_num, sar_total_segments, sar_segment_seqnum). A segment holds 160 septets or
 * 140 octets of UCS-2 alone, 153 septets or 134 octets (67 UTF-16 units) once concatenated; an
 * escape pair or a surrogate pair is never split. These are the limits of the messaging module's
 * segment counter, so a message goes out in the number of segments it was counted (and billed) at.
 * Incoming short messages (MO and receipts) are decoded from their data_coding here too.
 */
import { encodeGsm7Char, decodeGsm7 } from './gsm7.ts';

export type SmsEncoding = 'GSM-7' | 'UCS-2';
export const DATA_CODING = { gsm7: 0x00, ia5: 0x01, latin1: 0x03, binary: 0x04, ucs2: 0x08 } as const;

/** Octets one segment carries: alone, and once a concatenated message's segment. */
export const SEGMENT_OCTETS: Record<SmsEncoding, { single: number; multi: number }> = {
  'GSM-7': { single: 160, multi: 153 },
  'UCS-2': { single: 140, multi: 134 },
};

export const ESM_CLASS_UDHI = 0x40;

/** How a long message's segments are tied together. */
export const CONCATENATIONS = ['udh', 'sar'] as const;
export type Concatenation = (typeof CONCATENATIONS)[number];

/** The body's encoding and its characters' encodings, one unit per code point (never split across segments). */
export function encodeUnits(body: string): { encoding: SmsEncoding; units: Buffer[] } {
  const chars = [...body];
  const gsm: Buffer[] = [];
  for (const ch of chars) {
    const septets = encodeGsm7Char(ch);
    if (!septets) {
      return { encoding: 'UCS-2', units: chars.map((c) => Buffer.from(c, 'utf16le').swap16()) };
    }
    gsm.push(Buffer.from(septets));
  }
  return { encoding: 'GSM-7', units: gsm };
}

/** Fills segments greedily with whole units: one segment when everything fits alone, else `multi` octets each. */
export function fillSegments(units: readonly Buffer[], limits: { single: number; multi: number }): Buffer[] {
  let total = 0;
  for (const u of units) total += u.length;
  if (total <= limits.single) return [Buffer.concat(units)];
  const segments: Buffer[] = [];
  let current: Buffer[] = [];
  let used = 0;
  for (const u of units) {
    if (used + u.length > limits.multi) {
      segments.push(Buffer.concat(current));
      current = [];
      used = 0;
    }
    current.push(u);
    used += u.length;
  }
  segments.push(Buffer.concat(current));
  return segments;
}

/** The body's encoding, data_coding and segment payloads (no concatenation header yet). */
export function segmentBody(body: string): { encoding: SmsEncoding; dataCoding: number; payloads: Buffer[] } {
  const { encoding, units } = encodeUnits(body);
  return { encoding, dataCoding: encoding === 'GSM-7' ? DATA_CODING.gsm7 : DATA_CODING.ucs2, payloads: fillSegments(units, SEGMENT_OCTETS[encoding]) };
}

/** One submit_sm's varying fields. */
export type SubmitPart = {
  shortMessage: Buffer;
  esmClass: number;
  /** SAR TLVs, for `sar` concatenation of a long message. */
  sar?: { sar_msg_ref_num: number; sar_total_segments: number; sar_segment_seqnum: number };
};

/**
 * The submit_sm parts of a body. `ref` identifies the concatenated message on the handset: 8 bits
 * in the UDH (taken modulo 256), 16 in SAR. A body of one segment is one part without either.
 */
export function submitParts(body: string, concatenation: Concatenation, ref: number): { encoding: SmsEncoding; dataCoding: number; parts: SubmitPart[] } {
  const { encoding, dataCoding, payloads } = segmentBody(body);
  const total = payloads.length;
  if (total === 1) return { encoding, dataCoding, parts: [{ shortMessage: payloads[0]!, esmClass: 0 }] };
  if (total > 255) throw new Error(`A message of ${total} segments cannot be concatenated (at most 255)`);
  const parts = payloads.map((payload, i): SubmitPart => concatenation === 'udh'
    ? { shortMessage: Buffer.concat([Buffer.from([0x05, 0x00, 0x03, ref & 0xff, total, i + 1]), payload]), esmClass: ESM_CLASS_UDHI }
    : { shortMessage: payload, esmClass: 0, sar: { sar_msg_ref_num: ref & 0xffff, sar_total_segments: total, sar_segment_seqnum: i + 1 } });
  return { encoding, dataCoding, parts };
}

/** A short message's text by its data_coding (the low nibble of the general coding groups; anything unknown as Latin-1). */
export function decodeText(dataCoding: number, bytes: Uint8Array): string {
  const coding = (dataCoding & 0xf0) === 0xf0 ? ((dataCoding & 0x04) ? DATA_CODING.binary : DATA_CODING.gsm7) : dataCoding & 0x0f;
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (coding) {
    case DATA_CODING.gsm7: return decodeGsm7(buf);
    case DATA_CODING.ia5: return buf.toString('ascii');
    case DATA_CODING.ucs2: {
      const even = buf.length - (buf.length % 2);
      return Buffer.from(buf.subarray(0, even)).swap16().toString('utf16le');
    }
    default: return buf.toString('latin1');
  }
}

/** A concatenated segment's place: which message (`ref`), how many segments and which this is. */
export type SegmentPlace = { ref: number; total: number; seq: number };

/**
 * Splits a received short message into its concatenation place (UDH with the 8- or 16-bit reference
 * element, or the SAR TLVs) and its payload. A message without either is one segment.
 */
export function readSegment(esmClass: number, shortMessage: Uint8Array, sar?: { ref?: number; total?: number; seq?: number }): { place?: SegmentPlace; payload: Uint8Array } {
  if ((esmClass & ESM_CLASS_UDHI) && shortMessage.length > 0) {
    const udhl = shortMessage[0]!;
    const payload = shortMessage.subarray(1 + udhl);
    let at = 1;
    while (at + 1 < 1 + udhl) {
      const iei = shortMessage[at]!;
      const len = shortMessage[at + 1]!;
      const data = shortMessage.subarray(at + 2, at + 2 + len);
      if (iei === 0x00 && len === 3) return { place: { ref: data[0]!, total: data[1]!, seq: data[2]! }, payload };
      if (iei === 0x08 && len === 4) return { place: { ref: (data[0]! << 8) | data[1]!, total: data[2]!, seq: data[3]! }, payload };
      at += 2 + len;
    }
    return { payload };
  }
  if (sar?.ref !== undefined && sar.total !== undefined && sar.seq !== undefined && sar.total > 1) {
    return { place: { ref: sar.ref, total: sar.total, seq: sar.seq }, payload: shortMessage };
  }
  return { payload: shortMessage };
}
