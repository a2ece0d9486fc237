/**
 * Audio checks for the media tests, written from the textbook rather than with the engine's code:
 * a tone generator and the Goertzel filter (the power of one frequency in a block of samples).
 */

/** `seconds` of a sine at `hz` (8 kHz, 16-bit), amplitude `amplitude`. */
export function tone(hz: number, seconds: number, amplitude = 8000, rate = 8000): Int16Array {
  const out = new Int16Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate));
  return out;
}

/** Relative power of `hz` in `samples` (Goertzel), normalised by the block's energy: ~0.5 for a pure tone at hz, ~0 without it. */
export function goertzel(samples: ArrayLike<number>, hz: number, rate = 8000): number {
  const n = samples.length;
  if (n === 0) return 0;
  const k = Math.round((n * hz) / rate);
  const w = (2 * Math.PI * k) / n;
  const coeff = 2 * Math.cos(w);
  let s1 = 0;
  let s2 = 0;
  let energy = 0;
  for (let i = 0; i < n; i++) {
    const x = samples[i]!;
    energy += x * x;
    const s0 = x + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  const power = s1 * s1 + s2 * s2 - coeff * s1 * s2;
  return energy === 0 ? 0 : power / (energy * n);
}

/** The strongest of `candidates` (Hz) in `samples`, with its relative power. */
export function dominant(samples: ArrayLike<number>, candidates: number[], rate = 8000): { hz: number; power: number } {
  return candidates.map((hz) => ({ hz, power: goertzel(samples, hz, rate) })).sort((a, b) => b.power - a.power)[0]!;
}

/** Root mean square of samples. */
export function rms(samples: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i]! * samples[i]!;
  return samples.length ? Math.sqrt(sum / samples.length) : 0;
}

/** The highest normalised cross-correlation of `needle` against `haystack` over every alignment (step 1 ms, then refined). */
export function bestCorrelation(haystack: Int16Array, needle: Int16Array): number {
  const n = Math.min(needle.length, 8000 * 3);
  const b = needle.subarray(0, n);
  let bb = 0;
  for (let i = 0; i < n; i++) bb += b[i]! * b[i]!;
  const at = (lag: number) => {
    let ab = 0;
    let aa = 0;
    for (let i = 0; i < n; i++) { const a = haystack[lag + i]!; ab += a * b[i]!; aa += a * a; }
    return aa === 0 || bb === 0 ? 0 : ab / Math.sqrt(aa * bb);
  };
  let best = -1;
  let bestLag = 0;
  for (let lag = 0; lag + n <= haystack.length; lag += 8) { const c = at(lag); if (c > best) { best = c; bestLag = lag; } }
  for (let lag = Math.max(0, bestLag - 8); lag <= bestLag + 8 && lag + n <= haystack.length; lag++) best = Math.max(best, at(lag));
  return best;
}

/**
 * What tones a recording holds: for each of `hzs`, its mean relative power (goertzel) over the
 * 100 ms windows that carry sound (RMS at least `floor`); 0 for all when none does. A window of one
 * tone gives it ~0.5; of two equal tones, ~0.25 each; of neither, ~0.
 */
export function tonePowers(samples: Int16Array, hzs: readonly number[], floor = 200, rate = 8000): Record<number, number> {
  const size = Math.round(rate / 10);
  const sums = hzs.map(() => 0);
  let windows = 0;
  for (let at = 0; at + size <= samples.length; at += size) {
    const w = samples.subarray(at, at + size);
    if (rms(w) < floor) continue;
    windows += 1;
    hzs.forEach((hz, i) => { sums[i]! += goertzel(w, hz, rate); });
  }
  return Object.fromEntries(hzs.map((hz, i) => [hz, windows ? sums[i]! / windows : 0]));
}

/** `seconds` of silence at 8 kHz. */
export const silence = (seconds: number, rate = 8000) => new Int16Array(Math.round(seconds * rate));

/** The parts one after another. */
export function concat(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}
