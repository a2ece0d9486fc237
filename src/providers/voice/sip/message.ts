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
export function parseHead(head: string, body: string): SipMessage {
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
  }
  const status = /^SIP\/2\.0 (\d{3}) ?(.*)$/.exec(start);
  if (status) return { kind: 'response', status: Number(status[1]), reason: status[2] ?? '', headers, body };
  const request = /^([A-Z]+) (\S+) SIP\/2\.0$/.exec(start);
  if (request) return { kind: 'request', method: request[1]!, uri: request[2]!, headers, body };
  throw new SipParseError(`malformed start line: ${start.slice(0, 60)}`);
}

/** One message from one datagram (a body longer than Content-Length is cut, RFC 3261 §18.3). */
export function parseDatagram(data: Buffer): SipMessage {
  const text = data.toString('utf8');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) throw new SipParseError('no end of headers');
  const message = parseHead(text.slice(0, end), '');
  const rest = data.subarray(Buffer.byteLength(text.slice(0, end + 4)));
  const length = header(message, 'content-length');
  message.body = (length === undefined ? rest : rest.subarray(0, Number(length))).toString('utf8');
  return message;
}

/**
 * Frames messages out of a stream (TCP/TLS): Content-Length is mandatory there (§18.3). Feed it
 * chunks; it calls `onMessage` for each complete message, and throws on a malformed one.
 */
export class StreamFramer {
  #buffer: Buffer = Buffer.alloc(0);
  readonly #onMessage: (m: SipMessage) => void;

  constructor(onMessage: (m: SipMessage) => void) {
    this.#onMessage = onMessage;
  }

  push(chunk: Buffer): void {
    this.#buffer = this.#buffer.length ? Buffer.concat([this.#buffer, chunk]) : chunk;
    for (;;) {
      // Keep-alive CRLFs between messages are skipped (RFC 5626 §3.5.1).
      let skip = 0;
      while (this.#buffer[skip] === 0x0d || this.#buffer[skip] === 0x0a) skip++;
      if (skip) this.#buffer = this.#buffer.subarray(skip);
      const end = this.#buffer.indexOf('\r\n\r\n');
      if (end < 0) {
        if (this.#buffer.length > 64 * 1024) throw new SipParseError('headers longer than 64 KiB');
        return;
      }
      const head = this.#buffer.subarray(0, end).toString('utf8');
      const message = parseHead(head, '');
      const length = header(message, 'content-length');
      if (length === undefined || !/^\d+$/.test(length)) throw new SipParseError('stream message without a valid Content-Length');
      const total = end + 4 + Number(length);
      if (this.#buffer.length < total) return;
      message.body = this.#buffer.subarray(end + 4, total).toString('utf8');
      this.#buffer = this.#buffer.subarray(total);
      this.#onMessage(message);
    }
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
