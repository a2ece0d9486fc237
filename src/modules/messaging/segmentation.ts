/**
 * SMS segmentation (3GPP TS 23.038 / 23.040). A body is sent as GSM-7 when every character is in
 * the GSM 03.38 basic set or its extension table, otherwise as UCS-2. A single SMS holds 160
 * septets or 70 UTF-16 code units; a concatenated one loses room to the UDH and holds 153 septets
 * or 67 code units per segment. Escape pairs (extension characters) and surrogate pairs are never
 * split across segments, so a segment may carry one unit less than the maximum. The alphabet is the
 * SMPP adapter's (providers/messaging/smpp/gsm7.ts), which splits a body into exactly this many
 * segments (segmentation.test.ts checks both agree).
 */
import { gsmSeptets } from '../../providers/messaging/smpp/gsm7.ts';

/** The maximum SMS body, in Unicode code points (the spec's "1600 characters"). */
export const SMS_MAX_CHARACTERS = 1600;

export type SmsEncoding = 'GSM-7' | 'UCS-2';
export type SmsSegmentation = { encoding: SmsEncoding; segments: number; characters: number };

const GSM7_SINGLE = 160;
const GSM7_MULTI = 153;
const UCS2_SINGLE = 70;
const UCS2_MULTI = 67;

/** Whether every character of `text` is in the GSM 03.38 basic set or extension table. */
export function isGsm7(text: string): boolean {
  for (const ch of text) if (gsmSeptets(ch) === undefined) return false;
  return true;
}

/** Segments needed for units of the given sizes, filled greedily without splitting a unit. */
function countSegments(sizes: number[], single: number, multi: number): number {
  let total = 0;
  for (const s of sizes) total += s;
  if (total <= single) return 1;
  let segments = 1;
  let used = 0;
  for (const s of sizes) {
    if (used + s > multi) {
      segments += 1;
      used = 0;
    }
    used += s;
  }
  return segments;
}

/** Encoding, segment count and character count (code points) of an SMS body. An empty body is one GSM-7 segment. */
export function segmentSms(body: string): SmsSegmentation {
  const chars = [...body];
  const septets: number[] = [];
  let gsm = true;
  for (const ch of chars) {
    const n = gsmSeptets(ch);
    if (n === undefined) {
      gsm = false;
      break;
    }
    septets.push(n);
  }
  if (gsm) {
    return { encoding: 'GSM-7', segments: countSegments(septets, GSM7_SINGLE, GSM7_MULTI), characters: chars.length };
  }
  // UTF-16 code units per code point: 2 for a surrogate pair (astral characters such as emoji).
  const units = chars.map((ch) => ch.length);
  return { encoding: 'UCS-2', segments: countSegments(units, UCS2_SINGLE, UCS2_MULTI), characters: chars.length };
}
