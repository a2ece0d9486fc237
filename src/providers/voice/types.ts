/**
 * The voice-gateway port: places and ends calls and reports what happens on them later, as
 * gateway events (the sandbox through durable rows of its timeline; a real gateway through its signalling). The
 * gateway never sees our entities, only these shapes.
 */
export type CallOrder = {
  /** Our call id; also the idempotency key of the placement. */
  callId: string;
  from: string;
  to: string;
  record: boolean;
  /** Live calls: the organization's SIP trunk (the sandbox needs none). */
  trunk?: TrunkOrder;
};

/** A SIP trunk as the gateway uses it: where calls go, and the credentials for digest challenges. */
export type TrunkOrder = {
  uri: string;
  username: string | null;
  password: string | null;
  encryption: 'tls_srtp' | 'tls' | 'none';
  codecs: readonly string[];
};

export type GatewayEventType = 'ringing' | 'answered' | 'dtmf' | 'speech' | 'prompted' | 'completed' | 'busy' | 'no_answer' | 'failed' | 'recorded';

/** Something the gateway observed on a call. `seq` orders the events of one call. */
export type GatewayEvent = {
  callId: string;
  seq: number;
  type: GatewayEventType;
  /** dtmf: the keys pressed. */
  digits?: string;
  /** speech: seconds the far end spoke (a message left on voicemail). */
  seconds?: number;
  /** speech on a live call: the id its audio was recorded under (the MessageOrder's `recording`). */
  recording?: string;
  /** failed: the SIP status the far end answered. */
  sipCode?: number;
  /** failed: the call's error_code when it is not SIP_ERROR (a media failure: MEDIA_CODEC_MISMATCH, …), and why (`message`; completed with end reason voicemail: what ended the message). */
  errorCode?: string;
  message?: string;
  /**
   * completed: the call's end_reason when it is not `remote` (media_timeout: the far end sent no
   * audio; voicemail: a message was taken and we hung up, `message` saying what ended it: silence, key or limit;
   * transfer_failed: the leg it was transferred to did not answer, `message` its outcome, `errorCode`
   * TRANSFER_FAILED; transfer_ended: the other leg of its bridge ended). A call never answered ends `cancelled`.
   */
  endReason?: 'media_timeout' | 'voicemail' | 'transfer_failed' | 'transfer_ended';
  /** prompted: the IVR prompt (its number) that has been spoken to its end on a live call. */
  prompt?: number;
  /** recorded: seconds of audio in the call's recording (written once the call's media closed). */
  recordedSeconds?: number;
  /** answered: the gateway's new reference for the call (a SIP dialog's identity, for a later hangup). */
  reference?: string;
  /**
   * A scripted call's steps still to come (the sandbox), soonest first: the change that applies this
   * event schedules the first of them, carrying the rest, so a call stores one pending step at a
   * time, and a call that ended meanwhile schedules nothing more (like a carrier, whose later events
   * follow from what happened, not from a plan stored up front).
   */
  then?: readonly ScriptNext[];
};

/** A step of a call's script after the current one, due at `dueMs` (ms since the epoch). */
export type ScriptNext = { event: GatewayEvent; dueMs: number };

/**
 * A script as one chain: its first event (due `delayMs` after `placedMs`, ms since the epoch)
 * carrying the others with their due times (GatewayEvent.then). Undefined for an empty script.
 */
export function chainScript(script: PlaceScript, placedMs: number): { event: GatewayEvent; delayMs: number } | undefined {
  const [first, ...rest] = script.events;
  if (!first) return undefined;
  const then = rest.map(({ event, delayMs }) => ({ event, dueMs: placedMs + delayMs }));
  return { event: then.length > 0 ? { ...first.event, then } : first.event, delayMs: first.delayMs };
}

/** The step after `event` (with the rest of its chain), or undefined at the chain's end. */
export function nextInChain(event: GatewayEvent): ScriptNext | undefined {
  const [next, ...rest] = event.then ?? [];
  if (!next) return undefined;
  return { event: rest.length > 0 ? { ...next.event, then: rest } : next.event, dueMs: next.dueMs };
}

/** Where a gateway's later events go (in the app: a durable job or sandbox timeline row that applies them). */
export type GatewayEventSink = { schedule(event: GatewayEvent, delayMs: number): Promise<void> };

export type PlaceResult = { reference: string };

/** What placing a call would schedule: its reference and its later events, each `delayMs` after the placement. */
export type PlaceScript = { reference: string; events: { event: GatewayEvent; delayMs: number }[] };

export class GatewayError extends Error {
  readonly sipCode: number | undefined;
  /** The call's error_code when it is neither SIP_ERROR (a SIP answer) nor VOICE_GATEWAY_ERROR (unreachable). */
  readonly errorCode: string | undefined;
  constructor(message: string, sipCode?: number, errorCode?: string) {
    super(message);
    this.name = 'GatewayError';
    this.sipCode = sipCode;
    this.errorCode = errorCode;
  }
}

export interface VoiceGateway {
  readonly name: string;
  /** Places the call once per `callId`: a repeated call answers the first reference and schedules nothing. */
  place(order: CallOrder): Promise<PlaceResult>;
  /**
   * A gateway whose placement only schedules later events (the sandbox) may say which, without
   * scheduling them: the app then commits them with the call instead of placing it later.
   */
  script?(order: CallOrder): PlaceScript;
  /** Ends the call at the gateway (BYE or CANCEL). Safe on an ended call. */
  hangup(callId: string, reference: string | null): Promise<void>;
  /** Live media: whether this process carries the call's audio (it can speak prompts on it). */
  speaks?(callId: string): boolean;
  /**
   * Speaks the texts in turn on the call (what still plays stops first); when all were spoken to
   * their end it reports a `prompted` event with `prompt`. A key from the far end stops them.
   */
  say?(callId: string, speech: Speech): void;
  /**
   * Transfers a call whose audio this process carries: `second` stores the second leg and says
   * where it goes (its CallOrder); it is placed on the trunk and, once it answers, the two calls
   * hear each other (the first hears silence meanwhile). Either leg's end ends the other. False
   * when the call's audio is not here (nothing is placed).
   */
  bridge?(callId: string, second: () => Promise<CallOrder>): boolean;
  /** Mixes the call's audio in the conference room `room` (`muted`: it hears, it is not heard). False when its audio is not here. */
  join?(callId: string, room: string, muted: boolean): boolean;
  /**
   * An agent talks with the far end of a live call whose audio this process carries (speaks()):
   * AgentTalk. False when it cannot here (no media for the call, no speech to text).
   */
  converse?(callId: string, talk: AgentTalk): boolean;
}

/** What an agent answered to an utterance (`ended`: its conversation ended with this answer). */
export type AgentReply = { text: string; ended: boolean };

/**
 * An agent on a live call: `greeting` is spoken first; then each utterance of the far end (its end
 * found by voice activity detection) is transcribed by speech to text and answered by `reply`,
 * whose text is spoken. The far end's voice stops what is being spoken (barge-in), and an answer
 * to an utterance the far end has spoken over since is not spoken. After an answer that ends the
 * conversation nothing more is heard.
 */
export type AgentTalk = { language: string; greeting?: string; reply(text: string): Promise<AgentReply | undefined> };

/**
 * An INVITE that is not ours (a call coming in on a trunk): where it came from and whom it calls.
 * `to` and `from` are the Request-URI's and From's user parts, E.164 when they are numbers.
 */
export type InboundOffer = { sourceHost: string; to: string; from: string };

/**
 * What the app makes of an inbound INVITE: a refusal (a SIP status: 403 unknown source, 404 unknown
 * number, 480 no route), or the call it became (stored, `initiating`), answered with media on the
 * trunk's terms; the gateway then reports it `answered` like an outbound call. `transfer`: the
 * call is forwarded once answered (VoiceGateway.bridge with it).
 */
export type InboundDecision =
  | { refuse: number; reason: string }
  | { callId: string; record: boolean; encryption: TrunkOrder['encryption']; codecs: readonly string[]; voicemail?: MessageOrder; transfer?: () => Promise<CallOrder> };

/**
 * Take a voicemail message on a live call: speak `greeting`, beep, record the far end until it is
 * silent (the gateway's silence settings), presses `#` (RFC 4733 or SIP INFO), hangs up, or
 * `maxSeconds` pass. The recording (mono WAV, cut to the caller's voice) is written under the id
 * `recording`; the gateway reports `speech` with its seconds and `recording` (nothing when the
 * caller never spoke), then hangs up (`completed`, end reason `voicemail`) unless the caller did.
 */
export type MessageOrder = { greeting: string; language: string; recording: string; maxSeconds: number };

export type InboundRouter = (offer: InboundOffer) => Promise<InboundDecision>;

/** Prompts to speak on a live call: texts in one language, reported as prompt number `prompt` once spoken. */
export type Speech = { prompt: number; texts: readonly string[]; language: string };

/** Speech to text for voicemail messages. */
export interface Transcriber {
  transcribe(input: { messageId: string; seconds: number; caller: string }): Promise<string>;
}

export type VoiceGateways = { forMode(mode: 'live' | 'test'): VoiceGateway | undefined; transcriber: Transcriber };
