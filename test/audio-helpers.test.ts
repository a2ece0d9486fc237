/** The media tests' audio checks (test/helpers/audio.ts) on signals whose content is known. */
import { describe, expect, it } from 'vitest';
import { goertzel, tone, tonePowers } from './helpers/audio.ts';

const sum = (a: Int16Array, b: Int16Array) => a.map((v, i) => v + (b[i] ?? 0));

describe('audio checks', () => {
  it('goertzel: a pure tone has ~0.5 of its power at its frequency and ~0 at another', () => {
    const t = tone(700, 1);
    expect(goertzel(t, 700)).toBeGreaterThan(0.45);
    expect(goertzel(t, 1100)).toBeLessThan(0.01);
    expect(goertzel(new Int16Array(800), 700)).toBe(0);
  });

  it('tonePowers: two tones mixed hold both, a third not; silence is left out', () => {
    const mixed = sum(tone(700, 2), tone(1100, 2));
    const p = tonePowers(new Int16Array([...new Int16Array(8000), ...mixed]), [700, 1100, 1500]);
    expect(p[700]).toBeGreaterThan(0.2);
    expect(p[1100]).toBeGreaterThan(0.2);
    expect(p[1500]).toBeLessThan(0.01);
    expect(tonePowers(new Int16Array(8000), [700])[700]).toBe(0);
  });
});
