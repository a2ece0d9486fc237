import { describe, expect, it } from 'vitest';
import { MIX_DELAY, Rooms } from './mixer.ts';
import { FRAME } from './g711.ts';

const frame = (v: number) => new Int16Array(FRAME).fill(v);

/** Runs the rooms' clock `n` ticks; each member hears its constant (by RTP timestamp) each tick before it. */
function run(rooms: Rooms, members: { m: ReturnType<Rooms['join']>; value: number; ts: number }[], n: number): void {
  for (let i = 0; i < n; i++) {
    for (const x of members) {
      x.m.heard(x.ts, 1, frame(x.value));
      x.ts += FRAME;
    }
    rooms.tick();
  }
}

describe('mixer', () => {
  it('mix-minus: each member is sent the sum of the others, not itself, after the jitter delay', () => {
    const rooms = new Rooms();
    const members = [100, 20, 3].map((value, i) => ({ m: rooms.join('r', `s${i}`, false), value, ts: 1000 * i }));
    run(rooms, members, 1);
    expect(members[0]!.m.outgoing()).toBeUndefined(); // nothing due yet
    run(rooms, members, MIX_DELAY + 2);
    expect(members.map((x) => x.m.outgoing()![0])).toEqual([23, 103, 120]);
  });

  it('a muted member hears the others and is not heard; leave takes a member out, the last one takes the room', () => {
    const rooms = new Rooms();
    const members = [100, 20, 3].map((value, i) => ({ m: rooms.join('r', `s${i}`, i === 1), value, ts: 0 }));
    run(rooms, members, MIX_DELAY + 2);
    expect(members.map((x) => x.m.outgoing()![0])).toEqual([3, 103, 100]);
    rooms.leave('s0');
    run(rooms, members.slice(1), 2);
    expect(members[1]!.m.outgoing()![0]).toBe(3);
    expect(members[2]!.m.outgoing()).toBeUndefined(); // s1 is muted: no one to hear
    rooms.leave('s1');
    rooms.leave('s2');
    expect(rooms.size).toBe(0);
  });

  it('saturates instead of wrapping', () => {
    const rooms = new Rooms();
    const members = [30_000, 30_000, -30_000, -30_000].map((value, i) => ({ m: rooms.join('r', `s${i}`, false), value, ts: 0 }));
    run(rooms, members, MIX_DELAY + 2);
    expect(members.map((x) => x.m.outgoing()![0])).toEqual([-30_000, -30_000, 30_000, 30_000]);
    const loud = new Rooms();
    const two = [30_000, 30_000, 30_000].map((value, i) => ({ m: loud.join('r', `s${i}`, false), value, ts: 0 }));
    run(loud, two, MIX_DELAY + 2);
    expect(two[0]!.m.outgoing()![0]).toBe(32_767);
  });
});
