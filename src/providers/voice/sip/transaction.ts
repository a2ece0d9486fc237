/**
 * SIP client transactions (RFC 3261 §17.1): the INVITE one (timers A, B, D; the ACK of a
 * non-2xx final response belongs to it) and the non-INVITE one (timers E, F, K) used for BYE,
 * CANCEL. Over a reliable transport (TCP, TLS) nothing is retransmitted and the wait timers are 0.
 * A transaction is told about responses by its owner (matched on the top Via branch and the CSeq
 * method) and reports to its user once: the first provisional, then the final response or a timeout.
 */
import { header, headers, type SipRequest, type SipResponse } from './message.ts';

export type SipTimers = { t1: number; t2: number; t4: number };
export const DEFAULT_TIMERS: SipTimers = { t1: 500, t2: 4000, t4: 5000 };

export type TransactionUser = {
  /** Every provisional response (1xx). */
  provisional?(response: SipResponse): void;
  /** The final response, once (retransmissions are absorbed). */
  final(response: SipResponse): void;
  /** No final response within 64·T1 (timer B or F): the user treats it as 408. */
  timeout(): void;
};

export type TransactionState = 'calling' | 'trying' | 'proceeding' | 'completed' | 'terminated';

abstract class ClientTransaction {
  state: TransactionState;
  readonly request: SipRequest;
  readonly branch: string;
  protected readonly send: (m: SipRequest) => void;
  protected readonly reliable: boolean;
  protected readonly timers: SipTimers;
  protected readonly user: TransactionUser;
  readonly #handles = new Set<ReturnType<typeof setTimeout>>();
  /** Called once when the transaction ends (its owner forgets it). */
  onTerminated: () => void = () => {};

  constructor(opts: { request: SipRequest; send: (m: SipRequest) => void; reliable: boolean; user: TransactionUser; timers?: SipTimers }, initial: TransactionState) {
    this.request = opts.request;
    this.branch = branchOf(opts.request);
    this.send = opts.send;
    this.reliable = opts.reliable;
    this.user = opts.user;
    this.timers = opts.timers ?? DEFAULT_TIMERS;
    this.state = initial;
  }

  protected after(ms: number, fn: () => void): void {
    const h = setTimeout(() => {
      this.#handles.delete(h);
      fn();
    }, ms);
    h.unref?.();
    this.#handles.add(h);
  }

  protected clearTimers(): void {
    for (const h of this.#handles) clearTimeout(h);
    this.#handles.clear();
  }

  protected terminate(): void {
    if (this.state === 'terminated') return;
    this.state = 'terminated';
    this.clearTimers();
    this.onTerminated();
  }

  abstract receive(response: SipResponse): void;
}

/** INVITE client transaction (§17.1.1). */
export class InviteClientTransaction extends ClientTransaction {
  #ack: SipRequest | undefined;

  constructor(opts: ConstructorParameters<typeof ClientTransaction>[0]) {
    super(opts, 'calling');
    this.send(this.request);
    // Timer B: no answer at all within 64·T1.
    this.after(64 * this.timers.t1, () => {
      if (this.state !== 'calling') return;
      this.terminate();
      this.user.timeout();
    });
    if (!this.reliable) this.#retransmit(this.timers.t1);
  }

  /** Timer A: resend the INVITE at T1, 2·T1, 4·T1… while nothing came back. */
  #retransmit(interval: number): void {
    this.after(interval, () => {
      if (this.state !== 'calling') return;
      this.send(this.request);
      this.#retransmit(interval * 2);
    });
  }

  receive(response: SipResponse): void {
    if (response.status < 200) {
      if (this.state === 'calling' || this.state === 'proceeding') {
        this.state = 'proceeding';
        this.user.provisional?.(response);
      }
      return;
    }
    if (response.status < 300) {
      // A 2xx ends the transaction; its ACK is the dialog's (a new transaction, sent by the user).
      if (this.state === 'calling' || this.state === 'proceeding') {
        this.terminate();
        this.user.final(response);
      }
      return;
    }
    if (this.state === 'completed') {
      // A retransmitted final response: our ACK was lost.
      if (this.#ack) this.send(this.#ack);
      return;
    }
    if (this.state !== 'calling' && this.state !== 'proceeding') return;
    this.state = 'completed';
    this.clearTimers();
    this.#ack = ackForFailure(this.request, response);
    this.send(this.#ack);
    // Timer D: absorb retransmissions of the final response.
    this.after(this.reliable ? 0 : 32_000, () => this.terminate());
    this.user.final(response);
  }
}

/** Non-INVITE client transaction (§17.1.2): BYE, CANCEL, and the like. */
export class NonInviteClientTransaction extends ClientTransaction {
  constructor(opts: ConstructorParameters<typeof ClientTransaction>[0]) {
    super(opts, 'trying');
    this.send(this.request);
    // Timer F.
    this.after(64 * this.timers.t1, () => {
      if (this.state !== 'trying' && this.state !== 'proceeding') return;
      this.terminate();
      this.user.timeout();
    });
    if (!this.reliable) this.#retransmit(this.timers.t1);
  }

  /** Timer E: T1, doubling up to T2 (and T2 once a provisional came). */
  #retransmit(interval: number): void {
    this.after(interval, () => {
      if (this.state !== 'trying' && this.state !== 'proceeding') return;
      this.send(this.request);
      this.#retransmit(this.state === 'proceeding' ? this.timers.t2 : Math.min(interval * 2, this.timers.t2));
    });
  }

  receive(response: SipResponse): void {
    if (this.state !== 'trying' && this.state !== 'proceeding') return;
    if (response.status < 200) {
      this.state = 'proceeding';
      this.user.provisional?.(response);
      return;
    }
    this.state = 'completed';
    this.clearTimers();
    // Timer K.
    this.after(this.reliable ? 0 : this.timers.t4, () => this.terminate());
    this.user.final(response);
  }
}

/** The `branch` parameter of the top Via. */
export function branchOf(m: { headers: SipRequest['headers'] }): string {
  return /;\s*branch=([^;\s]+)/i.exec(header(m, 'via') ?? '')?.[1] ?? '';
}

/**
 * The ACK of a non-2xx final response (§17.1.1.3): same Request-URI, Call-ID, From, top Via and
 * Route as the INVITE, To with the response's tag, CSeq number of the INVITE with method ACK.
 */
export function ackForFailure(invite: SipRequest, response: SipResponse): SipRequest {
  const seq = (header(invite, 'cseq') ?? '').trim().split(/\s+/)[0];
  return {
    kind: 'request', method: 'ACK', uri: invite.uri, body: '',
    headers: [
      ['via', header(invite, 'via')!],
      ['max-forwards', '70'],
      ['from', header(invite, 'from')!],
      ['to', header(response, 'to')!],
      ['call-id', header(invite, 'call-id')!],
      ['cseq', `${seq} ACK`],
      ...headers(invite, 'route').map((r): [string, string] => ['route', r]),
    ],
  };
}
