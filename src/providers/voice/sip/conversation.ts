/**
 * An agent talking on a live call (AgentTalk), over the media port only: the far end's utterances
 * (voice activity detection in the media thread) are transcribed by speech to text, answered by
 * the agent (`talk.reply`: the agents' own turn code) and spoken by text to speech. Turns are taken
 * one after another, in the order they were spoken.
 *
 * Barge-in: the far end's voice stops what is being spoken at once (stopPlaying), and starts a new
 * turn: an answer still being prepared for an earlier utterance is then not spoken (the far end
 * has said something since; that answer stays in the conversation's transcript).
 */
import type { AgentTalk } from '../types.ts';
import type { ListenOptions, MediaCall, Utterance } from '../media/port.ts';
import type { SpeechToText } from '../media/stt.ts';

/** One answered utterance's timings (ms): the hangover that found its end, speech to text, the agent's turn; `answeredAt` (performance.now()) when the answer was handed to text to speech. */
export type TurnTiming = { silentMs: number; sttMs: number; agentMs: number; answeredAt: number; spoken: boolean; heard: string };

export type ConversationOptions = {
  media: MediaCall;
  stt: SpeechToText;
  listen: ListenOptions;
  talk: AgentTalk;
  /** Whether the call is still up with this media. */
  up: () => boolean;
  log: (level: 'warn' | 'info', message: string, detail?: Record<string, unknown>) => void;
  onTurn?: (timing: TurnTiming) => void;
};

export class CallConversation {
  readonly #o: ConversationOptions;
  /** Counts the far end's utterances begun: an answer is spoken only if no other began since its own. */
  #turn = 0;
  #turns: Promise<void> = Promise.resolve();
  #ended = false;

  constructor(options: ConversationOptions) {
    this.#o = options;
  }

  /** Starts listening, then speaks the greeting. */
  async start(): Promise<void> {
    const { media, talk } = this.#o;
    media.onVoiceStart(() => {
      if (this.#ended) return;
      this.#turn += 1;
      media.stopPlaying();
    });
    media.onUtterance((u) => {
      const turn = this.#turn;
      this.#turns = this.#turns.then(() => this.#answer(u, turn)).catch((e: Error) => this.#o.log('warn', `voice agent: turn failed: ${e.message}`));
    });
    await media.listen(this.#o.listen);
    if (talk.greeting?.trim()) this.#speak(talk.greeting, this.#turn);
  }

  async #answer(u: Utterance, turn: number): Promise<void> {
    if (this.#ended || !this.#o.up()) return;
    const { stt, talk } = this.#o;
    const t0 = performance.now();
    const heard = (await stt.transcribeSamples(u.samples, { language: talk.language })).trim();
    const t1 = performance.now();
    // Nothing recognised (a cough, a noise): no turn.
    if (!heard || !this.#o.up()) return;
    const reply = await talk.reply(heard);
    const t2 = performance.now();
    if (!reply) return;
    if (reply.ended) {
      this.#ended = true;
      await this.#o.media.stopListening().catch(() => undefined);
    }
    const spoken = turn === this.#turn && !!reply.text.trim();
    this.#o.onTurn?.({ silentMs: u.silentMs, sttMs: t1 - t0, agentMs: t2 - t1, answeredAt: t2, spoken, heard });
    if (spoken) this.#speak(reply.text, turn);
  }

  #speak(text: string, turn: number): void {
    if (turn !== this.#turn || !this.#o.up()) return;
    this.#o.media.play({ text, language: this.#o.talk.language }).catch((e: Error) => this.#o.log('warn', `voice agent: answer not spoken: ${e.message}`));
  }
}
