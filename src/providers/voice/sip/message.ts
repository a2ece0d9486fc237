/**
 * SIP messages (RFC 3261 §7): parsing one message from a datagram or a stream, and writing one.
 * Header names are kept lower-case and in long form (compact forms such as `v`, `i`, `f` expand);
 * values are kept as sent, and comma-joined Via/Route headers split into one value each.
 */

export type SipHeaders = [name: string, value: string][];

export type SipRequest = { kind: 'request'; method: string; uri: string; headers: SipHeaders; body: string };
export type SipResponse = { kind: 'response'; status: number; reason: string; headers: SipHeaders; body: string };
export type SipMessage = SipRequest | SipResponse;

const COMPACT: Record<string, string> = {
  i: 'call-id', m: 'contact', e: 'content-encoding', l: 'content-length', c: 'content-type', f: 'from', s: 'subject', k: 'supported', t: 'to', v: 'via',
};
/** Headers whose comma-separated values are separate headers (RFC 3261 §7.3.1). */
const LISTS = new Set(['via', 'route', 'record-route']);

export class SipParseError extends Error {}

/**
 * A message over the size limits. `head` is its start line and headers when they could be read
 * (a request's Content-Length too large), so the request can be answered 513 before closing.
 */
export class SipTooLarge extends SipParseError {
  readonly head: SipMessage | undefined;
  constructor(message: string, head?: SipMessage) {
    super(message);
    this.head = head;
  }
}

/** How much one message may hold: the whole of it, its head (start line and headers), and its header count. */
export type SipLimits = { maxMessageBytes: number; maxHeadBytes: number; maxHeaders: number };

/** A datagram's largest payload (65,535), so a stream carries no more than UDP could; 16 KiB of head; 256 headers. */
export const DEFAULT_SIP_LIMITS: SipLimits = { maxMessageBytes: 65_535, maxHeadBytes: 16_384, maxHeaders: 256 };

/** The limits for a message size: the head's share never above the message's. */
export function sipLimits(maxMessageBytes: number): SipLimits {
  return { ...DEFAULT_SIP_LIMITS, maxMessageBytes, maxHeadBytes: Math.min(DEFAULT_SIP_LIMITS.maxHeadBytes, maxMessageBytes) };
}

/** Lower-case long header name. */
export function headerName(name: string): string {
  const lower = name.trim().toLowerCase();
  return COMPACT[lower] ?? lower;
}

/** Splits on commas outside quotes and angle brackets. */
function splitList(value: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i];
    if (ch === '"' && value[i - 1] !== '\\') quoted = !quoted;
    else if (!quoted && ch === '<') depth++;
    else if (!quoted && ch === '>') depth--;
    else if (!quoted && depth === 0 && ch === ',') {
      out.push(value.slice(start, i).trim());
      start = i + 1;
    }
  }
  out.push(value.slice(start).trim());
  return out.filter(Boolean);
}

/** Parses the head (start line and headers) and takes `body` as given. */
export function parseHead(head: string, body: string, limits: SipLimits = DEFAULT_SIP_LIMITS): SipMessage {
  // Unfold continuation lines (a line starting with whitespace continues the previous one).
  const lines = head.replace(/\r\n[ \t]+/g, ' ').split('\r\n');
  const start = lines.shift() ?? '';
  const headers: SipHeaders = [];
  for (const line of lines) {
    if (!line) continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new SipParseError(`malformed header line: ${line.slice(0, 60)}`);
    const name = headerName(line.slice(0, colon));
    const value = line.slice(colon + 1).trim();
    if (LISTS.has(name)) for (const v of splitList(value)) headers.push([name, v]);
    else headers.push([name, value]);
    if (headers.length > limits.maxHeaders) throw new SipTooLarge(`more than ${limits.maxHeaders} headers`);
  }
  const status = /^SIP\/2\.0 (\d{3}) ?(.*)$/.exec(start);
  if (status) return { kind: 'response', status: Number(status[1]), reason: status[2] ?? '', headers, body };
  const request = /^([A-Z]+) (\S+) SIP\/2\.0$/.exec(start);
  if (request) return { kind: 'request', method: request[1]!, uri: request[2]!, headers, body };
  throw new SipParseError(`malformed start line: ${start.slice(0, 60)}`);
}

/** One message from one datagram (a body longer than Content-Length is cut, RFC 3261 §18.3). */
export function parseDatagram(data: Buffer, limits: SipLimits = DEFAULT_SIP_LIMITS): SipMessage {
  if (data.length > limits.maxMessageBytes) throw new SipTooLarge(`datagram of ${data.length} bytes, over ${limits.maxMessageBytes}`);
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) throw new SipParseError('no end of headers');
  if (end > limits.maxHeadBytes) throw new SipTooLarge(`headers longer than ${limits.maxHeadBytes} bytes`);
  const message = parseHead(data.toString('utf8', 0, end), '', limits);
  const rest = data.subarray(end + 4);
  const length = header(message, 'content-length');
  message.body = (length === undefined ? rest : rest.subarray(0, Number(length))).toString('utf8');
  return message;
}

/**
 * Frames messages out of a stream (TCP/TLS): Content-Length is mandatory there (§18.3). Feed it
 * chunks; it calls `onMessage` for each complete message, and throws on a malformed one or one
 * over the limits (SipTooLarge: a head longer than `maxHeadBytes`, or a Content-Length that would
 * take the message past `maxMessageBytes`, refused as soon as the head is read, before any of
 * its body). Each byte is copied once: the head into a buffer grown by doubling (searched for its
 * end only where the new bytes are), the body as a list of chunks joined when complete.
 */
export class StreamFramer {
  readonly #onMessage: (m: SipMessage) => void;
  readonly #limits: SipLimits;
  #head: Buffer = Buffer.alloc(0);
  #headLength = 0;
  /** The message whose body is being read, the body's chunks so far and the bytes still due. */
  #message: SipMessage | undefined;
  #body: Buffer[] = [];
  #due = 0;

  constructor(onMessage: (m: SipMessage) => void, limits: SipLimits = DEFAULT_SIP_LIMITS) {
    this.#onMessage = onMessage;
    this.#limits = limits;
  }

  push(chunk: Buffer): void {
    let data = chunk;
    while (data.length > 0) {
      if (this.#message) {
        const take = Math.min(this.#due, data.length);
        this.#body.push(data.subarray(0, take));
        this.#due -= take;
        data = data.subarray(take);
        if (this.#due === 0) this.#complete();
        continue;
      }
      if (this.#headLength === 0) {
        // Keep-alive CRLFs between messages are skipped (RFC 5626 §3.5.1).
        let skip = 0;
        while (skip < data.length && (data[skip] === 0x0d || data[skip] === 0x0a)) skip++;
        data = data.subarray(skip);
        if (data.length === 0) return;
      }
      // The head may hold its limit plus the blank line that ends it.
      const before = this.#headLength;
      const taken = data.subarray(0, Math.min(data.length, this.#limits.maxHeadBytes + 4 - before));
      this.#appendHead(taken);
      const end = this.#head.subarray(0, this.#headLength).indexOf('\r\n\r\n', Math.max(0, before - 3));
      if (end < 0) {
        if (this.#headLength >= this.#limits.maxHeadBytes + 4) throw new SipTooLarge(`headers longer than ${this.#limits.maxHeadBytes} bytes`);
        data = data.subarray(taken.length);
        continue;
      }
      if (end > this.#limits.maxHeadBytes) throw new SipTooLarge(`headers longer than ${this.#limits.maxHeadBytes} bytes`);
      // What was taken past the head's end is the start of the body (or of the next message).
      data = data.subarray(taken.length - (this.#headLength - (end + 4)));
      const message = parseHead(this.#head.toString('utf8', 0, end), '', this.#limits);
      this.#headLength = 0;
      const length = header(message, 'content-length');
      if (length === undefined || !/^\d+$/.test(length)) throw new SipParseError('stream message without a valid Content-Length');
      const total = end + 4 + Number(length);
      if (total > this.#limits.maxMessageBytes) throw new SipTooLarge(`message of ${total} bytes (Content-Length ${length}), over ${this.#limits.maxMessageBytes}`, message);
      this.#message = message;
      this.#due = Number(length);
      if (this.#due === 0) this.#complete();
    }
  }

  #appendHead(bytes: Buffer): void {
    const needed = this.#headLength + bytes.length;
    if (needed > this.#head.length) {
      const grown = Buffer.allocUnsafe(Math.min(Math.max(needed, this.#head.length * 2, 1024), this.#limits.maxHeadBytes + 4));
      this.#head.copy(grown, 0, 0, this.#headLength);
      this.#head = grown;
    }
    bytes.copy(this.#head, this.#headLength);
    this.#headLength = needed;
  }

  #complete(): void {
    const message = this.#message!;
    message.body = Buffer.concat(this.#body).toString('utf8');
    this.#message = undefined;
    this.#body = [];
    this.#onMessage(message);
  }
}

/** The first value of a header. */
export function header(m: { headers: SipHeaders }, name: string): string | undefined {
  const n = headerName(name);
  return m.headers.find(([k]) => k === n)?.[1];
}

/** Every value of a header, in order. */
export function headers(m: { headers: SipHeaders }, name: string): string[] {
  const n = headerName(name);
  return m.headers.filter(([k]) => k === n).map(([, v]) => v);
}

/** A `;name=value` parameter of a header value (outside its `<…>` URI part). */
export function param(value: string | undefined, name: string): string | undefined {
  if (!value) return undefined;
  const outside = value.replace(/<[^>]*>/g, '');
  const m = new RegExp(`;\\s*${name}=([^;,\\s]+)`, 'i').exec(outside);
  return m?.[1];
}

/**
 * A received request's top Via stamped with where it really came from (RFC 3261 §18.2.1, RFC 3581
 * §4): `received` and `rport` set to the packet's source address and port, whatever the client
 * wrote in them (both are the receiver's to write, never the sender's).
 */
export function stampVia(via: string, host: string, port: number): string {
  const bare = via.replace(/;\s*(?:received|rport)(?:\s*=\s*[^;]*)?(?=;|$)/gi, '');
  return `${bare};received=${host};rport=${port}`;
}

/** The URI of a name-addr (`"Bob" <sip:bob@host>;tag=1` → `sip:bob@host`) or of an addr-spec. */
export function addressUri(value: string): string {
  const angle = /<([^>]*)>/.exec(value);
  if (angle) return angle[1]!;
  return value.split(';')[0]!.trim();
}

/** `CSeq: 2 INVITE` → { seq: 2, method: 'INVITE' }. */
export function cseq(m: { headers: SipHeaders }): { seq: number; method: string } {
  const [n, method] = (header(m, 'cseq') ?? '').trim().split(/\s+/);
  return { seq: Number(n), method: (method ?? '').toUpperCase() };
}

function capitalise(name: string): string {
  if (name === 'call-id') return 'Call-ID';
  if (name === 'cseq') return 'CSeq';
  if (name === 'www-authenticate') return 'WWW-Authenticate';
  return name.replace(/(^|-)([a-z])/g, (_m, dash: string, ch: string) => dash + ch.toUpperCase());
}

/**
 * A response to a request (§8.2.6): its Via headers (the top one as given), From, To (with
 * `toTag` when it has no tag yet), Call-ID and CSeq; no body.
 */
export function responseTo(request: SipRequest, status: number, reason: string, opts: { topVia?: string; toTag: string; extra?: SipHeaders }): SipResponse {
  let to = header(request, 'to') ?? '';
  if (!param(to, 'tag')) to += `;tag=${opts.toTag}`;
  return {
    kind: 'response', status, reason, body: '',
    headers: [
      ...headers(request, 'via').map((v, i): [string, string] => ['via', i === 0 && opts.topVia !== undefined ? opts.topVia : v]),
      ['from', header(request, 'from') ?? ''], ['to', to], ['call-id', header(request, 'call-id') ?? ''], ['cseq', header(request, 'cseq') ?? ''],
      ...(opts.extra ?? []),
    ],
  };
}

/** Writes a message; Content-Length is set from the body (any given one is replaced). */
export function serialize(m: SipMessage): Buffer {
  const start = m.kind === 'request' ? `${m.method} ${m.uri} SIP/2.0` : `SIP/2.0 ${m.status} ${m.reason}`;
  const lines = [start];
  for (const [name, value] of m.headers) if (headerName(name) !== 'content-length') lines.push(`${capitalise(headerName(name))}: ${value}`);
  lines.push(`Content-Length: ${Buffer.byteLength(m.body)}`);
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${m.body}`, 'utf8');
}

/**
 * Parts of a SIP URI that routing needs: `sip:user@host:port;transport=tcp` or `sips:…`.
 * Host names and IPv4 are supported (IPv6 in brackets too).
 */
export type SipUri = { scheme: 'sip' | 'sips'; user: string | undefined; host: string; port: number | undefined; transport: 'udp' | 'tcp' | 'tls' | undefined };

export function parseSipUri(uri: string): SipUri | undefined {
  const m = /^(sips?):(?:([^@;]+)@)?(\[[0-9a-fA-F:.]+\]|[^:;?>]+)(?::(\d+))?([^?]*)/.exec(uri.trim());
  if (!m) return undefined;
  const transport = /;transport=(udp|tcp|tls)/i.exec(m[5] ?? '')?.[1]?.toLowerCase() as SipUri['transport'];
  return { scheme: m[1] as 'sip' | 'sips', user: m[2], host: m[3]!.replace(/^\[|\]$/g, ''), port: m[4] ? Number(m[4]) : undefined, transport };
}
