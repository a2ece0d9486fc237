/**
 * The media port: what a live call's signalling (the SIP gateway) asks of the media side. It
 * deals in SDP bodies, prompts, keys and recordings; RTP, codecs and keys stay behind it.
 *
 *   outbound: offer() → the INVITE carries call.localSdp → the 200's SDP goes to call.accept()
 *   inbound:  answer(remote offer) → the 200 carries call.localSdp
 *   then:     play(prompt), onDigit(key), sendDigits(keys), startRecording(), listen() for utterances,
 *             join(room) to hear and be heard by other calls (a bridge, a conference), close() at the BYE.
 */
import type { SpeechRequest } from './tts.ts';
import type { RecordingDone } from './protocol.ts';

export type Encryption = 'tls_srtp' | 'tls' | 'none';

export type MediaErrorCode =
  | 'MEDIA_CODEC_MISMATCH'
  | 'MEDIA_SRTP_REQUIRED'
  | 'MEDIA_STREAM_REJECTED'
  | 'MEDIA_SDP_INVALID'
  | 'MEDIA_UNAVAILABLE'
  | 'MEDIA_PROMPT_FAILED';

/** A media failure, with the code the call's error_code takes. */
export class MediaError extends Error {
  readonly code: MediaErrorCode;
  constructor(code: MediaErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MediaError';
    this.code = code;
  }
}

/** A prompt: a WAV file on this machine, text spoken by the text-to-speech adapter, or a tone (a beep). */
export type Prompt = { file: string } | ({ text: string } & Omit<SpeechRequest, 'text'>) | { tone: { hz: number; ms: number } };

/**
 * A recording that listens for the far end's voice: a 20 ms frame at or above `thresholdDbfs` (RMS,
 * dB of full scale) is voice; silence is reported (onSilence) after `ms` without voice, or
 * `initialMs` from the start while the far end has not spoken yet.
 */
export type SilenceOptions = { thresholdDbfs: number; ms: number; initialMs: number };

/**
 * Listening for the far end's utterances (voice activity detection on its 20 ms frames): a frame at
 * or above `thresholdDbfs` is voice; an utterance starts after `startMs` of voice in a row and ends
 * after `hangoverMs` without voice (or at `maxMs`).
 */
export type ListenOptions = { thresholdDbfs: number; startMs: number; hangoverMs: number; maxMs: number };

/** What the far end said: its audio (8 kHz mono samples), and how long ago it stopped speaking (the hangover). */
export type Utterance = { samples: Int16Array; seconds: number; silentMs: number };

export type MediaCallSpec = {
  /** Our call id (names the media session). */
  callId: string;
  /** The address our SDP gives for media (the signalling's local address). */
  address: string;
  /** The local address the RTP sockets bind (default `address`; e.g. 0.0.0.0 behind a NAT that `address` names). */
  bindAddress?: string;
  encryption: Encryption;
  /** The trunk's codecs in its order of preference; those the engine speaks are offered. */
  codecs: readonly string[];
  /** The far end is reported inactive (onInactive) after this long without RTP (undefined: never). */
  inactivityMs?: number;
};

export type PlayOutcome = { completed: boolean };

export interface MediaCall {
  readonly callId: string;
  /** Our SDP: the offer (outbound) or the answer (inbound). */
  readonly localSdp: string;
  /** The far end's answer to our offer; media flows from here. Throws MediaError when it cannot be used. */
  accept(remoteSdp: string): Promise<void>;
  /** Plays a prompt after what plays already; resolves when it ends (completed) or is stopped. */
  play(prompt: Prompt): Promise<PlayOutcome>;
  stopPlaying(): void;
  /** Sends keys as RFC 4733 events. */
  sendDigits(keys: string): Promise<void>;
  onDigit(listener: (key: string) => void): void;
  /** The far end sent no RTP for the spec's `inactivityMs` (reported once). */
  onInactive(listener: (silentMs: number) => void): void;
  /** Records both directions to a WAV file: mono mix (1) or two channels (2: far end left, service right); `silence` watches the far end. */
  startRecording(options: { path: string; channels: 1 | 2; silence?: SilenceOptions }): Promise<void>;
  /** The recording's silence watch fired (reported once per recording). */
  onSilence(listener: (silentMs: number) => void): void;
  /**
   * Ends the recording. `trimToVoice` (a recording with a silence watch): the file keeps only the
   * far end's voiced span with `padMs` around it; a recording in which the far end never spoke is
   * deleted (answered without `voiced`).
   */
  stopRecording(options?: { trimToVoice?: { padMs: number } }): Promise<RecordingDone | undefined>;
  /**
   * Mixes the call's audio in the room `room` (made with its first call, gone with its last): each
   * call in a room hears all the others and not itself (two calls: a bridge; more: a conference).
   * `muted`: the call hears the others and is not heard. Joining the same room again changes the
   * mute; another room moves the call. Prompts still play over the mix; keys are not carried.
   */
  join(room: string, options?: { muted?: boolean }): Promise<void>;
  /** Takes the call out of its room (closing the call does too). */
  leave(): Promise<void>;
  /** Listens for the far end's utterances (ListenOptions) until stopListening or close. */
  listen(options: ListenOptions): Promise<void>;
  stopListening(): Promise<void>;
  /** Listening: the far end began to speak (reported as soon as it is heard: barge-in). */
  onVoiceStart(listener: () => void): void;
  /** Listening: the far end finished an utterance. */
  onUtterance(listener: (utterance: Utterance) => void): void;
  /** Ends the media; answers the recording still running, if any. */
  close(): Promise<RecordingDone | undefined>;
}

export interface MediaPort {
  /** Why live media cannot run on this machine (a missing package), or undefined when it can. */
  missing(): string | undefined;
  /** An outbound call's media and its SDP offer. */
  offer(spec: MediaCallSpec): Promise<MediaCall>;
  /** An inbound call's media answering the far end's offer. Throws MediaError (e.g. no common codec). */
  answer(spec: MediaCallSpec & { remoteSdp: string }): Promise<MediaCall>;
  close(): Promise<void>;
}

export type { RecordingDone };
