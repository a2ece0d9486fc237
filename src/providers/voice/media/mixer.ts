/**
 * Rooms of calls whose audio is mixed on the media thread: a bridge (two calls: each hears the
 * other) and a conference (N calls: each hears the sum of all the others, mix-minus). Every call
 * decodes what it receives with its own codec and encodes what it is sent with its own, so a
 * PCMU call and a PCMA call hear each other.
 *
 * Each member keeps a small jitter buffer of what its far end sends, by 20 ms slot of the media
 * clock (anchored on the first packet's RTP timestamp, like the recording's), played into the mix
 * MIX_DELAY ticks after it is due. At each tick, before the sessions send, the room sums the
 * unmuted members' frames (32-bit) and hands each member the sum minus its own frame, saturated to
 * 16 bits. A muted member still hears the others; nothing of it goes into the mix.
 *
 * Keys (RFC 4733) are not carried between members: each call's keys are its own (reported as today).
 */
import { FRAME } from './g711.ts';

/** Ticks a received frame waits before it is mixed (the jitter a far end's packets may have). */
export const MIX_DELAY = 3;
/** A frame this many slots ahead of the clock, or behind it, re-anchors the buffer (a timestamp jump, a new source). */
const AHEAD_MAX = 25;
const BEHIND_MAX = 10;

/** What a media session asks of the room it is in (session.ts): hand over what it hears, take what it sends. */
export interface MixMember {
  /** A decoded frame (or several: a packet longer than 20 ms) the far end sent. */
  heard(timestamp: number, ssrc: number, pcm: Int16Array): void;
  /** The mix this member is to send at this tick (undefined: nothing to add). */
  outgoing(): Int16Array | undefined;
}

/** One call in a room: its jitter buffer, its mute, and the mix-minus it is sent. */
export class Member implements MixMember {
  readonly id: string;
  muted: boolean;
  #tick = 0;
  #anchor: { slot: number; timestamp: number; ssrc: number } | undefined;
  readonly #frames = new Map<number, Int16Array>();
  /** The frame of this tick's slot (taken by the room), and what this member is sent. */
  current: Int16Array | undefined;
  readonly #out = new Int16Array(FRAME);
  #hasOut = false;

  constructor(id: string, muted: boolean) {
    this.id = id;
    this.muted = muted;
  }

  heard(timestamp: number, ssrc: number, pcm: Int16Array): void {
    const a = this.#anchor;
    let first = a && a.ssrc === ssrc ? a.slot + Math.round(((timestamp - a.timestamp) | 0) / FRAME) : undefined;
    if (first === undefined || first > this.#tick + AHEAD_MAX || first < this.#tick - BEHIND_MAX) {
      this.#anchor = { slot: this.#tick, timestamp, ssrc };
      first = this.#tick;
    }
    for (let at = 0, slot = first; at < pcm.length; at += FRAME, slot++) {
      if (slot <= this.#tick - MIX_DELAY) continue; // too late: its slot was mixed already
      const frame = new Int16Array(FRAME);
      frame.set(pcm.subarray(at, Math.min(pcm.length, at + FRAME)));
      this.#frames.set(slot, frame);
    }
  }

  /** The clock moves on: the frame due now (MIX_DELAY slots back) is taken out of the buffer. */
  advance(): void {
    this.#tick += 1;
    const due = this.#tick - MIX_DELAY;
    this.current = this.#frames.get(due);
    this.#frames.delete(due);
    if (this.#frames.size > AHEAD_MAX + BEHIND_MAX) for (const slot of this.#frames.keys()) if (slot < due) this.#frames.delete(slot);
  }

  /** This tick's mix for this member: `sum` minus its own part (when it counted in the sum), saturated. */
  mixMinus(sum: Int32Array, others: number): void {
    this.#hasOut = others > 0;
    if (!this.#hasOut) return;
    const own = this.muted ? undefined : this.current;
    for (let i = 0; i < FRAME; i++) {
      const v = sum[i]! - (own ? own[i]! : 0);
      this.#out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
    }
  }

  outgoing(): Int16Array | undefined {
    return this.#hasOut ? this.#out : undefined;
  }
}

/** A room: its members, mixed once per tick. */
export class Room {
  readonly id: string;
  readonly members = new Map<string, Member>();
  readonly #sum = new Int32Array(FRAME);

  constructor(id: string) {
    this.id = id;
  }

  /** One tick: every member's due frame in, each member's mix-minus out (before the sessions send). */
  tick(): void {
    const sum = this.#sum;
    sum.fill(0);
    let voices = 0;
    for (const m of this.members.values()) {
      m.advance();
      if (m.muted || !m.current) continue;
      voices += 1;
      const f = m.current;
      for (let i = 0; i < FRAME; i++) sum[i]! += f[i]!;
    }
    for (const m of this.members.values()) m.mixMinus(sum, voices - (!m.muted && m.current ? 1 : 0));
  }
}

/** The media thread's rooms: a session is in one room at most. */
export class Rooms {
  readonly #rooms = new Map<string, Room>();
  readonly #of = new Map<string, Room>();

  /** Puts the session `id` in room `roomId` (or changes its mute there); answers its member to attach to the session. */
  join(roomId: string, id: string, muted: boolean): Member {
    const current = this.#of.get(id);
    if (current && current.id !== roomId) this.leave(id);
    let room = this.#rooms.get(roomId);
    if (!room) this.#rooms.set(roomId, room = new Room(roomId));
    let member = room.members.get(id);
    if (member) member.muted = muted;
    else room.members.set(id, member = new Member(id, muted));
    this.#of.set(id, room);
    return member;
  }

  /** Takes the session out of its room (an empty room goes). True when it was in one. */
  leave(id: string): boolean {
    const room = this.#of.get(id);
    if (!room) return false;
    this.#of.delete(id);
    room.members.delete(id);
    if (room.members.size === 0) this.#rooms.delete(room.id);
    return true;
  }

  tick(): void {
    for (const room of this.#rooms.values()) room.tick();
  }

  get size(): number {
    return this.#rooms.size;
  }
}
