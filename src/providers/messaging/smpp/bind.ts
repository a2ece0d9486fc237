/**
 * One SMPP session of an ESME (SMPP 3.4 §2.2): a TCP (or TLS) connection bound as transceiver,
 * transmitter or receiver. The `smpp` package frames, encodes and decodes the PDUs; this class owns
 * what it lacks: connect and bind timeouts, the outstanding requests by sequence number with their
 * response timeout, enquire_link keepalive on an idle link (a link that stops answering is closed),
 * answers to the SMSC's enquire_link and unbind, deliver_sm handed to the connector and answered
 * with the status it returns, and a graceful unbind. A closed bind rejects its outstanding requests
 * with `BindClosed`: their answers never came, so the SMSC never accepted them (the connector may
 * submit them again).
 */
import smpp, { type PDU, type Session } from 'smpp';
import { describeCommandStatus, ESME_ROK, ESME_RX_R_APPN } from './commandStatus.ts';

export type BindType = 'transceiver' | 'transmitter' | 'receiver';

export type BindOptions = {
  host: string;
  port: number;
  tls: boolean;
  systemId: string;
  password: string;
  systemType: string;
  type: BindType;
  /** enquire_link after this long without traffic. */
  enquireLinkMs: number;
  /** Longest wait for any response (bind, submit_sm, enquire_link) before the link is closed. */
  responseTimeoutMs: number;
  connectTimeoutMs: number;
};

/** A deliver_sm as the connector reads it: the short message's raw octets (see keepRawShortMessages). */
export type DeliverSm = {
  sourceAddr: string;
  sourceTon: number;
  destinationAddr: string;
  destTon: number;
  esmClass: number;
  dataCoding: number;
  shortMessage: Buffer;
  tlvs: {
    receiptedMessageId?: string;
    messageState?: number;
    networkErrorCode?: Buffer;
    messagePayload?: Buffer;
    sarMsgRefNum?: number;
    sarTotalSegments?: number;
    sarSegmentSeqnum?: number;
  };
};

export type BindHandlers = {
  /** Answers a deliver_sm: the command_status of its deliver_sm_resp. */
  deliver(pdu: DeliverSm): Promise<number>;
  /** The bind is gone (after a successful bind only). */
  closed(bind: SmppBind, reason: string): void;
};

/** The bind was refused: the SMSC's command_status (ESME_RINVPASWD, ESME_RBINDFAIL, …). */
export class BindRefused extends Error {
  readonly status: number;
  constructor(status: number) {
    super(`bind refused: ${describeCommandStatus(status)}`);
    this.name = 'BindRefused';
    this.status = status;
  }
}

/** The link closed before the response came. */
export class BindClosed extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'BindClosed';
  }
}

/**
 * The package decodes short_message (and message_payload) into text by its own tables, which lose
 * octets (IA5 read as GSM, unknown septets as spaces) and hide the UDH: the adapter reads the raw
 * octets and decodes them itself (encoding.ts). Only decoding changes; this process never sends deliver_sm.
 */
function keepRawShortMessages(): void {
  const raw = { encode: (v: unknown) => v, decode: (v: unknown) => v };
  for (const command of ['deliver_sm', 'data_sm']) {
    const param = smpp.commands[command]?.params?.short_message;
    if (param) param.filter = raw;
  }
  const payload = smpp.tlvs.message_payload;
  if (payload) payload.filter = raw;
}
keepRawShortMessages();

type Outstanding = { resolve(pdu: PDU): void; reject(e: Error): void; timer: NodeJS.Timeout };

export class SmppBind {
  readonly type: BindType;
  readonly #o: BindOptions;
  readonly #session: Session;
  #handlers: BindHandlers | undefined;
  readonly #outstanding = new Map<number, Outstanding>();
  #submits = 0;
  #closed = false;
  #bound = false;
  #lastTraffic = Date.now();
  #keepalive: NodeJS.Timeout | undefined;
  #enquiring = false;

  private constructor(options: BindOptions, session: Session) {
    this.#o = options;
    this.type = options.type;
    this.#session = session;
  }

  /** Connects and binds; rejects with BindRefused, or an error of the connection, within the connect and response timeouts. */
  static async open(options: BindOptions, handlers: BindHandlers): Promise<SmppBind> {
    const session = smpp.connect({ host: options.host, port: options.port, tls: options.tls, ...(options.tls ? { servername: options.host } : {}) });
    const bind = new SmppBind(options, session);
    bind.#listen();
    await bind.#connected();
    const resp = await bind.#request(new smpp.PDU(`bind_${options.type}`, {
      system_id: options.systemId, password: options.password, system_type: options.systemType, interface_version: 0x34,
    }));
    if (resp.command_status !== ESME_ROK) {
      bind.#close(`bind refused: ${describeCommandStatus(resp.command_status)}`);
      throw new BindRefused(resp.command_status);
    }
    bind.#bound = true;
    bind.#handlers = handlers;
    bind.#keepalive = setInterval(() => bind.#keepAlive(), Math.max(50, Math.floor(options.enquireLinkMs / 4)));
    bind.#keepalive.unref();
    return bind;
  }

  get open(): boolean {
    return this.#bound && !this.#closed;
  }

  get canSubmit(): boolean {
    return this.open && this.type !== 'receiver';
  }

  /** submit_sm requests waiting for their response. */
  get submitsInFlight(): number {
    return this.#submits;
  }

  /** Sends a submit_sm; resolves with its response (any command_status), rejects with BindClosed when the link goes first. */
  async submit(fields: Record<string, unknown>): Promise<PDU> {
    this.#submits++;
    try {
      return await this.#request(new smpp.PDU('submit_sm', fields));
    } finally {
      this.#submits--;
    }
  }

  /** Unbinds (waiting for the answer at most the response timeout), then closes the connection. */
  async unbind(): Promise<void> {
    if (this.#closed) return;
    if (this.#bound) await this.#request(new smpp.PDU('unbind')).catch(() => {});
    this.#close('unbound');
  }

  /** Closes the connection at once (outstanding requests reject with BindClosed). */
  destroy(reason: string): void {
    this.#close(reason);
  }

  #connected(): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#close(`connect timeout after ${this.#o.connectTimeoutMs} ms`);
        reject(new BindClosed(`connecting to ${this.#o.host}:${this.#o.port} timed out`));
      }, this.#o.connectTimeoutMs);
      const done = (e?: Error) => {
        clearTimeout(timer);
        this.#session.off(this.#o.tls ? 'secureConnect' : 'connect', ok);
        this.#session.off('error', failed);
        this.#session.off('close', closedEarly);
        if (e) reject(e);
        else resolve();
      };
      const ok = () => done();
      const failed = (e: Error) => done(new BindClosed(`connecting to ${this.#o.host}:${this.#o.port} failed: ${e.message}`));
      const closedEarly = () => done(new BindClosed(`connection to ${this.#o.host}:${this.#o.port} closed while connecting`));
      this.#session.once(this.#o.tls ? 'secureConnect' : 'connect', ok);
      this.#session.once('error', failed);
      this.#session.once('close', closedEarly);
    });
  }

  #listen(): void {
    const s = this.#session;
    s.on('error', (e: Error) => this.#close(`connection error: ${e.message}`));
    s.on('close', () => this.#close('connection closed by the SMSC'));
    s.on('pdu', (pdu: PDU) => {
      this.#lastTraffic = Date.now();
      if (pdu.isResponse() || pdu.command === 'generic_nack') {
        const waiting = this.#outstanding.get(pdu.sequence_number);
        if (!waiting) return;
        this.#outstanding.delete(pdu.sequence_number);
        clearTimeout(waiting.timer);
        waiting.resolve(pdu);
        return;
      }
      this.#answer(pdu);
    });
  }

  #answer(pdu: PDU): void {
    switch (pdu.command) {
      case 'enquire_link':
        this.#session.send(pdu.response());
        return;
      case 'unbind':
        this.#session.send(pdu.response());
        this.#close('the SMSC unbound');
        return;
      case 'deliver_sm': {
        const handlers = this.#handlers;
        if (!handlers) {
          this.#session.send(pdu.response({ command_status: 0x04 }));
          return;
        }
        handlers.deliver(readDeliver(pdu)).then(
          (status) => { if (!this.#closed) this.#session.send(pdu.response({ command_status: status })); },
          () => { if (!this.#closed) this.#session.send(pdu.response({ command_status: 0x64 })); },
        );
        return;
      }
      case 'data_sm':
        this.#session.send(pdu.response({ command_status: ESME_RX_R_APPN }));
        return;
      default:
        this.#session.send(pdu.response({ command_status: 0x03 }));
    }
  }

  #request(pdu: PDU): Promise<PDU> {
    if (this.#closed) return Promise.reject(new BindClosed('the link is closed'));
    return new Promise<PDU>((resolve, reject) => {
      if (!this.#session.send(pdu)) {
        reject(new BindClosed('the link is not writable'));
        return;
      }
      const seq = pdu.sequence_number;
      const timer = setTimeout(() => {
        this.#outstanding.delete(seq);
        reject(new BindClosed(`no ${pdu.command}_resp within ${this.#o.responseTimeoutMs} ms`));
        this.#close(`${pdu.command} unanswered for ${this.#o.responseTimeoutMs} ms`);
      }, this.#o.responseTimeoutMs);
      this.#outstanding.set(seq, { resolve, reject, timer });
    });
  }

  #keepAlive(): void {
    if (this.#closed || this.#enquiring || Date.now() - this.#lastTraffic < this.#o.enquireLinkMs) return;
    this.#enquiring = true;
    this.#request(new smpp.PDU('enquire_link')).then(
      () => { this.#enquiring = false; },
      () => { this.#enquiring = false; },
    );
  }

  #close(reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#keepalive) clearInterval(this.#keepalive);
    for (const [seq, waiting] of this.#outstanding) {
      clearTimeout(waiting.timer);
      this.#outstanding.delete(seq);
      waiting.reject(new BindClosed(reason));
    }
    this.#session.destroy();
    if (this.#bound) this.#handlers?.closed(this, reason);
  }
}

function tlvNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (Buffer.isBuffer(v) && v.length > 0) return v.length === 1 ? v[0]! : v.readUIntBE(0, Math.min(v.length, 6));
  return undefined;
}

function readDeliver(pdu: PDU): DeliverSm {
  const buf = (v: unknown) => (Buffer.isBuffer(v) ? v : typeof v === 'string' ? Buffer.from(v, 'latin1') : Buffer.alloc(0));
  const receipted = pdu.receipted_message_id;
  return {
    sourceAddr: String(pdu.source_addr ?? ''),
    sourceTon: Number(pdu.source_addr_ton ?? 0),
    destinationAddr: String(pdu.destination_addr ?? ''),
    destTon: Number(pdu.dest_addr_ton ?? 0),
    esmClass: Number(pdu.esm_class ?? 0),
    dataCoding: Number(pdu.data_coding ?? 0),
    shortMessage: buf(pdu.short_message),
    tlvs: {
      ...(receipted !== undefined ? { receiptedMessageId: Buffer.isBuffer(receipted) ? receipted.toString('latin1') : String(receipted) } : {}),
      ...(pdu.message_state !== undefined ? { messageState: tlvNumber(pdu.message_state) } : {}),
      ...(pdu.network_error_code !== undefined ? { networkErrorCode: buf(pdu.network_error_code) } : {}),
      ...(pdu.message_payload !== undefined ? { messagePayload: buf(pdu.message_payload) } : {}),
      ...(pdu.sar_msg_ref_num !== undefined ? { sarMsgRefNum: tlvNumber(pdu.sar_msg_ref_num) } : {}),
      ...(pdu.sar_total_segments !== undefined ? { sarTotalSegments: tlvNumber(pdu.sar_total_segments) } : {}),
      ...(pdu.sar_segment_seqnum !== undefined ? { sarSegmentSeqnum: tlvNumber(pdu.sar_segment_seqnum) } : {}),
    },
  };
}
