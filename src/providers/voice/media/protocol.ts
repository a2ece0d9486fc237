/**
 * The messages between the media engine (the service's thread) and its media thread, which owns
 * the RTP sockets and the 20 ms clock. Audio to play crosses as 8 kHz 16-bit samples in shared
 * memory (a prompt played on many calls is never copied).
 */
import type { G711 } from './g711.ts';
import type { SrtpKey } from './srtp.ts';
import type { VadOptions } from './vad.ts';

export type Endpoint = { host: string; port: number };

export type SessionSetup = {
  /** The far end's RTP and RTCP addresses (from its SDP); symmetric RTP latches on what it sends. */
  remote: Endpoint;
  remoteRtcp: Endpoint;
  codec: G711;
  payloadType: number;
  /** telephone-event payload type both ways (undefined: the far end does not take RFC 4733 events). */
  dtmfPayloadType: number | undefined;
  /** SRTP: our key (what we send) and the far end's (what we receive). */
  srtp?: { send: SrtpKey; receive: SrtpKey };
  /** Reported (`inactive`, once) when no valid RTP arrives for this long after setup (undefined: never). */
  inactivityMs?: number;
};

export type ToMedia =
  | { op: 'open'; rid: number; id: string; host: string }
  | { op: 'setup'; rid: number; id: string; setup: SessionSetup }
  | { op: 'play'; id: string; playId: number; samples: Int16Array }
  | { op: 'stopPlay'; id: string }
  | { op: 'dtmf'; rid: number; id: string; keys: string }
  | { op: 'record'; rid: number; id: string; path: string; channels: 1 | 2; silence?: SilenceWatch }
  | { op: 'stopRecord'; rid: number; id: string }
  | { op: 'listen'; rid: number; id: string; vad?: VadOptions }
  | { op: 'close'; rid: number; id: string }
  | { op: 'stats'; rid: number }
  /** Mixes the session's audio in room `room` (mixer.ts: created with its first member), or changes its mute there. */
  | { op: 'join'; rid: number; id: string; room: string; muted: boolean }
  | { op: 'leave'; rid: number; id: string };

/**
 * A recording that watches the far end: a frame it sends whose RMS is at least `rms` (of 32,768) is
 * voice; `silence` is reported once when no voice came for `ms` after the last voiced frame, or
 * for `initialMs` since the recording started when none came yet.
 */
export type SilenceWatch = { rms: number; ms: number; initialMs: number };

/** `voiced`: with a silence watch, the span of the far end's voice (seconds from the recording's start), if it spoke. */
export type RecordingDone = { path: string; seconds: number; channels: 1 | 2; bytes: number; voiced?: { from: number; until: number } };

export type SessionStats = {
  sent: number;
  received: number;
  lost: number;
  /** Interarrival jitter of what we receive (ms, RFC 3550). */
  jitterMs: number;
};

export type EngineStats = {
  sessions: number;
  /** Ticks of the 20 ms clock and how late they fired (ms): the media thread's own pacing. */
  ticks: number;
  lateP99Ms: number;
  lateMaxMs: number;
  /** Frames sent late by more than one tick (the clock caught up with a burst). */
  caughtUp: number;
  /** Ticks skipped because the thread was too far behind (each call's stream has a gap there). */
  skipped: number;
  cpuUserMs: number;
  cpuSystemMs: number;
};

export type FromMedia =
  | { op: 'reply'; rid: number; error?: string; port?: number; recording?: RecordingDone; stats?: SessionStats; engine?: EngineStats }
  | { op: 'dtmf'; id: string; key: string }
  | { op: 'played'; id: string; playId: number; completed: boolean }
  | { op: 'latched'; id: string; remote: Endpoint }
  | { op: 'inactive'; id: string; silentMs: number }
  | { op: 'silence'; id: string; silentMs: number }
  /** Listening: the far end began an utterance; it ended (`silentMs` ago) with this audio (8 kHz). */
  | { op: 'voice'; id: string }
  | { op: 'utterance'; id: string; samples: Int16Array; silentMs: number }
  | { op: 'warn'; id?: string; message: string };
