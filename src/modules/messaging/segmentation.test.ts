import { describe, expect, it } from 'vitest';
import { isGsm7, segmentSms, SMS_MAX_CHARACTERS } from './segmentation.ts';
import { segmentBody } from '../../providers/messaging/smpp/encoding.ts';

const EXTENSION = ['^', '{', '}', '\\', '[', '~', ']', '|', '€', '\f'];

describe('segmentSms: GSM-7', () => {
  it('treats the empty body as one GSM-7 segment of 0 characters', () => {
    expect(segmentSms('')).toEqual({ encoding: 'GSM-7', segments: 1, characters: 0 });
  });

  it('fits 160 septets in one segment and splits 161 into two', () => {
    expect(segmentSms('a'.repeat(160))).toEqual({ encoding: 'GSM-7', segments: 1, characters: 160 });
    expect(segmentSms('a'.repeat(161))).toEqual({ encoding: 'GSM-7', segments: 2, characters: 161 });
  });

  it('uses 153 septets per concatenated segment', () => {
    expect(segmentSms('a'.repeat(306)).segments).toBe(2);
    expect(segmentSms('a'.repeat(307)).segments).toBe(3);
    expect(segmentSms('a'.repeat(459)).segments).toBe(3);
    expect(segmentSms('a'.repeat(460)).segments).toBe(4);
  });

  it('counts the 1600-character maximum as 11 segments', () => {
    expect(SMS_MAX_CHARACTERS).toBe(1600);
    expect(segmentSms('a'.repeat(1600))).toEqual({ encoding: 'GSM-7', segments: 11, characters: 1600 });
  });

  it('counts every extension character (and form feed) as two septets', () => {
    for (const ch of EXTENSION) {
      expect(segmentSms(ch), JSON.stringify(ch)).toEqual({ encoding: 'GSM-7', segments: 1, characters: 1 });
      expect(segmentSms(ch + 'a'.repeat(158)).segments, JSON.stringify(ch)).toBe(1);
      expect(segmentSms(ch + 'a'.repeat(159)).segments, JSON.stringify(ch)).toBe(2);
    }
    expect(segmentSms('€'.repeat(80))).toEqual({ encoding: 'GSM-7', segments: 1, characters: 80 });
    expect(segmentSms('€'.repeat(81))).toEqual({ encoding: 'GSM-7', segments: 2, characters: 81 });
  });

  it('never splits an escape pair across segments', () => {
    // 152 septets then an extension char: the pair does not fit in segment 1 (153), so it moves on.
    // 152 + 2 + 152 = 306 septets would be 2 segments if split naively; it is 3 because the pair moves.
    expect(segmentSms('a'.repeat(152) + '€' + 'a'.repeat(152)).segments).toBe(3);
    // With 151 leading septets the pair fits exactly: 151 + 2 = 153, then 153 more.
    expect(segmentSms('a'.repeat(151) + '€' + 'a'.repeat(153)).segments).toBe(2);
    // 76 pairs = 152 septets, a 77th pair does not fit: 153 × 2 = 306 septets of pairs need 3 segments.
    expect(segmentSms('{'.repeat(153)).segments).toBe(3);
    expect(segmentSms('{'.repeat(152)).segments).toBe(2);
  });

  it('accepts the whole GSM 03.38 basic set, including Greek capitals and newlines', () => {
    const basic = '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
    expect(isGsm7(basic)).toBe(true);
    expect(segmentSms(basic).encoding).toBe('GSM-7');
    expect(segmentSms(basic).characters).toBe([...basic].length);
  });

  it('switches to UCS-2 for characters outside GSM-7', () => {
    for (const ch of ['ç', 'ğ', 'ş', 'İ', 'á', '`', '\t', 'α', '中', '😀', '\u001b']) {
      expect(isGsm7(`Hello ${ch}`), JSON.stringify(ch)).toBe(false);
      expect(segmentSms(`Hello ${ch}`).encoding, JSON.stringify(ch)).toBe('UCS-2');
    }
  });
});

describe('segmentSms: UCS-2', () => {
  it('fits 70 code units in one segment and splits 71 into two', () => {
    expect(segmentSms('ş'.repeat(70))).toEqual({ encoding: 'UCS-2', segments: 1, characters: 70 });
    expect(segmentSms('ş'.repeat(71))).toEqual({ encoding: 'UCS-2', segments: 2, characters: 71 });
  });

  it('uses 67 code units per concatenated segment', () => {
    expect(segmentSms('ş'.repeat(134)).segments).toBe(2);
    expect(segmentSms('ş'.repeat(135)).segments).toBe(3);
    expect(segmentSms('ş'.repeat(201)).segments).toBe(3);
    expect(segmentSms('ş'.repeat(202)).segments).toBe(4);
  });

  it('counts an emoji as two code units but one character', () => {
    expect(segmentSms('😀')).toEqual({ encoding: 'UCS-2', segments: 1, characters: 1 });
    expect(segmentSms('😀'.repeat(35))).toEqual({ encoding: 'UCS-2', segments: 1, characters: 35 });
    expect(segmentSms('😀'.repeat(36))).toEqual({ encoding: 'UCS-2', segments: 2, characters: 36 });
    expect(segmentSms('a'.repeat(68) + '😀')).toEqual({ encoding: 'UCS-2', segments: 1, characters: 69 });
    expect(segmentSms('a'.repeat(69) + '😀')).toEqual({ encoding: 'UCS-2', segments: 2, characters: 70 });
  });

  it('never splits a surrogate pair across segments', () => {
    // 66 units then an emoji: 68 > 67, so the emoji starts segment 2; 66 + 2 + 66 = 134 units need 3 segments.
    expect(segmentSms('ş'.repeat(66) + '😀' + 'ş'.repeat(66)).segments).toBe(3);
    // 65 units then an emoji fits exactly (67), then 67 more: 2 segments.
    expect(segmentSms('ş'.repeat(65) + '😀' + 'ş'.repeat(67)).segments).toBe(2);
    // 67 emoji = 134 units: 33 per segment (66 units) → 3 segments.
    expect(segmentSms('😀'.repeat(67)).segments).toBe(3);
    expect(segmentSms('😀'.repeat(66)).segments).toBe(2);
  });

  it('counts characters as code points for a mixed body', () => {
    expect(segmentSms('Merhaba 👋 dünya')).toEqual({ encoding: 'UCS-2', segments: 1, characters: 15 });
  });

  it('lets one non-GSM character turn a long body into UCS-2 segments', () => {
    const body = 'a'.repeat(159) + 'ç';
    expect(segmentSms(body)).toEqual({ encoding: 'UCS-2', segments: 3, characters: 160 });
  });
});

describe('segmentSms and the SMPP adapter agree', () => {
  it('counts as many segments as the adapter sends, in the same encoding', () => {
    // Lengths around every boundary, with escape pairs and surrogate pairs at every position.
    const fillers = ['a', '€', 'ş', '😀', 'a€', 'aş', 'a😀', '€😀'];
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const bodies: string[] = [''];
    for (const unit of fillers) for (const n of [1, 66, 67, 68, 69, 70, 71, 76, 77, 80, 81, 152, 153, 154, 159, 160, 161, 305, 306, 307, 800]) bodies.push(unit.repeat(n));
    for (let i = 0; i < 300; i++) bodies.push(Array.from({ length: Math.floor(random() * 400) }, () => fillers[Math.floor(random() * fillers.length)]!).join(''));
    for (const body of bodies) {
      const counted = segmentSms(body);
      const sent = segmentBody(body);
      expect({ segments: sent.payloads.length, encoding: sent.encoding }, JSON.stringify(body.slice(0, 20)) + ` (${body.length})`).toEqual({ segments: counted.segments, encoding: counted.encoding });
    }
  });
});
