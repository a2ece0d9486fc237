/**
 * G.711 µ-law (PCMU) and A-law (PCMA) through lookup tables built once from alawmulaw's codecs:
 * a frame of 160 samples is 160 table reads each way.
 */
import alawmulaw from 'alawmulaw';

export type G711 = 'PCMU' | 'PCMA';

/** Samples in one 20 ms frame at G.711's 8 kHz (one RTP packet's payload). */
export const FRAME = 160;

function tables(codec: typeof alawmulaw.mulaw): { encode: Uint8Array; decode: Int16Array } {
  const encode = new Uint8Array(65536);
  for (let i = 0; i < 65536; i++) encode[i] = codec.encodeSample(i - 32768) & 0xff;
  const decode = new Int16Array(256);
  for (let i = 0; i < 256; i++) decode[i] = codec.decodeSample(i);
  return { encode, decode };
}

const TABLES: Record<G711, { encode: Uint8Array; decode: Int16Array }> = { PCMU: tables(alawmulaw.mulaw), PCMA: tables(alawmulaw.alaw) };

/** The codec's silence byte (the encoding of 0). */
export const SILENCE: Record<G711, number> = { PCMU: TABLES.PCMU.encode[32768]!, PCMA: TABLES.PCMA.encode[32768]! };

export function encodeG711(codec: G711, pcm: Int16Array, out: Uint8Array = new Uint8Array(pcm.length)): Uint8Array {
  const t = TABLES[codec].encode;
  for (let i = 0; i < pcm.length; i++) out[i] = t[pcm[i]! + 32768]!;
  return out;
}

export function decodeG711(codec: G711, bytes: Uint8Array, out: Int16Array = new Int16Array(bytes.length)): Int16Array {
  const t = TABLES[codec].decode;
  for (let i = 0; i < bytes.length; i++) out[i] = t[bytes[i]!]!;
  return out;
}
