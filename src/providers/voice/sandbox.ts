/**
 * Sandbox voice gateway, used by test-mode keys. It behaves like a carrier: after the placement
 * the destination rings, then answers (or not), and each step arrives later as a gateway event
 * through the sink (in the app a durable, delayed row of its sandbox timeline). No audio leaves the process.
 *
 * Magic destinations (exported as SANDBOX_CALL_MAGIC; the README documents them):
 *
 * | to            | behaviour                                                                    |
 * |---------------|------------------------------------------------------------------------------|
 * | +15005550006  | rings, then `busy`                                                           |
 * | +15005550007  | rings for noAnswerMs, then `no_answer`                                       |
 * | +15005550008  | rings, then `failed` with SIP 503                                            |
 * | +15005550009  | answers, presses DTMF `1` one second later, hangs up 5 s after answering     |
 * | +15005550010  | answers, speaks a 10-second message, then hangs up                           |
 * | anything else | answers and stays connected until hangup or max_duration                     |
 *
 * Timings: ringing after ringMs, answered ringMs + answerMs after the placement.
 */
import { createHash } from 'node:crypto';
import { chainScript, type CallOrder, type GatewayEvent, type GatewayEventSink, type PlaceResult, type PlaceScript, type Transcriber, type VoiceGateway } from './types.ts';

export const SANDBOX_CALL_MAGIC = {
  busy: '+15005550006',
  noAnswer: '+15005550007',
  failed: '+15005550008',
  dtmfThenHangup: '+15005550009',
  voicemail: '+15005550010',
} as const;

export type SandboxCallTimings = { ringMs: number; answerMs: number; noAnswerMs: number };

type Step = Omit<GatewayEvent, 'callId' | 'seq'> & { afterMs: number };

/** The script of a call to `to`: what happens, and when (ms after the placement). */
export function sandboxScript(to: string, t: SandboxCallTimings): Step[] {
  const ring: Step = { type: 'ringing', afterMs: t.ringMs };
  const answeredAt = t.ringMs + t.answerMs;
  switch (to) {
    case SANDBOX_CALL_MAGIC.busy:
      return [ring, { type: 'busy', afterMs: t.ringMs + t.answerMs }];
    case SANDBOX_CALL_MAGIC.noAnswer:
      return [ring, { type: 'no_answer', afterMs: t.ringMs + t.noAnswerMs }];
    case SANDBOX_CALL_MAGIC.failed:
      return [ring, { type: 'failed', sipCode: 503, afterMs: t.ringMs + t.answerMs }];
    case SANDBOX_CALL_MAGIC.dtmfThenHangup:
      return [ring, { type: 'answered', afterMs: answeredAt }, { type: 'dtmf', digits: '1', afterMs: answeredAt + 1000 }, { type: 'completed', afterMs: answeredAt + 5000 }];
    case SANDBOX_CALL_MAGIC.voicemail:
      return [ring, { type: 'answered', afterMs: answeredAt }, { type: 'speech', seconds: 10, afterMs: answeredAt + 10_000 }, { type: 'completed', afterMs: answeredAt + 10_000 }];
    default:
      return [ring, { type: 'answered', afterMs: answeredAt }];
  }
}

/** A stable reference per call: the same placement twice gives the same reference. */
export function sandboxReference(callId: string): string {
  return `SBXCALL${createHash('sha256').update(callId).digest('hex').slice(0, 24)}`;
}

export class SandboxVoiceGateway implements VoiceGateway {
  readonly name = 'sandbox';
  readonly #sink: GatewayEventSink;
  readonly #timings: SandboxCallTimings;

  constructor(options: { sink: GatewayEventSink; timings: SandboxCallTimings }) {
    this.#sink = options.sink;
    this.#timings = { ...options.timings };
  }

  /**
   * Schedules the script's first step carrying the rest (chainScript: each applied step schedules the
   * next); the sink makes a repeated event a no-op (its rows are keyed by callId and seq).
   */
  async place(order: CallOrder): Promise<PlaceResult> {
    const script = this.script(order);
    const first = chainScript(script, Date.now());
    if (first) await this.#sink.schedule(first.event, first.delayMs);
    return { reference: script.reference };
  }

  /** The call's script (what `place` schedules), for the app to commit with the call. */
  script(order: CallOrder): PlaceScript {
    const steps = sandboxScript(order.to, this.#timings);
    return { reference: sandboxReference(order.callId), events: steps.map(({ afterMs, ...event }, i) => ({ event: { ...event, callId: order.callId, seq: i + 1 }, delayMs: afterMs })) };
  }

  async hangup(): Promise<void> {
    // Events scheduled for an ended call are ignored when applied (statuses only move forward).
  }
}

/** Deterministic transcription: the same message always reads the same. */
export class SandboxTranscriber implements Transcriber {
  async transcribe(input: { messageId: string; seconds: number; caller: string }): Promise<string> {
    return `Sandbox transcription: a ${input.seconds}-second message from ${input.caller}. Please call me back.`;
  }
}
