/**
 * The GSM 03.38 default alphabet (3GPP TS 23.038 §6.2.1) with its extension table, as SMPP carries
 * it with data_coding 0: one septet per octet, unpacked (the SMSC packs them for the air
 * interface). An extension character is two septets: ESC (0x1B) and its code in the extension
 * table. This table is also what the messaging module's segment counter uses, so what is counted
 * at acceptance is what the SMPP adapter sends.
 */

/** The 128 characters of the basic table, indexed by septet value (0x1B, ESC, is the escape to the extension table). */
export const GSM7_BASIC_TABLE =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';

/** The extension table: character → its code after ESC. */
export const GSM7_EXTENSION_TABLE: ReadonlyMap<string, number> = new Map([
  ['\f', 0x0a], ['^', 0x14], ['{', 0x28], ['}', 0x29], ['\\', 0x2f], ['[', 0x3c], ['~', 0x3d], [']', 0x3e], ['|', 0x40], ['€', 0x65],
]);

export const GSM7_ESCAPE = 0x1b;

const BASIC = new Map<string, number>();
for (let i = 0; i < GSM7_BASIC_TABLE.length; i++) if (i !== GSM7_ESCAPE) BASIC.set(GSM7_BASIC_TABLE[i]!, i);
const EXTENSION_BY_CODE = new Map<number, string>([...GSM7_EXTENSION_TABLE].map(([ch, code]) => [code, ch]));

/** Septets a character takes in GSM-7 (1 basic, 2 extension), or undefined when GSM-7 cannot encode it. */
export function gsmSeptets(ch: string): 1 | 2 | undefined {
  if (BASIC.has(ch)) return 1;
  if (GSM7_EXTENSION_TABLE.has(ch)) return 2;
  return undefined;
}

/** The septets of one character (one octet each), or undefined when it is not in GSM-7. */
export function encodeGsm7Char(ch: string): number[] | undefined {
  const basic = BASIC.get(ch);
  if (basic !== undefined) return [basic];
  const ext = GSM7_EXTENSION_TABLE.get(ch);
  return ext === undefined ? undefined : [GSM7_ESCAPE, ext];
}

/** The whole text as unpacked septets; throws on a character outside GSM-7 (callers check with gsmSeptets first). */
export function encodeGsm7(text: string): Buffer {
  const out: number[] = [];
  for (const ch of text) {
    const septets = encodeGsm7Char(ch);
    if (!septets) throw new Error(`${JSON.stringify(ch)} is not in the GSM 03.38 alphabet`);
    out.push(...septets);
  }
  return Buffer.from(out);
}

/**
 * Unpacked septets to text. Octets above 0x7F are taken modulo 128 (some SMSCs set the top bit);
 * ESC before a code the extension table lacks shows the basic character (TS 23.038's rule for
 * receivers); a trailing ESC is dropped.
 */
export function decodeGsm7(septets: Uint8Array): string {
  let out = '';
  for (let i = 0; i < septets.length; i++) {
    const s = septets[i]! & 0x7f;
    if (s === GSM7_ESCAPE) {
      const next = septets[i + 1];
      if (next === undefined) break;
      i++;
      const code = next & 0x7f;
      out += EXTENSION_BY_CODE.get(code) ?? (code === GSM7_ESCAPE ? ' ' : GSM7_BASIC_TABLE[code]!);
      continue;
    }
    out += GSM7_BASIC_TABLE[s]!;
  }
  return out;
}
