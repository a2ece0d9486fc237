/**
 * The sandbox's recorded audio: a WAV file (8 kHz, 8-bit unsigned PCM, mono) holding a quiet
 * tone as long as the recording. Every byte of it is below 0x80, so it travels unchanged through
 * the service's text response bodies (UTF-8 of 7-bit bytes is the bytes themselves).
 */
const RATE = 8000;
/** The sandbox never renders more than this many seconds of audio per recording. */
export const MAX_RENDERED_SECONDS = 600;

const sevenBit = (n: number) => [0, 8, 16, 24].every((shift) => ((n >>> shift) & 0xff) < 0x80);

/** The largest sample count ≤ wanted whose header fields are all 7-bit. */
function sampleCount(wanted: number): number {
  let n = wanted;
  while (n > 0 && !(sevenBit(n) && sevenBit(n + 36))) n--;
  return n;
}

export function sandboxRecording(seconds: number): string {
  const n = sampleCount(Math.min(seconds, MAX_RENDERED_SECONDS) * RATE);
  const bytes = new Uint8Array(44 + n);
  const view = new DataView(bytes.buffer);
  const ascii = (at: number, s: string) => { for (let i = 0; i < s.length; i++) bytes[at + i] = s.charCodeAt(i); };
  ascii(0, 'RIFF');
  view.setUint32(4, 36 + n, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, RATE, true);
  view.setUint32(28, RATE, true); // byte rate
  view.setUint16(32, 1, true); // block align
  view.setUint16(34, 8, true); // bits per sample
  ascii(36, 'data');
  view.setUint32(40, n, true);
  // A 440 Hz tone at low volume around 0x40.
  for (let i = 0; i < n; i++) bytes[44 + i] = 64 + Math.round(24 * Math.sin((2 * Math.PI * 440 * i) / RATE));
  return Buffer.from(bytes).toString('latin1');
}
