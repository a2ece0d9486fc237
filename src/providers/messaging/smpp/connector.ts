/**
 * The SMPP 3.4 carrier adapter: an ESME connector to one SMSC account, a MessagingProvider for SMS.
 *
 * Links. `binds` transceiver binds, or in `transmitter_receiver` mode `binds` transmitters and as
 * many receivers. Each bind reconnects by itself after a loss, waiting 0.5 s, then twice as long
 * after each failure up to `reconnectMaxMs` (±20 %), back to 0.5 s once a bind stayed up for 10 s.
 * Idle links are kept alive with enquire_link (bind.ts).
 *
 * Submitting. Every segment is one submit_sm through one queue: it goes out on the submit-capable
 * bind with the fewest submits in flight, never more than `window` per bind (outstanding submit_sm
 * without response), at most `throughput` per second (pace.ts). ESME_RTHROTTLED and ESME_RMSGQFUL
 * halve the pace and pause it; the refused segment goes back to the head of the queue and is
 * submitted again (the SMSC took nothing). A link lost with segments in flight puts them back the
 * same way: their responses never came, so the SMSC never accepted them. A segment that could not
 * go out within `sendTimeoutMs` gives up: the send fails retryable and the message may fail over.
 *
 * Send once (carrierSends.ts). The send is recorded before the first submit and its outcome after:
 * all segments accepted → sent (a repeated delivery answers the recorded ids); none → released (any
 * connector may send it); some → partial (only this connector sends the rest, with the same
 * concatenation reference); a permanent refusal → the message fails with the command_status name
 * as error code (ESME_RINVDSTADR, …). A connector that is down refuses before recording anything,
 * so failover to the next route is immediate.
 *
 * Receiving. deliver_sm receipts (receipts.ts) mark their segment final; once a message's outcome is
 * decided it goes to `events.report`; a receipt for an id not recorded yet is answered
 * ESME_RX_T_APPN (the SMSC repeats it later). Mobile-originated messages, reassembled from their
 * concatenated segments (UDH or SAR; segments are kept in memory for ten minutes), go to
 * `events.inbound`; one nobody owns is answered ESME_RX_R_APPN.
 */
import { randomInt } from 'node:crypto';
import type { CarrierSendStore } from '../carrierSends.ts';
import {
  PinnedToConnector, PROVIDER_ERROR_CODES, ProviderError,
  type CarrierEvents, type ConnectorStatus, type MessagingProvider, type OutboundMessage, type SendResult,
} from '../types.ts';
import { BindClosed, SmppBind, type BindOptions, type BindType, type DeliverSm } from './bind.ts';
import { classifyCommandStatus, commandStatusName, describeCommandStatus, ESME_ROK, ESME_RX_R_APPN, ESME_RX_T_APPN } from './commandStatus.ts';
import { decodeText, readSegment, submitParts, type Concatenation, type SubmitPart } from './encoding.ts';
import { SubmitPace } from './pace.ts';
import { alternativeIds, deliverKind, readReceipt } from './receipts.ts';

export const SMPP_BIND_MODES = ['transceiver', 'transmitter_receiver'] as const;
export type SmppBindMode = (typeof SMPP_BIND_MODES)[number];

export type SmppConnectorSettings = {
  /** The connector's id: the provider name recorded on the messages it carries. */
  id: string;
  host: string;
  port: number;
  tls: boolean;
  systemId: string;
  password: string;
  systemType: string;
  bindMode: SmppBindMode;
  binds: number;
  /** Outstanding submit_sm per bind. */
  window: number;
  /** submit_sm per second, for the whole connector (in this process). */
  throughput: number;
  concatenation: Concatenation;
  enquireLinkSeconds: number;
  /** Ask the SMSC for delivery receipts (registered_delivery 1). */
  requestReceipts: boolean;
  responseTimeoutMs?: number;
  connectTimeoutMs?: number;
  reconnectMaxMs?: number;
  sendTimeoutMs?: number;
};

export type SmppConnectorDeps = { store: CarrierSendStore; events: CarrierEvents; log?: { warn(o: object, msg: string): void; info(o: object, msg: string): void } };

type SubmitOutcome =
  | { kind: 'accepted'; smscId: string }
  | { kind: 'refused'; status: number; permanent: boolean }
  | { kind: 'unsent'; reason: string };

type Job = { fields: Record<string, unknown>; deadline: number; done(outcome: SubmitOutcome): void; onAccepted(smscId: string): void };

type Slot = { type: BindType; bind?: SmppBind; openedAt: number; backoffMs: number; timer?: NodeJS.Timeout; connecting: boolean };

const RECONNECT_MIN_MS = 500;
const STABLE_BIND_MS = 10_000;
const MO_SEGMENTS_TTL_MS = 10 * 60_000;

export class SmppConnector implements MessagingProvider {
  readonly name: string;
  readonly channel = 'sms' as const;
  readonly #s: Required<SmppConnectorSettings>;
  readonly #store: CarrierSendStore;
  readonly #events: CarrierEvents;
  readonly #log: SmppConnectorDeps['log'];
  readonly #slots: Slot[];
  readonly #pace: SubmitPace;
  #queue: Job[] = [];
  #paceTimer: NodeJS.Timeout | undefined;
  #ticker: NodeJS.Timeout | undefined;
  #closed = false;
  #started = false;
  #ref = randomInt(0, 0x10000);
  #lastError: string | null = null;
  #lastErrorAt: Date | null = null;
  #reported = '';
  /** Segments accepted whose send is not recorded yet: a receipt for one waits for the record. */
  readonly #recording = new Map<string, Promise<unknown>>();
  readonly #moSegments = new Map<string, { parts: (string | undefined)[]; expires: number }>();

  constructor(settings: SmppConnectorSettings, deps: SmppConnectorDeps) {
    this.#s = {
      responseTimeoutMs: 10_000, connectTimeoutMs: 5_000, reconnectMaxMs: 30_000, sendTimeoutMs: 10_000,
      ...settings,
    };
    this.name = settings.id;
    this.#store = deps.store;
    this.#events = deps.events;
    this.#log = deps.log;
    this.#pace = new SubmitPace(settings.throughput);
    const types: BindType[] = settings.bindMode === 'transceiver'
      ? Array.from({ length: settings.binds }, () => 'transceiver' as const)
      : [...Array.from({ length: settings.binds }, () => 'transmitter' as const), ...Array.from({ length: settings.binds }, () => 'receiver' as const)];
    this.#slots = types.map((type) => ({ type, openedAt: 0, backoffMs: RECONNECT_MIN_MS, connecting: false }));
  }

  /** Opens every bind (each reconnects by itself from then on); resolves once each tried once. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    this.#ticker = setInterval(() => {
      this.#expire();
      this.#expireMoSegments();
      this.#reportStatus();
    }, 250);
    this.#ticker.unref();
    await Promise.all(this.#slots.map((slot) => this.#connect(slot)));
    this.#reportStatus();
  }

  status(): ConnectorStatus {
    const submitters = this.#slots.filter((s) => s.type !== 'receiver');
    const up = submitters.filter((s) => s.bind?.canSubmit).length;
    const bound = this.#slots.filter((s) => s.bind?.open).length;
    const state = up === 0 ? 'down' : bound === this.#slots.length && !this.#pace.throttled ? 'connected' : 'degraded';
    return { state, lastError: this.#lastError, lastErrorAt: this.#lastErrorAt, bound, binds: this.#slots.length };
  }

  async supports(_to: string): Promise<boolean> {
    return true;
  }

  async send(message: OutboundMessage): Promise<SendResult> {
    if (message.channel !== 'sms') throw new Error(`The SMPP connector ${this.name} was asked to send a ${message.channel} message`);
    const to = message.to[0];
    if (!to) throw new ProviderError(PROVIDER_ERROR_CODES.INVALID_RECIPIENT, 'The message has no recipient', false);
    if (this.#closed || !this.#slots.some((s) => s.bind?.canSubmit)) {
      throw new ProviderError(PROVIDER_ERROR_CODES.CONNECTOR_UNAVAILABLE, `Connector ${this.name} is down${this.#lastError ? `: ${this.#lastError}` : ''}`, true);
    }
    const ref = this.#nextRef();
    const begun = await this.#store.begin(message.id, this.name, ref);
    if (begun.kind === 'sent') return { providerMessageId: begun.providerMessageId, provider: begun.connectorId };
    if (begun.kind === 'pinned') throw new PinnedToConnector(begun.connectorId);
    if (begun.kind === 'in_doubt') {
      throw new ProviderError(PROVIDER_ERROR_CODES.SEND_IN_DOUBT, `An earlier attempt through ${begun.connectorId} may have sent this message; it is not sent again`, false);
    }
    const { dataCoding, parts } = submitParts(message.body ?? '', this.#s.concatenation, begun.kind === 'resume' ? begun.ref : ref);
    const known = begun.kind === 'resume' ? begun.parts : [];
    if (begun.kind === 'resume' && known.length !== parts.length) {
      throw new ProviderError(PROVIDER_ERROR_CODES.SEND_IN_DOUBT, `The recorded send has ${known.length} segments, the message ${parts.length}`, false);
    }
    let recorded!: () => void;
    const recording = new Promise<void>((resolve) => { recorded = resolve; });
    const accepting: string[] = [];
    const deadline = performance.now() + this.#s.sendTimeoutMs;
    const outcomes = await Promise.all(parts.map((part, i): Promise<SubmitOutcome> => {
      const already = known[i];
      if (already) return Promise.resolve({ kind: 'accepted', smscId: already });
      return new Promise((resolve) => {
        this.#queue.push({
          fields: this.#fields(message, to, part, dataCoding), deadline, done: resolve,
          onAccepted: (smscId) => {
            accepting.push(smscId);
            this.#recording.set(smscId, recording);
          },
        });
        this.#pump();
      });
    }));
    try {
      return await this.#settle(message.id, outcomes);
    } finally {
      recorded();
      for (const id of accepting) if (this.#recording.get(id) === recording) this.#recording.delete(id);
    }
  }

  /** Records the outcome of a send's segments and answers (or throws) accordingly. */
  async #settle(messageId: string, outcomes: SubmitOutcome[]): Promise<SendResult> {
    const ids = outcomes.map((o) => (o.kind === 'accepted' ? o.smscId : null));
    const permanent = outcomes.find((o): o is Extract<SubmitOutcome, { kind: 'refused' }> => o.kind === 'refused' && o.permanent);
    if (permanent) {
      await this.#store.failed(messageId, this.name);
      throw new ProviderError(commandStatusName(permanent.status), `The SMSC refused the message: ${describeCommandStatus(permanent.status)}`, false);
    }
    if (ids.every((id): id is string => id !== null)) {
      await this.#store.finish(messageId, this.name, ids);
      return { providerMessageId: ids[0]! };
    }
    const first = outcomes.find((o) => o.kind !== 'accepted')!;
    const [code, reason] = first.kind === 'refused'
      ? [commandStatusName(first.status), `The SMSC answered ${describeCommandStatus(first.status)}`]
      : [PROVIDER_ERROR_CODES.CONNECTOR_UNAVAILABLE, `Connector ${this.name} could not submit in time: ${first.kind === 'unsent' ? first.reason : ''}`];
    if (ids.some((id) => id !== null)) {
      await this.#store.partial(messageId, this.name, ids);
      throw new ProviderError(code, `${reason}; ${ids.filter(Boolean).length} of ${ids.length} segments were accepted, the rest goes through this connector only`, true);
    }
    await this.#store.release(messageId, this.name);
    throw new ProviderError(code, reason, true);
  }

  #fields(message: OutboundMessage, to: string, part: SubmitPart, dataCoding: number): Record<string, unknown> {
    const source = addressOf(message.from);
    return {
      service_type: '', source_addr_ton: source.ton, source_addr_npi: source.npi, source_addr: source.addr,
      dest_addr_ton: 1, dest_addr_npi: 1, destination_addr: to.replace(/^\+/, ''),
      esm_class: part.esmClass, protocol_id: 0, priority_flag: 0, registered_delivery: this.#s.requestReceipts ? 1 : 0,
      data_coding: dataCoding, short_message: part.shortMessage, ...(part.sar ?? {}),
    };
  }

  #nextRef(): number {
    this.#ref = (this.#ref + 1) & 0xffff;
    return this.#ref;
  }

  // ---- the submit queue ----

  #pump(): void {
    if (this.#paceTimer) return;
    while (this.#queue.length > 0) {
      const bind = this.#freeBind();
      if (!bind) return;
      const wait = this.#pace.take();
      if (wait > 0) {
        this.#paceTimer = setTimeout(() => {
          this.#paceTimer = undefined;
          this.#pump();
        }, wait);
        return;
      }
      this.#dispatch(bind, this.#queue.shift()!);
    }
  }

  #freeBind(): SmppBind | undefined {
    let best: SmppBind | undefined;
    for (const slot of this.#slots) {
      const b = slot.bind;
      if (b?.canSubmit && b.submitsInFlight < this.#s.window && (!best || b.submitsInFlight < best.submitsInFlight)) best = b;
    }
    return best;
  }

  #dispatch(bind: SmppBind, job: Job): void {
    bind.submit(job.fields).then((resp) => {
      const status = resp.command_status;
      const kind = classifyCommandStatus(status);
      if (kind === 'busy') {
        this.#pace.busy();
        this.#failure(`the SMSC answered ${describeCommandStatus(status)}`);
        if (performance.now() < job.deadline && !this.#closed) this.#queue.unshift(job);
        else job.done({ kind: 'refused', status, permanent: false });
      } else {
        this.#pace.answered();
        if (kind === 'ok') {
          const smscId = String(resp.message_id ?? '');
          job.onAccepted(smscId);
          job.done({ kind: 'accepted', smscId });
        } else {
          job.done({ kind: 'refused', status, permanent: kind === 'permanent' });
        }
      }
      this.#pump();
    }, (e: unknown) => {
      // Never answered: the SMSC did not accept it; submit it again (another bind, or after the reconnect).
      const reason = e instanceof BindClosed ? e.message : String(e);
      if (performance.now() < job.deadline && !this.#closed) this.#queue.unshift(job);
      else job.done({ kind: 'unsent', reason });
      this.#pump();
    });
  }

  /** Segments that waited past their send's deadline give up (the send fails retryable). */
  #expire(): void {
    if (this.#queue.length === 0) return;
    const now = performance.now();
    const keep: Job[] = [];
    for (const job of this.#queue) {
      if (now >= job.deadline || this.#closed) job.done({ kind: 'unsent', reason: this.#lastError ?? 'no bind could take it' });
      else keep.push(job);
    }
    this.#queue = keep;
  }

  // ---- binds ----

  #bindOptions(type: BindType): BindOptions {
    const s = this.#s;
    return {
      host: s.host, port: s.port, tls: s.tls, systemId: s.systemId, password: s.password, systemType: s.systemType, type,
      enquireLinkMs: s.enquireLinkSeconds * 1000, responseTimeoutMs: s.responseTimeoutMs, connectTimeoutMs: s.connectTimeoutMs,
    };
  }

  async #connect(slot: Slot): Promise<void> {
    if (this.#closed || slot.connecting) return;
    slot.connecting = true;
    try {
      const bind = await SmppBind.open(this.#bindOptions(slot.type), {
        deliver: (pdu) => this.#deliver(pdu),
        closed: (b, reason) => this.#bindClosed(slot, b, reason),
      });
      if (this.#closed) {
        await bind.unbind();
        return;
      }
      slot.bind = bind;
      slot.openedAt = performance.now();
      this.#reportStatus();
      this.#pump();
    } catch (e) {
      this.#failure(e instanceof Error ? e.message : String(e));
      this.#log?.warn({ connector: this.name, err: e }, 'SMPP bind failed');
      this.#reconnectLater(slot);
    } finally {
      slot.connecting = false;
    }
  }

  #bindClosed(slot: Slot, bind: SmppBind, reason: string): void {
    if (slot.bind !== bind) return;
    slot.bind = undefined;
    if (this.#closed) return;
    this.#failure(`${slot.type} bind lost: ${reason}`);
    this.#log?.warn({ connector: this.name, reason }, 'SMPP bind lost');
    if (performance.now() - slot.openedAt >= STABLE_BIND_MS) slot.backoffMs = RECONNECT_MIN_MS;
    this.#reportStatus();
    this.#reconnectLater(slot);
  }

  #reconnectLater(slot: Slot): void {
    if (this.#closed || slot.timer) return;
    const delay = slot.backoffMs * (0.8 + Math.random() * 0.4);
    slot.backoffMs = Math.min(this.#s.reconnectMaxMs, slot.backoffMs * 2);
    slot.timer = setTimeout(() => {
      slot.timer = undefined;
      void this.#connect(slot);
    }, delay);
    slot.timer.unref();
  }

  #failure(reason: string): void {
    this.#lastError = reason;
    this.#lastErrorAt = new Date();
    this.#reportStatus();
  }

  #reportStatus(): void {
    if (!this.#started) return;
    const status = this.status();
    const key = `${status.state}|${status.bound}|${status.lastError ?? ''}`;
    if (key === this.#reported) return;
    this.#reported = key;
    this.#events.status(this.name, status);
  }

  // ---- deliver_sm ----

  async #deliver(pdu: DeliverSm): Promise<number> {
    const kind = deliverKind(pdu.esmClass);
    if (kind === 'ack') return ESME_ROK;
    if (kind === 'receipt') return this.#receipt(pdu);
    return this.#mobileOriginated(pdu);
  }

  async #receipt(pdu: DeliverSm): Promise<number> {
    const text = decodeText(pdu.dataCoding, pdu.tlvs.messagePayload ?? pdu.shortMessage);
    const receipt = readReceipt({ text, receiptedMessageId: pdu.tlvs.receiptedMessageId, messageState: pdu.tlvs.messageState, networkErrorCode: pdu.tlvs.networkErrorCode });
    if (!receipt || receipt.outcome === 'pending') return ESME_ROK;
    const ids = [receipt.smscMessageId, ...alternativeIds(receipt.smscMessageId)];
    // A receipt can overtake the record of its send (the SMSC answered submit_sm, then reported at once).
    await Promise.all(ids.map((id) => this.#recording.get(id)));
    const result = await this.#store.receipt({ connectorId: this.name, smscIds: ids, outcome: receipt.outcome, errorCode: receipt.errorCode });
    if (result.kind === 'unknown') return ESME_RX_T_APPN;
    if (result.status) {
      await this.#events.report({
        messageId: result.messageId, providerMessageId: result.providerMessageId, provider: this.name, status: result.status,
        ...(result.errorCode ? { errorCode: result.errorCode } : {}), at: new Date(),
      });
    }
    return ESME_ROK;
  }

  async #mobileOriginated(pdu: DeliverSm): Promise<number> {
    const raw = pdu.tlvs.messagePayload ?? pdu.shortMessage;
    const { place, payload } = readSegment(pdu.esmClass, raw, { ref: pdu.tlvs.sarMsgRefNum, total: pdu.tlvs.sarTotalSegments, seq: pdu.tlvs.sarSegmentSeqnum });
    const text = decodeText(pdu.dataCoding, payload);
    const from = phoneOf(pdu.sourceAddr, pdu.sourceTon);
    const to = phoneOf(pdu.destinationAddr, pdu.destTon);
    let body = text;
    if (place && place.total > 1) {
      const key = `${from}\n${to}\n${place.ref}\n${place.total}`;
      const entry = this.#moSegments.get(key) ?? { parts: new Array<string | undefined>(place.total).fill(undefined), expires: performance.now() + MO_SEGMENTS_TTL_MS };
      if (place.seq >= 1 && place.seq <= place.total) entry.parts[place.seq - 1] = text;
      if (entry.parts.some((p) => p === undefined)) {
        this.#moSegments.set(key, entry);
        return ESME_ROK;
      }
      this.#moSegments.delete(key);
      body = entry.parts.join('');
    }
    const outcome = await this.#events.inbound({ connectorId: this.name, from, to, body });
    return outcome === 'stored' ? ESME_ROK : ESME_RX_R_APPN;
  }

  #expireMoSegments(): void {
    const now = performance.now();
    for (const [key, entry] of this.#moSegments) if (entry.expires < now) this.#moSegments.delete(key);
  }

  /** Stops reconnecting, gives up queued segments, lets submits in flight finish (at most the response timeout) and unbinds. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ticker) clearInterval(this.#ticker);
    if (this.#paceTimer) clearTimeout(this.#paceTimer);
    for (const slot of this.#slots) if (slot.timer) clearTimeout(slot.timer);
    this.#expire();
    const until = performance.now() + this.#s.responseTimeoutMs;
    while (this.#slots.some((s) => (s.bind?.submitsInFlight ?? 0) > 0) && performance.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    await Promise.all(this.#slots.map(async (slot) => {
      const bind = slot.bind;
      slot.bind = undefined;
      await bind?.unbind();
    }));
  }
}

/** TON/NPI of a sender: E.164 → international/ISDN, other digits → unknown/ISDN, anything else alphanumeric. */
export function addressOf(from: string): { ton: number; npi: number; addr: string } {
  if (/^\+\d{1,20}$/.test(from)) return { ton: 1, npi: 1, addr: from.slice(1) };
  if (/^\d{1,21}$/.test(from)) return { ton: 0, npi: 1, addr: from };
  return { ton: 5, npi: 0, addr: from.slice(0, 11) };
}

/**
 * A received address as we store numbers: international TON, or 10–15 digits not starting with 0
 * (SMSCs often leave the TON unknown on full numbers), gets its `+`; anything else stays as sent.
 */
export function phoneOf(addr: string, ton: number): string {
  const digits = addr.replace(/^\+/, '');
  if (/^\d+$/.test(digits) && (ton === 1 || /^[1-9]\d{9,14}$/.test(digits))) return `+${digits}`;
  return addr;
}
