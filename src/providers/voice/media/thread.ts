/**
 * The media thread: every call's RTP sockets and one 20 ms clock for all of them, on a thread of
 * its own so the service's requests, queries and garbage collection never delay a frame.
 *
 * The clock keeps to absolute time (tick n is due at start + 20·n ms): a tick that fires late is
 * not carried into the next one, and a tick missed altogether is made up at once (a burst, counted
 * as caught up, of at most MAX_CATCH_UP ticks; older ones are skipped) so every call's media clock
 * stays in step with the wall clock.
 */
import { readlinkSync } from 'node:fs';
import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { MediaSession } from './session.ts';
import { Rooms } from './mixer.ts';
import type { EngineStats, FromMedia, ToMedia } from './protocol.ts';

const TICK_MS = 20;
const data = workerData as { portMin: number; portMax: number; nice: number | undefined };
const range = { min: data.portMin, max: data.portMax, next: 0 };
const sessions = new Map<string, MediaSession>();
const rooms = new Rooms();
const pending = new Map<string, Promise<MediaSession>>();
const port = parentPort!;
const post = (m: FromMedia) => port.postMessage(m);
const host = { post };

/**
 * This thread's scheduling priority (its nice value: a thread on Linux has its own, set through its
 * thread id) when the engine asks for one: above the service's other threads, so a busy machine
 * delays the clock less. Needs root or CAP_SYS_NICE for a value below 0; without, it stays as is.
 */
function prioritize(nice: number | undefined): void {
  if (nice === undefined) return;
  try {
    const tid = Number(/task\/(\d+)$/.exec(readlinkSync('/proc/thread-self'))?.[1]);
    if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, nice);
  } catch (e) {
    post({ op: 'warn', message: `media thread priority ${nice} not set (${(e as Error).message}); frames may be late on a busy machine` });
  }
}
prioritize(data.nice);

// The clock.
let start = performance.now();
let ticks = 0;
let caughtUp = 0;
let skipped = 0;
/** Ticks run back to back at most when the clock fired late; older ones are skipped. */
const MAX_CATCH_UP = 3;
let timer: NodeJS.Timeout | undefined;
const lateness: number[] = [];
let lateMax = 0;
const cpuStart = process.cpuUsage();

function schedule(): void {
  if (timer || sessions.size === 0) return;
  const due = start + (ticks + 1) * TICK_MS;
  timer = setTimeout(fire, Math.max(0, due - performance.now()));
}

function fire(): void {
  timer = undefined;
  const now = performance.now();
  let due = Math.floor((now + 0.5 - start) / TICK_MS) - ticks;
  if (due > 0) {
    const late = now - (start + (ticks + 1) * TICK_MS);
    if (lateness.length < 100_000) lateness.push(late);
    if (late > lateMax) lateMax = late;
  }
  // Far behind (the thread got no CPU for a while): the ticks beyond MAX_CATCH_UP are skipped, not
  // run in a burst that would take longer still. Each call's media clock jumps by them (the far end
  // hears a gap); prompts go on where they were.
  if (due > MAX_CATCH_UP) {
    const skip = due - MAX_CATCH_UP;
    ticks += skip;
    skipped += skip;
    for (const s of sessions.values()) s.skip(skip);
    due = MAX_CATCH_UP;
  }
  for (let i = 0; i < due; i++) {
    ticks += 1;
    if (i > 0) caughtUp += 1;
    rooms.tick();
    for (const s of sessions.values()) s.tick();
  }
  schedule();
}

function engineStats(): EngineStats {
  const sorted = [...lateness].sort((a, b) => a - b);
  const cpu = process.cpuUsage(cpuStart);
  return {
    sessions: sessions.size, ticks, caughtUp, skipped,
    lateP99Ms: sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]! : 0,
    lateMaxMs: lateMax, cpuUserMs: cpu.user / 1000, cpuSystemMs: cpu.system / 1000,
  };
}

async function session(id: string): Promise<MediaSession> {
  const s = sessions.get(id) ?? (await pending.get(id));
  if (!s) throw new Error(`no media session ${id}`);
  return s;
}

async function handle(m: ToMedia): Promise<void> {
  switch (m.op) {
    case 'open': {
      if (sessions.size === 0 && !timer) {
        // A fresh clock: ticks from now.
        start = performance.now();
        ticks = 0;
      }
      const opening = MediaSession.open(m.id, host, m.host, range);
      pending.set(m.id, opening);
      try {
        const s = await opening;
        sessions.set(m.id, s);
        schedule();
        return post({ op: 'reply', rid: m.rid, port: s.port });
      } finally {
        pending.delete(m.id);
      }
    }
    case 'setup':
      (await session(m.id)).setup(m.setup);
      return post({ op: 'reply', rid: m.rid });
    case 'play':
      return (await session(m.id)).play(m.playId, m.samples);
    case 'stopPlay':
      return (await session(m.id)).stopPlaying();
    case 'dtmf':
      await (await session(m.id)).sendDtmf(m.keys);
      return post({ op: 'reply', rid: m.rid });
    case 'record':
      (await session(m.id)).startRecording(m.path, m.channels, m.silence);
      return post({ op: 'reply', rid: m.rid });
    case 'listen':
      (await session(m.id)).listen(m.vad);
      return post({ op: 'reply', rid: m.rid });
    case 'stopRecord':
      return post({ op: 'reply', rid: m.rid, recording: await (await session(m.id)).stopRecording() });
    case 'close': {
      const s = sessions.get(m.id) ?? (await pending.get(m.id)?.catch(() => undefined));
      sessions.delete(m.id);
      rooms.leave(m.id);
      const recording = s ? await s.close() : undefined;
      return post({ op: 'reply', rid: m.rid, recording, stats: s?.stats() });
    }
    case 'stats':
      return post({ op: 'reply', rid: m.rid, engine: engineStats() });
    case 'join': {
      const s = await session(m.id);
      s.mix(rooms.join(m.room, m.id, m.muted));
      return post({ op: 'reply', rid: m.rid });
    }
    case 'leave':
      if (rooms.leave(m.id)) sessions.get(m.id)?.mix(undefined);
      return post({ op: 'reply', rid: m.rid });
  }
}

port.on('message', (m: ToMedia) => {
  handle(m).catch((e: Error) => {
    if ('rid' in m) post({ op: 'reply', rid: m.rid, error: e.message });
    else post({ op: 'warn', id: 'id' in m ? m.id : undefined, message: e.message });
  });
});
