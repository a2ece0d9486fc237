import { describe, expect, it } from 'vitest';
import { dbfsToRms, rms, silenceDue, VoiceActivity, voicedRange, type VadEvent } from './vad.ts';

const FRAME = 160;
/** A 20 ms frame: a 500 Hz sine of amplitude `amp` (0: silence). */
const frame = (amp: number) => Int16Array.from({ length: FRAME }, (_v, i) => Math.round(amp * Math.sin((2 * Math.PI * 500 * i) / 8000)));
const LOUD = 8000; // about -15 dBFS RMS
const QUIET = 60; // about -55 dBFS RMS

/** Feeds frames; the events with the frame index each came at. */
function feed(vad: VoiceActivity, frames: Int16Array[]): { at: number; e: VadEvent }[] {
  const out: { at: number; e: VadEvent }[] = [];
  frames.forEach((f, at) => { const e = vad.frame(f); if (e) out.push({ at, e }); });
  return out;
}
const repeat = (n: number, amp: number) => Array.from({ length: n }, () => frame(amp));
const options = { rms: dbfsToRms(-40), startMs: 100, hangoverMs: 600, maxMs: 10_000, preRollMs: 100, tailMs: 100 };

describe('levels', () => {
  it('measures RMS and converts dB of full scale', () => {
    expect(rms(new Int16Array(FRAME))).toBe(0);
    expect(rms(new Int16Array(FRAME).fill(1000))).toBe(1000);
    expect(rms(frame(LOUD))).toBeCloseTo(LOUD / Math.SQRT2, -1);
    expect(dbfsToRms(0)).toBe(32768);
    expect(dbfsToRms(-20)).toBeCloseTo(3276.8, 3);
  });
});

describe('voice activity', () => {
  it('starts after startMs of voice in a row and ends after the hangover, keeping pre-roll and tail', () => {
    const vad = new VoiceActivity(options);
    // 10 silent frames, 50 voiced (1 s), 40 silent.
    const events = feed(vad, [...repeat(10, 0), ...repeat(50, LOUD), ...repeat(40, 0)]);
    expect(events.map((x) => [x.e.type, x.at])).toEqual([['start', 14], ['end', 89]]);
    const end = events[1]!.e as Extract<VadEvent, { type: 'end' }>;
    expect(end.silentMs).toBe(600);
    expect(end.capped).toBe(false);
    // 5 frames of pre-roll, 50 voiced, 5 frames of tail.
    expect(end.samples.length).toBe((5 + 50 + 5) * FRAME);
    expect(rms(end.samples.subarray(0, 5 * FRAME))).toBe(0);
    expect(rms(end.samples.subarray(5 * FRAME, 55 * FRAME))).toBeGreaterThan(5000);
    expect(vad.speaking).toBe(false);
  });

  it('pauses shorter than the hangover stay in one utterance; quiet noise and short clicks start none', () => {
    const vad = new VoiceActivity(options);
    const events = feed(vad, [
      ...repeat(20, QUIET), ...repeat(3, LOUD), ...repeat(20, QUIET), // a click of 60 ms: below startMs
      ...repeat(20, LOUD), ...repeat(25, QUIET), ...repeat(20, LOUD), // a 500 ms pause within the utterance
      ...repeat(40, QUIET),
    ]);
    expect(events.map((x) => x.e.type)).toEqual(['start', 'end']);
    const end = events[1]!.e as Extract<VadEvent, { type: 'end' }>;
    expect(end.samples.length).toBe((5 + 20 + 25 + 20 + 5) * FRAME);
  });

  it('cuts an utterance at maxMs, and hears the next one', () => {
    const vad = new VoiceActivity({ ...options, maxMs: 1200 });
    const events = feed(vad, [...repeat(80, LOUD), ...repeat(40, 0)]);
    expect(events.map((x) => [x.e.type, x.at])).toEqual([['start', 4], ['end', 59], ['start', 64], ['end', 109]]);
    expect((events[1]!.e as Extract<VadEvent, { type: 'end' }>).capped).toBe(true);
    expect((events[1]!.e as Extract<VadEvent, { type: 'end' }>).samples.length).toBe(60 * FRAME);
  });

  it('reset drops an utterance in progress', () => {
    const vad = new VoiceActivity(options);
    expect(feed(vad, repeat(10, LOUD)).map((x) => x.e.type)).toEqual(['start']);
    vad.reset();
    expect(vad.speaking).toBe(false);
    expect(feed(vad, repeat(40, 0))).toEqual([]);
  });
});

describe('voicemail silence watch and trimming', () => {
  it('is due after ms since the last voiced frame, or initialMs from the start when none was voiced', () => {
    const watch = { ms: 3000, initialMs: 10_000 };
    expect(silenceDue(watch, 100, 0, undefined)).toBeUndefined(); // 2 s, no voice yet
    expect(silenceDue(watch, 500, 0, undefined)).toBe(10_000);
    expect(silenceDue(watch, 200, 0, 100)).toBeUndefined(); // 2 s after the voice
    expect(silenceDue(watch, 250, 0, 100)).toBe(3000);
  });

  it('keeps the voiced span with padding, within the recording', () => {
    expect(voicedRange(80_000, { from: 2, until: 5 }, 100)).toEqual({ from: 15_200, until: 40_800 });
    expect(voicedRange(30_000, { from: 0.05, until: 5 }, 100)).toEqual({ from: 0, until: 30_000 });
    expect(voicedRange(10, { from: 2, until: 5 }, 0)).toEqual({ from: 10, until: 10 });
  });
});
