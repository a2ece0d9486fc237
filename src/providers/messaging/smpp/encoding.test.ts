import { describe, expect, it } from 'vitest';
import { decodeGsm7, encodeGsm7, GSM7_BASIC_TABLE, gsmSeptets } from './gsm7.ts';
import { decodeText, readSegment, segmentBody, submitParts } from './encoding.ts';

describe('GSM 03.38', () => {
  it('maps the basic table to septet values and back', () => {
    expect(encodeGsm7('@')).toEqual(Buffer.from([0x00]));
    expect(encodeGsm7('A a 0')).toEqual(Buffer.from([0x41, 0x20, 0x61, 0x20, 0x30]));
    expect(encodeGsm7('£$¥è\nΔ_ß¡§¿äà')).toEqual(Buffer.from([0x01, 0x02, 0x03, 0x04, 0x0a, 0x10, 0x11, 0x1e, 0x40, 0x5f, 0x60, 0x7b, 0x7f]));
    const all = [...GSM7_BASIC_TABLE].filter((_, i) => i !== 0x1b).join('');
    expect(decodeGsm7(encodeGsm7(all))).toBe(all);
  });

  it('sends extension characters as ESC + code and reads them back', () => {
    expect(encodeGsm7('€')).toEqual(Buffer.from([0x1b, 0x65]));
    expect(encodeGsm7('{}[]~|^\\\f')).toEqual(Buffer.from([0x1b, 0x28, 0x1b, 0x29, 0x1b, 0x3c, 0x1b, 0x3e, 0x1b, 0x3d, 0x1b, 0x40, 0x1b, 0x14, 0x1b, 0x2f, 0x1b, 0x0a]));
    expect(decodeGsm7(Buffer.from([0x1b, 0x65, 0x31]))).toBe('€1');
    for (const ch of '{}[]~|^\\\f€') expect(gsmSeptets(ch), ch).toBe(2);
  });

  it('reads an unknown escape as the basic character and drops a trailing ESC', () => {
    expect(decodeGsm7(Buffer.from([0x1b, 0x41]))).toBe('A');
    expect(decodeGsm7(Buffer.from([0x41, 0x1b]))).toBe('A');
    expect(decodeGsm7(Buffer.from([0xc1]))).toBe('A');
  });

  it('refuses characters outside the alphabet', () => {
    expect(gsmSeptets('ç')).toBeUndefined();
    expect(gsmSeptets('`')).toBeUndefined();
    expect(() => encodeGsm7('ç')).toThrow(/not in the GSM/);
  });
});

describe('segmentBody', () => {
  it('keeps 160 septets in one GSM-7 segment and splits 161 into 153 + 8', () => {
    expect(segmentBody('a'.repeat(160))).toMatchObject({ encoding: 'GSM-7', dataCoding: 0 });
    expect(segmentBody('a'.repeat(160)).payloads.map((p) => p.length)).toEqual([160]);
    expect(segmentBody('a'.repeat(161)).payloads.map((p) => p.length)).toEqual([153, 8]);
  });

  it('keeps 70 UCS-2 units in one segment and splits 71 into 67 + 4', () => {
    const seg = segmentBody('ş'.repeat(71));
    expect(seg).toMatchObject({ encoding: 'UCS-2', dataCoding: 8 });
    expect(seg.payloads.map((p) => p.length)).toEqual([134, 8]);
    expect(segmentBody('ş'.repeat(70)).payloads.map((p) => p.length)).toEqual([140]);
    expect(seg.payloads[0]!.subarray(0, 2)).toEqual(Buffer.from([0x01, 0x5f]));
  });

  it('never splits an escape pair or a surrogate pair', () => {
    const gsm = segmentBody('a'.repeat(152) + '€' + 'a'.repeat(10)).payloads;
    expect(gsm.map((p) => p.length)).toEqual([152, 12]);
    expect(gsm[1]!.subarray(0, 2)).toEqual(Buffer.from([0x1b, 0x65]));
    const ucs = segmentBody('ş'.repeat(66) + '😀' + 'ş'.repeat(10)).payloads;
    expect(ucs.map((p) => p.length)).toEqual([132, 24]);
    expect(decodeText(8, ucs[1]!)).toBe('😀' + 'ş'.repeat(10));
  });
});

describe('submitParts', () => {
  it('sends a one-segment body as one part with neither UDH nor SAR', () => {
    const { parts } = submitParts('hello', 'udh', 7);
    expect(parts).toEqual([{ shortMessage: Buffer.from('hello', 'ascii'), esmClass: 0 }]);
  });

  it('prefixes each segment with the 8-bit reference UDH and sets UDHI', () => {
    const { parts, dataCoding } = submitParts('ş'.repeat(140), 'udh', 300);
    expect(dataCoding).toBe(8);
    expect(parts).toHaveLength(3);
    parts.forEach((p, i) => {
      expect(p.esmClass).toBe(0x40);
      expect([...p.shortMessage.subarray(0, 6)]).toEqual([5, 0, 3, 300 & 0xff, 3, i + 1]);
      expect(p.shortMessage.length).toBeLessThanOrEqual(140);
    });
    expect(parts.map((p) => decodeText(8, readSegment(p.esmClass, p.shortMessage).payload)).join('')).toBe('ş'.repeat(140));
  });

  it('uses the SAR TLVs instead when asked, with the same segments', () => {
    const body = 'a'.repeat(200);
    const { parts } = submitParts(body, 'sar', 0x1234);
    expect(parts.map((p) => p.sar)).toEqual([
      { sar_msg_ref_num: 0x1234, sar_total_segments: 2, sar_segment_seqnum: 1 },
      { sar_msg_ref_num: 0x1234, sar_total_segments: 2, sar_segment_seqnum: 2 },
    ]);
    expect(parts.map((p) => p.esmClass)).toEqual([0, 0]);
    expect(parts.map((p) => p.shortMessage.length)).toEqual([153, 47]);
  });
});

describe('decodeText and readSegment', () => {
  it('decodes by data_coding: GSM-7, IA5, Latin-1, UCS-2 and the F0 coding group', () => {
    expect(decodeText(0, encodeGsm7('Hi € @'))).toBe('Hi € @');
    expect(decodeText(1, Buffer.from('STOP @', 'ascii'))).toBe('STOP @');
    expect(decodeText(3, Buffer.from('café', 'latin1'))).toBe('café');
    expect(decodeText(8, Buffer.from([0x00, 0x53, 0x00, 0x54, 0xd8, 0x3d, 0xde, 0x00]))).toBe('ST😀');
    expect(decodeText(0xf0, encodeGsm7('flash'))).toBe('flash');
  });

  it('reads the 8- and 16-bit concatenation elements and SAR TLVs', () => {
    expect(readSegment(0x40, Buffer.from([5, 0, 3, 9, 2, 1, 0x41]))).toEqual({ place: { ref: 9, total: 2, seq: 1 }, payload: Buffer.from([0x41]) });
    expect(readSegment(0x40, Buffer.from([6, 8, 4, 1, 2, 3, 2, 0x42]))).toEqual({ place: { ref: 0x102, total: 3, seq: 2 }, payload: Buffer.from([0x42]) });
    expect(readSegment(0, Buffer.from([0x43]), { ref: 5, total: 2, seq: 2 })).toEqual({ place: { ref: 5, total: 2, seq: 2 }, payload: Buffer.from([0x43]) });
    expect(readSegment(0, Buffer.from([0x43]))).toEqual({ payload: Buffer.from([0x43]) });
    // A UDH without a concatenation element (here a port element) is skipped over.
    expect(readSegment(0x40, Buffer.from([6, 5, 4, 0, 1, 0, 2, 0x44]))).toEqual({ payload: Buffer.from([0x44]) });
  });
});
