/**
 * The live voice gateway: places calls on the organization's SIP trunk by SIP signalling (RFC 3261)
 * over UDP, TCP or TLS, and reports what happens on them as gateway events.
 *
 * A call is an INVITE to `sip:<to>@<trunk host>` (digest authentication with the trunk's
 * credentials on a 401/407), then: 180/183 → `ringing`; 200 → ACK, `answered`; 486/600 → `busy`;
 * 408/480 or no answer at all (timer B) → `no_answer`; any other 4xx/5xx/6xx → `failed` with the
 * SIP code; the far end's BYE → 200, `completed`; a SIP INFO with DTMF (`application/dtmf-relay`)
 * → `dtmf`. Hangup sends CANCEL before an answer and BYE after one.
 *
 * Media: with a media port (providers/voice/media) the INVITE carries its SDP offer, the 200's
 * answer is handed to it (a far end it cannot use, e.g. no common codec, is ACKed, sent a BYE and
 * reported `failed` with the media error's code), keys from RFC 4733 events are `dtmf` like SIP
 * INFO ones (and stop what plays), `say` speaks prompts (reported `prompted` when spoken to their
 * end), a call with `record` is recorded to `<recordingsDir>/<call id>.wav` (`recorded` once its
 * media closed), and a far end that sends no RTP for `inactivityMs` is sent a BYE and reported
 * `completed` with end reason `media_timeout`. Without one, the offer names the trunk's codecs on
 * a port nothing listens on (signalling only).
 *
 * Inbound calls (onInbound): an INVITE outside our dialogs is answered 100, routed by the app
 * (voice's inbound/router.ts: a refusal's status, or the stored call), its SDP offer answered by the media
 * port, and the 200 carries that answer; the call is then reported `answered` and goes as an
 * outbound one (keys, prompts, BYE either way). Without a router or media port it is declined 603.
 * A decision with `voicemail` (MessageOrder) has the call take a message once answered: greeting,
 * beep, the far end recorded with a silence watch until silence, `#`, its BYE or the limit; the
 * recording cut to its voice is reported `speech` (before the end), then we send a BYE
 * (`completed`, end reason `voicemail`, `message` what ended it).
 *
 * The dialog lives in the process that placed the call; its identity travels in the call's gateway
 * reference (`sip1.` + base64url JSON), updated on answer, so any instance can hang it up.
 *
 * Every packet goes to an address the outbound policy allows (destinations.ts, checked when it is
 * sent): a trunk that resolves to a refused address fails the placement with nothing sent
 * (GatewayError `SIP_DESTINATION_BLOCKED`); a far end whose Contact or Record-Route names a
 * refused address gets the dialog's requests at the trunk's address instead; requests received
 * are answered at their source (the connection, or the datagram's address and port).
 */
import { randomBytes } from 'node:crypto';
import { addressUri, cseq, header, headers, param, parseSipUri, responseTo, stampVia, type SipMessage, type SipRequest, type SipResponse } from './message.ts';
import { digestAuthorization, parseChallenge, supported } from './digest.ts';
import { InviteClientTransaction, NonInviteClientTransaction, branchOf, DEFAULT_TIMERS, type SipTimers, type TransactionUser } from './transaction.ts';
import { SipTransport, type SipDestination, type SipSource, type SipTransportOptions } from './transport.ts';
import { SipDestinationBlocked } from './destinations.ts';
import path from 'node:path';
import { GatewayError, type AgentTalk, type CallOrder, type GatewayEvent, type GatewayEventSink, type InboundRouter, type MessageOrder, type PlaceResult, type Speech, type VoiceGateway } from '../types.ts';
import { MediaError, type ListenOptions, type MediaCall, type MediaPort, type SilenceOptions } from '../media/port.ts';
import type { SpeechToText } from '../media/stt.ts';
import { CallConversation, type TurnTiming } from './conversation.ts';

/** What a call needs to know of its dialog, carried in the gateway reference. */
type DialogRef = {
  v: 1;
  /** SIP Call-ID, From and To (with tags once known), the INVITE's branch and CSeq number, Request-URI. */
  cid: string; from: string; to: string; branch: string; seq: number; uri: string;
  /** Where requests go: the trunk (before the answer), the remote target after it. */
  dest: SipDestination;
  target?: string;
  routes?: string[];
};

type Leg = {
  callId: string;
  order: CallOrder;
  dialog: DialogRef;
  invite: SipRequest;
  tx: InviteClientTransaction | undefined;
  state: 'calling' | 'early' | 'confirmed' | 'ended';
  events: number;
  authTried: boolean;
  /** Hangup asked before any provisional response: CANCEL as soon as one comes (§9.1). */
  cancelPending: boolean;
  /** We ended it: the final answers that follow (487, our BYE's 200) report nothing. */
  endedByUs: boolean;
  ringing: boolean;
  /** The call's media (with a media port), until the call ends. */
  media: MediaCall | undefined;
  /** The leg's events and media steps, in order (an event waits for the media steps before it). */
  chain: Promise<void>;
  /** An inbound call: our 200 to its INVITE, sent again when the INVITE is. */
  answer?: { response: SipResponse; source: SipSource };
  /** A voicemail message being taken (takeMessage). */
  message?: Taking;
  /** A transfer (bridge()): the other leg's call id, and whether this is the call transferred or the leg it went to. */
  bridged?: { peer: string; role: 'transferred' | 'target' };
  /** The two legs hear each other (their audio is mixed). */
  joined?: boolean;
  /** An outgoing leg that ended unanswered: how (busy, no_answer, failed with its SIP code or media error). */
  outcome?: string;
};

/** Why a message's recording ended. */
type TakingEnd = 'silence' | 'key' | 'limit' | 'hangup';

type Taking = {
  order: MessageOrder;
  media: MediaCall;
  recording: boolean;
  ended: TakingEnd | undefined;
  /** Ends the recording (once). */
  stop(why: TakingEnd): void;
  /** The recording has been closed and reported (once). */
  reported: boolean;
};

/** The beep before a voicemail recording. */
const BEEP = { hz: 1000, ms: 400 };
/** Audio kept either side of the caller's voice in a voicemail recording. */
const MESSAGE_PAD_MS = 100;

const CODECS: Record<string, { pt: number; rtpmap: string }> = {
  PCMU: { pt: 0, rtpmap: 'PCMU/8000' },
  PCMA: { pt: 8, rtpmap: 'PCMA/8000' },
  G722: { pt: 9, rtpmap: 'G722/8000' },
  OPUS: { pt: 111, rtpmap: 'opus/48000/2' },
};

export type SipGatewayOptions = Omit<SipTransportOptions, 'onMessage' | 'onError'> & {
  sink: GatewayEventSink;
  log: (level: 'warn' | 'info', message: string, detail?: Record<string, unknown>) => void;
  timers?: SipTimers;
  /** User agent name in User-Agent. */
  userAgent?: string;
  /** Live media (RTP): without it, calls carry signalling only. */
  media?: {
    port: MediaPort;
    /** A far end silent (no RTP) this long is hung up (end reason media_timeout). */
    inactivityMs: number;
    /** Where call recordings are written (`<call id>.wav`). */
    recordingsDir: string;
    /** Voicemail recordings end after this much silence from the caller (below the threshold). */
    voicemailSilence?: SilenceOptions;
    /** Voice agents (converse): speech to text for the caller's utterances, and how their ends are found. */
    agents?: { stt: SpeechToText; listen: ListenOptions; onTurn?: (callId: string, timing: TurnTiming) => void };
  };
};

export class SipVoiceGateway implements VoiceGateway {
  readonly name = 'sip';
  readonly #transport: SipTransport;
  readonly #sink: GatewayEventSink;
  readonly #log: SipGatewayOptions['log'];
  readonly #timers: SipTimers;
  readonly #userAgent: string;
  readonly #media: SipGatewayOptions['media'];
  /** Our calls by call id, and by SIP Call-ID. */
  readonly #legs = new Map<string, Leg>();
  readonly #bySipId = new Map<string, Leg>();
  /** Client transactions by `branch method`. */
  readonly #transactions = new Map<string, InviteClientTransaction | NonInviteClientTransaction>();
  /** Where inbound INVITEs are routed (the calls service); without it they are declined 603. */
  #inbound: InboundRouter | undefined;
  /** Inbound INVITEs being routed, by SIP Call-ID (their retransmissions are absorbed). */
  readonly #routing = new Set<string>();
  /** Transfers' second legs being placed: their call id → the transferred call's. */
  readonly #transferOf = new Map<string, string>();

  constructor(opts: SipGatewayOptions) {
    this.#sink = opts.sink;
    this.#log = opts.log;
    this.#timers = opts.timers ?? DEFAULT_TIMERS;
    this.#userAgent = opts.userAgent ?? 'omnichannel-platform';
    this.#media = opts.media;
    this.#transport = new SipTransport({ ...opts, onMessage: (m, s) => this.#receive(m, s), onError: (e, where) => this.#log('warn', `sip: ${e.message}`, { where }) });
  }

  /** Takes inbound calls: INVITEs not in a dialog of ours are routed by `router` (needs the media port). */
  onInbound(router: InboundRouter): void {
    this.#inbound = router;
  }

  async place(order: CallOrder): Promise<PlaceResult> {
    const existing = this.#legs.get(order.callId);
    if (existing) return { reference: encodeRef(existing.dialog) };
    const trunk = order.trunk;
    if (!trunk) throw new GatewayError('no SIP trunk for this call');
    const uri = parseSipUri(trunk.uri);
    if (!uri) throw new GatewayError(`the trunk's termination_uri is not a SIP URI: ${trunk.uri}`);
    const transport = uri.scheme === 'sips' || uri.transport === 'tls' || (!uri.transport && trunk.encryption !== 'none') ? 'tls' : (uri.transport ?? 'udp');
    const dest: SipDestination = { host: uri.host, port: uri.port ?? (transport === 'tls' ? 5061 : 5060), transport };
    await this.#transport.start();
    const hostPort = `${dest.host.includes(':') ? `[${dest.host}]` : dest.host}${uri.port ? `:${uri.port}` : ''}`;
    const requestUri = `${transport === 'tls' ? 'sips' : 'sip'}:${order.to}@${hostPort}${transport === 'tcp' ? ';transport=tcp' : ''}`;
    const dialog: DialogRef = {
      v: 1, cid: `${order.callId}.${randomBytes(6).toString('hex')}`,
      from: `<sip:${order.from}@${this.#transport.sentBy(transport).replace(/:\d+$/, '')}>;tag=${randomBytes(6).toString('hex')}`,
      to: `<sip:${order.to}@${hostPort}>`, branch: '', seq: 1, uri: requestUri, dest,
    };
    const leg: Leg = {
      callId: order.callId, order, dialog, invite: undefined as unknown as SipRequest, tx: undefined, state: 'calling', events: 0, authTried: false, cancelPending: false, endedByUs: false, ringing: false,
      media: undefined, chain: Promise.resolve(),
    };
    const transferred = this.#transferOf.get(order.callId);
    if (transferred) leg.bridged = { peer: transferred, role: 'target' };
    if (this.#media) {
      const address = this.#transport.sentBy(transport).replace(/^\[|\]?:\d+$/g, '');
      try {
        leg.media = await this.#media.port.offer({
          callId: order.callId, address, bindAddress: this.#transport.bound.host, encryption: trunk.encryption, codecs: trunk.codecs, inactivityMs: this.#media.inactivityMs,
        });
      } catch (e) {
        if (e instanceof MediaError) throw new GatewayError(e.message, undefined, e.code);
        throw new GatewayError(`the call's media could not be opened: ${(e as Error).message}`, undefined, 'MEDIA_UNAVAILABLE');
      }
    }
    this.#legs.set(order.callId, leg);
    this.#bySipId.set(dialog.cid, leg);
    try {
      await this.#invite(leg, undefined);
    } catch (e) {
      leg.outcome = `failed (${e instanceof SipDestinationBlocked ? 'SIP_DESTINATION_BLOCKED' : 'VOICE_GATEWAY_ERROR'})`;
      this.#forget(leg);
      if (e instanceof SipDestinationBlocked) throw new GatewayError(`the SIP trunk ${dest.transport}:${dest.host}:${dest.port} is not an allowed destination: ${e.message}`, undefined, 'SIP_DESTINATION_BLOCKED');
      throw new GatewayError(`the SIP trunk ${dest.transport}:${dest.host}:${dest.port} is unreachable: ${(e as Error).message}`);
    }
    return { reference: encodeRef(dialog) };
  }

  /** Sends the INVITE (again with credentials after a challenge: a new branch and CSeq). */
  async #invite(leg: Leg, authorization: [string, string] | undefined): Promise<void> {
    const d = leg.dialog;
    d.branch = newBranch();
    const transport = d.dest.transport;
    const sdp = leg.media?.localSdp ?? this.#offer(leg.order.trunk!.codecs, transport);
    leg.invite = {
      kind: 'request', method: 'INVITE', uri: d.uri, body: sdp,
      headers: [
        ['via', `SIP/2.0/${transport.toUpperCase()} ${this.#transport.sentBy(transport)};branch=${d.branch};rport`],
        ['max-forwards', '70'],
        ['from', d.from], ['to', d.to], ['call-id', d.cid], ['cseq', `${d.seq} INVITE`],
        ['contact', `<sip:${leg.order.from}@${this.#transport.sentBy(transport)}${transport === 'udp' ? '' : `;transport=${transport}`}>`],
        ['allow', 'INVITE, ACK, CANCEL, BYE, OPTIONS, INFO'],
        ['user-agent', this.#userAgent],
        ...(authorization ? [authorization] : []),
        ['content-type', 'application/sdp'],
      ],
    };
    // The first send decides reachability (a TCP/TLS connection); retransmissions only log.
    await this.#transport.send(leg.invite, d.dest);
    const user: TransactionUser = {
      provisional: (r) => this.#provisional(leg, r),
      final: (r) => this.#inviteFinal(leg, r),
      timeout: () => this.#inviteFinal(leg, undefined),
    };
    let first = true;
    leg.tx = this.#track(new InviteClientTransaction({
      request: leg.invite, reliable: transport !== 'udp', timers: this.#timers, user,
      send: (m) => {
        if (first) { first = false; return; } // sent above
        this.#transport.send(m, d.dest).catch((e: Error) => this.#log('warn', `sip: resend failed: ${e.message}`, { call_id: leg.callId }));
      },
    }));
  }

  /** A minimal SDP offer: the trunk's codecs on a port nothing listens on (no media is exchanged). */
  #offer(codecs: readonly string[], transport: SipDestination['transport']): string {
    const host = this.#transport.sentBy(transport).replace(/^\[|\]?:\d+$/g, '');
    const known = codecs.map((c) => CODECS[c.toUpperCase()]).filter((c): c is { pt: number; rtpmap: string } => !!c);
    const list = known.length ? known : [CODECS.PCMU!];
    const family = host.includes(':') ? 'IP6' : 'IP4';
    const session = String(Date.now());
    return [
      'v=0', `o=- ${session} ${session} IN ${family} ${host}`, 's=-', `c=IN ${family} ${host}`, 't=0 0',
      `m=audio 9 RTP/AVP ${list.map((c) => c.pt).join(' ')} 101`,
      ...list.map((c) => `a=rtpmap:${c.pt} ${c.rtpmap}`), 'a=rtpmap:101 telephone-event/8000', 'a=fmtp:101 0-16', 'a=sendrecv', '',
    ].join('\r\n');
  }

  #provisional(leg: Leg, r: SipResponse): void {
    if (r.status === 100 || leg.state === 'ended') return;
    if (leg.state === 'calling') leg.state = 'early';
    if (leg.cancelPending) {
      leg.cancelPending = false;
      this.#cancel(leg.dialog, leg.invite);
      return;
    }
    if ((r.status === 180 || r.status === 183) && !leg.ringing) {
      leg.ringing = true;
      this.#emit(leg, { type: 'ringing' });
    }
  }

  /** The INVITE's final answer (undefined: timer B fired, taken as 408). */
  #inviteFinal(leg: Leg, r: SipResponse | undefined): void {
    const status = r?.status ?? 408;
    if (status >= 200 && status < 300 && r) return this.#answered(leg, r);
    if ((status === 401 || status === 407) && r && !leg.authTried && !leg.endedByUs && this.#retryWithCredentials(leg, r)) return;
    const ours = leg.endedByUs;
    leg.outcome = status === 486 || status === 600 ? 'busy' : status === 408 || status === 480 ? 'no_answer' : `failed (SIP ${status})`;
    this.#forget(leg);
    if (ours) return;
    if (status === 486 || status === 600) return this.#emit(leg, { type: 'busy' });
    if (status === 408 || status === 480) return this.#emit(leg, { type: 'no_answer' });
    this.#emit(leg, { type: 'failed', sipCode: status });
  }

  #retryWithCredentials(leg: Leg, r: SipResponse): boolean {
    const trunk = leg.order.trunk!;
    if (!trunk.username || trunk.password === null) return false;
    const proxy = r.status === 407;
    const challenge = parseChallenge(header(r, proxy ? 'proxy-authenticate' : 'www-authenticate') ?? '');
    if (!challenge || !supported(challenge)) return false;
    leg.authTried = true;
    leg.dialog.seq += 1;
    const value = digestAuthorization({ challenge, method: 'INVITE', uri: leg.dialog.uri, username: trunk.username, password: trunk.password });
    this.#invite(leg, [proxy ? 'proxy-authorization' : 'authorization', value]).catch((e: Error) => {
      this.#forget(leg);
      this.#emit(leg, { type: 'failed', sipCode: 503 });
      this.#log('warn', `sip: authenticated INVITE could not be sent: ${e.message}`, { call_id: leg.callId });
    });
    return true;
  }

  #answered(leg: Leg, r: SipResponse): void {
    const d = leg.dialog;
    d.to = header(r, 'to') ?? d.to;
    const contact = header(r, 'contact');
    d.target = contact ? addressUri(contact) : d.uri;
    d.routes = headers(r, 'record-route').reverse();
    // The ACK of a 2xx is the dialog's own request (§13.2.2.4), sent to the remote target.
    this.#ack(d, d.seq);
    if (leg.endedByUs || leg.cancelPending) {
      // Answered while we were hanging up: end it at once.
      leg.cancelPending = false;
      leg.endedByUs = true;
      this.#byeLogged(d);
      this.#forget(leg);
      return;
    }
    leg.state = 'confirmed';
    const media = leg.media;
    if (!media) return this.#emit(leg, { type: 'answered', reference: encodeRef(d) });
    this.#then(leg, async () => {
      try {
        await media.accept(r.body);
      } catch (e) {
        if (leg.state === 'ended') return this.#emitNow(leg, { type: 'answered', reference: encodeRef(d) });
        // A far end whose answer the media cannot use: the call fails with the media's code, not in silence.
        const code = e instanceof MediaError ? e.code : 'MEDIA_UNAVAILABLE';
        this.#log('warn', `sip: the far end's media answer was refused: ${(e as Error).message}`, { call_id: leg.callId, error_code: code });
        leg.endedByUs = true;
        leg.outcome = `failed (${code})`;
        this.#byeLogged(d);
        this.#forget(leg);
        return this.#emitNow(leg, { type: 'failed', errorCode: code, message: (e as Error).message });
      }
      if (leg.state === 'confirmed') await this.#mediaUp(leg, media);
      if (leg.state === 'confirmed' && leg.bridged) await this.#joinTransfer(leg);
      this.#emitNow(leg, { type: 'answered', reference: encodeRef(d) });
    });
  }

  /** The answered call's media: keys reported (and stopping what plays), silence watched, the recording started. */
  async #mediaUp(leg: Leg, media: MediaCall): Promise<void> {
    media.onDigit((key) => {
      if (leg.media !== media) return;
      media.stopPlaying();
      this.#key(leg, key);
    });
    media.onInactive((silentMs) => {
      if (leg.media !== media || leg.state !== 'confirmed') return;
      this.#log('info', `sip: no RTP from the far end for ${silentMs} ms: hanging up`, { call_id: leg.callId });
      this.#endMessage(leg, 'hangup');
      leg.endedByUs = true;
      this.#byeLogged(leg.dialog);
      this.#emit(leg, { type: 'completed', endReason: 'media_timeout' });
      this.#forget(leg);
    });
    if (leg.order.record && this.#media) {
      await media.startRecording({ path: path.join(this.#media.recordingsDir, `${leg.callId}.wav`), channels: 1 })
        .catch((e: Error) => this.#log('warn', `sip: the call's recording could not start: ${e.message}`, { call_id: leg.callId }));
    }
  }

  /** A key from the far end (RFC 4733 or SIP INFO): reported; `#` ends a message being recorded. */
  #key(leg: Leg, key: string): void {
    if (key === '#' && leg.message?.recording) leg.message.stop('key');
    this.#emit(leg, { type: 'dtmf', digits: key });
  }

  /**
   * Takes a voicemail message (MessageOrder): greeting, beep, then the far end recorded until
   * silence, `#`, the limit or its hangup; the recording cut to its voice is reported `speech`,
   * then we hang up. A hangup before the beep leaves nothing.
   */
  #takeMessage(leg: Leg, media: MediaCall, order: MessageOrder): void {
    const opts = this.#media!;
    let wake: (why: TakingEnd) => void = () => {};
    const ended = new Promise<TakingEnd>((resolve) => { wake = resolve; });
    const taking: Taking = {
      order, media, recording: false, ended: undefined, reported: false,
      stop: (why) => {
        if (taking.ended) return;
        taking.ended = why;
        wake(why);
      },
    };
    leg.message = taking;
    const up = () => leg.state === 'confirmed' && leg.media === media && !taking.ended;
    void (async () => {
      if (order.greeting.trim()) {
        // A greeting that cannot be spoken (no text to speech here) is skipped: the beep still says when to speak.
        await media.play({ text: order.greeting, language: order.language }).catch((e: Error) => {
          this.#log('warn', `sip: voicemail greeting not spoken: ${e.message}`, { call_id: leg.callId, missing: opts.port.missing() });
        });
      }
      if (!up()) return;
      await media.play({ tone: BEEP });
      if (!up()) return;
      await media.startRecording({ path: path.join(opts.recordingsDir, `${order.recording}.wav`), channels: 1, silence: opts.voicemailSilence ?? { thresholdDbfs: -40, ms: 3000, initialMs: 10_000 } });
      taking.recording = true;
      media.onSilence(() => taking.stop('silence'));
      const limit = setTimeout(() => taking.stop('limit'), order.maxSeconds * 1000);
      const why = await ended;
      clearTimeout(limit);
      // The far end hung up (or went silent on RTP): its BYE's handling reports the message.
      if (why === 'hangup' || leg.state !== 'confirmed' || leg.media !== media) return;
      this.#then(leg, () => this.#reportMessage(leg, taking));
      this.#log('info', `sip: voicemail recording ended (${why}): hanging up`, { call_id: leg.callId });
      leg.endedByUs = true;
      this.#byeLogged(leg.dialog);
      this.#emit(leg, { type: 'completed', endReason: 'voicemail', message: why });
      this.#forget(leg);
    })().catch((e: Error) => this.#log('warn', `sip: voicemail not taken: ${e.message}`, { call_id: leg.callId }));
  }

  /** The call is ending (the far end hung up): a message being taken is reported before the end. */
  #endMessage(leg: Leg, why: TakingEnd): void {
    const taking = leg.message;
    if (!taking) return;
    taking.stop(why);
    this.#then(leg, () => this.#reportMessage(leg, taking));
  }

  /** Closes a message's recording, cut to the caller's voice, and reports it (`speech`) if the caller spoke. */
  async #reportMessage(leg: Leg, taking: Taking): Promise<void> {
    if (taking.reported || !taking.recording) return;
    taking.reported = true;
    const done = await taking.media.stopRecording({ trimToVoice: { padMs: MESSAGE_PAD_MS } }).catch((e: Error) => {
      this.#log('warn', `sip: the voicemail recording could not be closed: ${e.message}`, { call_id: leg.callId });
      return undefined;
    });
    if (done?.voiced) this.#emitNow(leg, { type: 'speech', seconds: Math.round(done.seconds * 100) / 100, recording: taking.order.recording });
  }

  speaks(callId: string): boolean {
    return this.#legs.get(callId)?.media !== undefined;
  }

  say(callId: string, speech: Speech): void {
    const leg = this.#legs.get(callId);
    const media = leg?.media;
    if (!leg || !media) return;
    media.stopPlaying();
    void (async () => {
      for (const text of speech.texts) {
        if (!text.trim()) continue;
        const { completed } = await media.play({ text, language: speech.language });
        if (!completed) return;
      }
      if (leg.media === media) this.#emit(leg, { type: 'prompted', prompt: speech.prompt });
    })().catch((e: Error) => {
      // Not spoken (text to speech missing or failed): the IVR still waits its timeout for a key.
      this.#log('warn', `sip: prompt ${speech.prompt} not spoken: ${e.message}`, { call_id: callId, missing: this.#media?.port.missing() });
      if (leg.media === media) this.#emit(leg, { type: 'prompted', prompt: speech.prompt });
    });
  }

  bridge(callId: string, second: () => Promise<CallOrder>): boolean {
    const a = this.#legs.get(callId);
    const media = a?.media;
    if (!a || !media || a.state !== 'confirmed') return false;
    const up = () => a.state === 'confirmed' && a.media === media;
    void (async () => {
      let order: CallOrder;
      try {
        order = await second();
      } catch (e) {
        return this.#transferFailed(a, `the second leg could not be placed: ${(e as Error).message}`);
      }
      if (!up()) {
        // Hung up while the second leg was being stored: it ends before it was placed.
        return this.#emitFirst(order.callId, { type: 'completed', endReason: 'transfer_ended' });
      }
      a.bridged = { peer: order.callId, role: 'transferred' };
      this.#transferOf.set(order.callId, callId);
      try {
        await this.place(order);
      } catch (e) {
        const g = e instanceof GatewayError ? e : undefined;
        // Not placed (no leg was kept): the second leg fails as a placement does, the call ends.
        this.#emitFirst(order.callId, { type: 'failed', errorCode: g?.errorCode ?? 'VOICE_GATEWAY_ERROR', message: (e as Error).message });
        this.#transferFailed(a, `failed (${g?.errorCode ?? 'VOICE_GATEWAY_ERROR'})`);
      } finally {
        this.#transferOf.delete(order.callId);
      }
    })().catch((e: Error) => this.#log('warn', `sip: transfer failed: ${e.message}`, { call_id: callId }));
    return true;
  }

  /** The second leg answered: the two calls hear each other (a media room of two); what played to the first stops. */
  async #joinTransfer(b: Leg): Promise<void> {
    const a = this.#legs.get(b.bridged!.peer);
    if (!a?.media || !b.media || a.state !== 'confirmed' || a.bridged?.peer !== b.callId) return;
    a.media.stopPlaying();
    const room = `transfer-${a.callId}`;
    await a.media.join(room);
    await b.media.join(room);
    a.joined = b.joined = true;
    this.#log('info', 'sip: transfer bridged', { call_id: a.callId, second_leg: b.callId });
  }

  /** The transferred call ends: its second leg did not answer (or could not be placed). */
  #transferFailed(a: Leg, outcome: string): void {
    if (a.state !== 'confirmed') return;
    a.bridged = undefined;
    a.endedByUs = true;
    this.#byeLogged(a.dialog);
    this.#emit(a, { type: 'completed', endReason: 'transfer_failed', errorCode: 'TRANSFER_FAILED', message: outcome });
    this.#forget(a);
  }

  /** One leg of a transfer ended: the other ends too (a second leg not answered yet is cancelled). */
  #peerEnded(peer: Leg, ended: Leg): void {
    peer.bridged = undefined;
    if (peer.state === 'ended') return;
    peer.endedByUs = true;
    if (peer.state === 'confirmed') {
      this.#byeLogged(peer.dialog);
      if (!ended.joined && ended.outcome !== undefined) {
        this.#emit(peer, { type: 'completed', endReason: 'transfer_failed', errorCode: 'TRANSFER_FAILED', message: ended.outcome });
      } else {
        this.#emit(peer, { type: 'completed', endReason: 'transfer_ended' });
      }
      return this.#forget(peer);
    }
    if (peer.state === 'early') this.#cancel(peer.dialog, peer.invite);
    else peer.cancelPending = true;
    this.#emit(peer, { type: 'completed', endReason: 'transfer_ended' });
  }

  /** The first event of a call this gateway holds no leg for (a transfer's second leg that was never placed). */
  #emitFirst(callId: string, event: Omit<GatewayEvent, 'callId' | 'seq'>): void {
    this.#sink.schedule({ ...event, callId, seq: 1 }, 0).catch((e: Error) => this.#log('warn', `sip: gateway event ${event.type} of ${callId} not recorded: ${e.message}`));
  }

  join(callId: string, room: string, muted: boolean): boolean {
    const leg = this.#legs.get(callId);
    const media = leg?.media;
    if (!leg || !media || leg.state !== 'confirmed') return false;
    this.#then(leg, async () => {
      if (leg.media === media) await media.join(room, { muted });
    });
    return true;
  }

  /** An agent talks with the far end (CallConversation): the caller heard, transcribed, answered and spoken to. */
  converse(callId: string, talk: AgentTalk): boolean {
    const leg = this.#legs.get(callId);
    const media = leg?.media;
    const agents = this.#media?.agents;
    if (!leg || !media || !agents || leg.state !== 'confirmed') return false;
    const conversation = new CallConversation({
      media, stt: agents.stt, listen: agents.listen, talk, log: (level, message, detail) => this.#log(level, message, { call_id: callId, ...detail }),
      up: () => leg.state === 'confirmed' && leg.media === media,
      onTurn: (timing) => {
        this.#log('info', 'voice agent: turn answered', { call_id: callId, stt_ms: Math.round(timing.sttMs), agent_ms: Math.round(timing.agentMs), hangover_ms: timing.silentMs, spoken: timing.spoken });
        agents.onTurn?.(callId, timing);
      },
    });
    conversation.start().catch((e: Error) => this.#log('warn', `sip: the agent cannot hear the call: ${e.message}`, { call_id: callId }));
    return true;
  }

  async hangup(callId: string, reference: string | null): Promise<void> {
    const leg = this.#legs.get(callId);
    if (leg) {
      leg.endedByUs = true;
      if (leg.state === 'confirmed') {
        this.#byeLogged(leg.dialog);
        this.#forget(leg);
      } else if (leg.state === 'early') {
        this.#cancel(leg.dialog, leg.invite);
      } else {
        leg.cancelPending = true;
      }
      return;
    }
    // Another instance placed it: its reference says enough to end it from here.
    const d = reference ? decodeRef(reference) : undefined;
    if (!d) return;
    await this.#transport.start();
    if (d.target) await this.#bye(d);
    else this.#cancel(d, undefined);
  }

  async #bye(d: DialogRef): Promise<void> {
    d.seq += 1;
    const seq = d.seq;
    const to = await this.#targetOf(d);
    this.#nonInvite(this.#inDialog(d, 'BYE', seq, to), to, 'BYE');
  }

  #byeLogged(d: DialogRef): void {
    this.#bye(d).catch((e: Error) => this.#log('warn', `sip: BYE not sent: ${e.message}`, { sip_call_id: d.cid }));
  }

  /** The ACK of a 2xx: the dialog's own request, no transaction (§13.2.2.4). */
  #ack(d: DialogRef, seq: number): void {
    void this.#targetOf(d)
      .then((to) => this.#transport.send(this.#inDialog(d, 'ACK', seq, to), to))
      .catch((e: Error) => this.#log('warn', `sip: ACK not sent: ${e.message}`, { sip_call_id: d.cid }));
  }

  /** CANCEL matches the INVITE (§9.1): same Request-URI, Call-ID, From, To, CSeq number and top Via. */
  #cancel(d: DialogRef, invite: SipRequest | undefined): void {
    const transport = d.dest.transport;
    const request: SipRequest = {
      kind: 'request', method: 'CANCEL', uri: d.uri, body: '',
      headers: [
        ['via', invite ? header(invite, 'via')! : `SIP/2.0/${transport.toUpperCase()} ${this.#transport.sentBy(transport)};branch=${d.branch};rport`],
        ['max-forwards', '70'], ['from', d.from], ['to', d.to], ['call-id', d.cid], ['cseq', `${d.seq} CANCEL`],
      ],
    };
    this.#nonInvite(request, d.dest, 'CANCEL');
  }

  #nonInvite(request: SipRequest, to: SipDestination, what: string): void {
    let first = true;
    const send = (m: SipRequest) => this.#transport.send(m, to).catch((e: Error) => this.#log('warn', `sip: ${what} not sent: ${e.message}`, { sip_call_id: header(request, 'call-id') }));
    void send(request);
    this.#track(new NonInviteClientTransaction({
      request, reliable: to.transport !== 'udp', timers: this.#timers,
      send: (m) => { if (first) { first = false; return; } void send(m); },
      user: {
        final: (r) => { if (r.status >= 300) this.#log('warn', `sip: ${what} answered ${r.status} ${r.reason}`, { sip_call_id: header(request, 'call-id') }); },
        timeout: () => this.#log('warn', `sip: ${what} got no answer`, { sip_call_id: header(request, 'call-id') }),
      },
    }));
  }

  /**
   * Where in-dialog requests go: the first route, else the remote target (transport kept). The far
   * end chose them (its Contact, its proxies' Record-Route): one the address policy refuses (a
   * private address behind the trunk's NAT, or one aimed at this network) is not used, and the
   * requests go to the trunk's own address, which the policy checks again when they are sent.
   */
  async #targetOf(d: DialogRef): Promise<SipDestination> {
    const next = parseSipUri(addressUri(d.routes?.[0] ?? d.target ?? d.uri));
    if (!next) return d.dest;
    const transport = next.scheme === 'sips' ? 'tls' : (next.transport ?? d.dest.transport);
    const target: SipDestination = { host: next.host, port: next.port ?? (transport === 'tls' ? 5061 : 5060), transport };
    if (target.host === d.dest.host) return target;
    try {
      await this.#transport.vet(target.host);
      return target;
    } catch (e) {
      if (!(e instanceof SipDestinationBlocked)) return target;
      this.#log('warn', `sip: the far end's target ${target.host} is not an allowed destination; in-dialog requests go to the trunk`, { sip_call_id: d.cid });
      return d.dest;
    }
  }

  /** An ACK or BYE in the dialog, for the destination it goes to (its transport in the Via). */
  #inDialog(d: DialogRef, method: 'ACK' | 'BYE', seq: number, to: SipDestination): SipRequest {
    return {
      kind: 'request', method, uri: d.target ?? d.uri, body: '',
      headers: [
        ['via', `SIP/2.0/${to.transport.toUpperCase()} ${this.#transport.sentBy(to.transport)};branch=${newBranch()};rport`],
        ['max-forwards', '70'], ['from', d.from], ['to', d.to], ['call-id', d.cid], ['cseq', `${seq} ${method}`],
        ...(d.routes ?? []).map((r): [string, string] => ['route', r]),
        ['user-agent', this.#userAgent],
      ],
    };
  }

  // ---- what arrives ----

  #receive(m: SipMessage, source: SipSource): void {
    if (m.kind === 'response') {
      const key = `${branchOf(m)} ${cseq(m).method}`;
      const tx = this.#transactions.get(key);
      if (tx) return tx.receive(m);
      // A retransmitted 2xx of an INVITE whose transaction has ended: our ACK was lost (§13.2.2.4).
      const leg = this.#bySipId.get(header(m, 'call-id') ?? '');
      if (leg && m.status >= 200 && m.status < 300 && cseq(m).method === 'INVITE' && leg.dialog.target) this.#ack(leg.dialog, cseq(m).seq);
      return;
    }
    this.#request(m, source);
  }

  #request(m: SipRequest, source: SipSource): void {
    if (m.method === 'ACK') return;
    const leg = this.#bySipId.get(header(m, 'call-id') ?? '');
    const inDialog = !!leg && leg.state === 'confirmed' && param(header(m, 'to'), 'tag') === param(leg.dialog.from, 'tag');
    switch (m.method) {
      case 'BYE':
        if (!inDialog) return this.#answer(m, source, 481, 'Call/Transaction Does Not Exist');
        this.#answer(m, source, 200, 'OK');
        // A message being recorded is reported first (its `speech`), then the end.
        this.#endMessage(leg!, 'hangup');
        // Reported before the media closes (its recording's `recorded` follows).
        this.#emit(leg!, { type: 'completed' });
        return this.#forget(leg!);
      case 'INFO': {
        if (!inDialog) return this.#answer(m, source, 481, 'Call/Transaction Does Not Exist');
        this.#answer(m, source, 200, 'OK');
        leg!.media?.stopPlaying();
        const digit = /^Signal\s*=\s*([0-9*#A-D])/im.exec(m.body)?.[1];
        if (digit && /dtmf/i.test(header(m, 'content-type') ?? '')) this.#key(leg!, digit);
        return;
      }
      case 'OPTIONS':
        return this.#answer(m, source, 200, 'OK');
      case 'INVITE':
        // A re-INVITE keeps the call as it is.
        if (inDialog) return this.#answer(m, source, 488, 'Not Acceptable Here');
        if (leg?.answer) return void this.#transport.reply(leg.answer.response, leg.answer.source).catch(() => {});
        if (leg) return;
        if (!this.#inbound || !this.#media) return this.#answer(m, source, 603, 'Decline');
        return void this.#incoming(m, source, this.#inbound, this.#media).catch((e: Error) => this.#log('warn', `sip: inbound INVITE failed: ${e.message}`, { sip_call_id: header(m, 'call-id') }));
      default:
        return this.#answer(m, source, inDialog ? 501 : 481, inDialog ? 'Not Implemented' : 'Call/Transaction Does Not Exist');
    }
  }

  /**
   * An inbound INVITE (a call to one of our numbers from a trunk): 100 at once, then routed (the
   * app refuses it with a status, or stores the call), its offer answered by the media port, and
   * the 200 with our SDP answer sent; the call is then `answered` like an outbound one. Our
   * responses carry one To tag; the dialog's local side is the INVITE's To, its remote side the
   * From, its target the Contact. A 200 that is lost (UDP) is sent again when the INVITE is; it is
   * not retransmitted on timer G.
   */
  async #incoming(m: SipRequest, source: SipSource, router: InboundRouter, mediaOpts: NonNullable<SipGatewayOptions['media']>): Promise<void> {
    const cid = header(m, 'call-id') ?? '';
    if (!cid || this.#routing.has(cid)) return;
    this.#routing.add(cid);
    const tag = randomBytes(6).toString('hex');
    const via = header(m, 'via');
    const respond = (status: number, reason: string, extra: [string, string][] = [], body = ''): SipResponse => {
      const r = responseTo(m, status, reason, { ...(via !== undefined ? { topVia: stampVia(via, source.host, source.port) } : {}), toTag: tag, extra: [['user-agent', this.#userAgent], ...extra] });
      r.body = body;
      this.#transport.reply(r, source).catch((e: Error) => this.#log('warn', `sip: response not sent: ${e.message}`));
      return r;
    };
    try {
      respond(100, 'Trying');
      const to = parseSipUri(m.uri)?.user ?? '';
      const from = parseSipUri(addressUri(header(m, 'from') ?? ''))?.user ?? '';
      const decision = await router({ sourceHost: source.host, to: to.replace(/;.*$/, ''), from: from.replace(/;.*$/, '') });
      if ('refuse' in decision) return void respond(decision.refuse, decision.reason);
      const transport = source.transport;
      const contact = header(m, 'contact');
      const target = contact ? addressUri(contact) : undefined;
      const toHeader = header(m, 'to') ?? '';
      const dialog: DialogRef = {
        v: 1, cid, from: param(toHeader, 'tag') ? toHeader : `${toHeader};tag=${tag}`, to: header(m, 'from') ?? '', branch: branchOf(m), seq: 0,
        uri: target ?? m.uri, dest: { host: source.host, port: source.port, transport }, ...(target ? { target } : {}), routes: headers(m, 'record-route'),
      };
      const leg: Leg = {
        callId: decision.callId, order: { callId: decision.callId, from, to, record: decision.record }, dialog, invite: m, tx: undefined, state: 'confirmed', events: 0,
        authTried: false, cancelPending: false, endedByUs: false, ringing: false, media: undefined, chain: Promise.resolve(),
      };
      let media: MediaCall;
      try {
        media = await mediaOpts.port.answer({
          callId: decision.callId, address: this.#transport.sentBy(transport).replace(/^\[|\]?:\d+$/g, ''), bindAddress: this.#transport.bound.host,
          encryption: decision.encryption, codecs: decision.codecs, inactivityMs: mediaOpts.inactivityMs, remoteSdp: m.body,
        });
      } catch (e) {
        // An offer the media cannot take (no common codec, SRTP required…): 488, and the stored call fails with the media's code.
        const code = e instanceof MediaError ? e.code : 'MEDIA_UNAVAILABLE';
        respond(488, 'Not Acceptable Here');
        return this.#emitNow(leg, { type: 'failed', errorCode: code, message: (e as Error).message });
      }
      leg.media = media;
      this.#legs.set(leg.callId, leg);
      this.#bySipId.set(cid, leg);
      const sentBy = this.#transport.sentBy(transport);
      const response = respond(200, 'OK', [
        ['contact', `<sip:${to || 'service'}@${sentBy}${transport === 'udp' ? '' : `;transport=${transport}`}>`],
        ['allow', 'INVITE, ACK, CANCEL, BYE, OPTIONS, INFO'], ['content-type', 'application/sdp'],
      ], media.localSdp);
      leg.answer = { response, source };
      this.#then(leg, async () => {
        if (leg.state === 'confirmed' && leg.media === media) await this.#mediaUp(leg, media);
        this.#emitNow(leg, { type: 'answered', reference: encodeRef(dialog) });
        if (decision.voicemail && leg.state === 'confirmed' && leg.media === media) this.#takeMessage(leg, media, decision.voicemail);
        if (decision.transfer && leg.state === 'confirmed' && leg.media === media) this.bridge(leg.callId, decision.transfer);
      });
    } finally {
      this.#routing.delete(cid);
    }
  }

  /**
   * A response to a request we received (§8.2.6): its Via (the top one stamped with the real
   * source: received and rport), From, To (tagged), Call-ID and CSeq. It goes where the request
   * came from (§18.2.2 with RFC 3581): its connection, or the datagram's source address and port,
   * never an address the request's Via names.
   */
  #answer(m: SipRequest, source: SipSource, status: number, reason: string): void {
    const leg = this.#bySipId.get(header(m, 'call-id') ?? '');
    const via = header(m, 'via');
    const response = responseTo(m, status, reason, {
      ...(via !== undefined ? { topVia: stampVia(via, source.host, source.port) } : {}),
      toTag: (leg ? param(leg.dialog.from, 'tag') : undefined) ?? randomBytes(4).toString('hex'),
      extra: [['user-agent', this.#userAgent]],
    });
    this.#transport.reply(response, source).catch((e: Error) => this.#log('warn', `sip: response not sent: ${e.message}`));
  }

  /** Runs `step` after the leg's earlier events and media steps. */
  #then(leg: Leg, step: () => Promise<void> | void): void {
    leg.chain = leg.chain.then(step).catch((e: Error) => this.#log('warn', `sip: ${e.message}`, { call_id: leg.callId }));
  }

  #emit(leg: Leg, event: Omit<GatewayEvent, 'callId' | 'seq'>): void {
    this.#then(leg, () => this.#emitNow(leg, event));
  }

  #emitNow(leg: Leg, event: Omit<GatewayEvent, 'callId' | 'seq'>): void {
    leg.events += 1;
    const full: GatewayEvent = { ...event, callId: leg.callId, seq: leg.events };
    this.#sink.schedule(full, 0).catch((e: Error) => this.#log('warn', `sip: gateway event ${event.type} of ${leg.callId} not recorded: ${e.message}`));
  }

  #track<T extends InviteClientTransaction | NonInviteClientTransaction>(tx: T): T {
    const key = `${tx.branch} ${tx.request.method}`;
    this.#transactions.set(key, tx);
    tx.onTerminated = () => { if (this.#transactions.get(key) === tx) this.#transactions.delete(key); };
    return tx;
  }

  #forget(leg: Leg): void {
    // Ended here (a hangup we were asked for): a message being taken is still reported.
    this.#endMessage(leg, 'hangup');
    if (leg.state !== 'confirmed' && leg.outcome === undefined) leg.outcome = 'cancelled';
    leg.state = 'ended';
    // A transfer's other leg ends with this one.
    const peer = leg.bridged ? this.#legs.get(leg.bridged.peer) : undefined;
    leg.bridged = undefined;
    if (peer?.bridged?.peer === leg.callId) this.#peerEnded(peer, leg);
    const media = leg.media;
    leg.media = undefined;
    if (media) {
      this.#then(leg, async () => {
        const recording = await media.close().catch((e: Error) => { this.#log('warn', `sip: media not closed cleanly: ${e.message}`, { call_id: leg.callId }); return undefined; });
        if (recording) this.#emitNow(leg, { type: 'recorded', recordedSeconds: recording.seconds });
      });
    }
    // Keep the SIP Call-ID a while: late retransmissions (a 2xx, a BYE) still find the call.
    this.#legs.delete(leg.callId);
    setTimeout(() => { if (this.#bySipId.get(leg.dialog.cid) === leg) this.#bySipId.delete(leg.dialog.cid); }, 32_000).unref();
  }

  /** Opens the signalling listener now (it opens with the first live call otherwise) and says where it is bound. */
  async listen(): Promise<{ host: string; udpPort: number; tcpPort: number }> {
    await this.#transport.start();
    return this.#transport.bound;
  }

  /** Calls this instance holds (for tests and shutdown). */
  get activeCalls(): number {
    return this.#legs.size;
  }

  async close(): Promise<void> {
    const legs = [...this.#legs.values()];
    for (const leg of legs) await this.hangup(leg.callId, null).catch(() => {});
    await Promise.all(legs.map((l) => l.chain));
    await this.#transport.close();
    await this.#media?.port.close();
  }
}

function newBranch(): string {
  // The magic cookie marks an RFC 3261 branch (§8.1.1.7).
  return `z9hG4bK${randomBytes(10).toString('hex')}`;
}

export function encodeRef(d: DialogRef): string {
  return `sip1.${Buffer.from(JSON.stringify(d)).toString('base64url')}`;
}

export function decodeRef(reference: string): DialogRef | undefined {
  if (!reference.startsWith('sip1.')) return undefined;
  try {
    const d = JSON.parse(Buffer.from(reference.slice(5), 'base64url').toString('utf8')) as DialogRef;
    return d.v === 1 ? d : undefined;
  } catch {
    return undefined;
  }
}
