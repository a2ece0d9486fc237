/** SIP pieces on captured messages: parsing and framing, digest answers, client transaction timers. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { addressUri, cseq, DEFAULT_SIP_LIMITS, header, headers, param, parseDatagram, parseSipUri, serialize, sipLimits, SipTooLarge, stampVia, StreamFramer, type SipMessage, type SipRequest, type SipResponse } from './message.ts';
import { digestAuthorization, parseChallenge } from './digest.ts';
import { InviteClientTransaction, NonInviteClientTransaction, ackForFailure } from './transaction.ts';
import { decodeRef, encodeRef } from './gateway.ts';

const crlf = (s: string) => s.replace(/\r?\n/g, '\r\n');

// RFC 3261 §24.2 (Alice's INVITE through atlanta.com's proxy), as received by the proxy's next hop.
const INVITE = crlf(`INVITE sip:bob@biloxi.com SIP/2.0
Via: SIP/2.0/UDP bigbox3.site3.atlanta.com;branch=z9hG4bK77ef4c2312983.1,
 SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bKnashds8;received=192.0.2.1
Max-Forwards: 69
To: Bob <sip:bob@biloxi.com>
From: Alice <sip:alice@atlanta.com>;tag=1928301774
Call-ID: a84b4c76e66710
CSeq: 314159 INVITE
Contact: <sip:alice@pc33.atlanta.com>
Content-Type: application/sdp
Content-Length: 146

v=0
o=alice 2890844526 2890844526 IN IP4 pc33.atlanta.com
s=-
c=IN IP4 pc33.atlanta.com
t=0 0
m=audio 49172 RTP/AVP 0
a=rtpmap:0 PCMU/8000
`);

// A 180 in compact form (RFC 4475 style): v, f, t, i, l.
const RINGING = crlf(`SIP/2.0 180 Ringing
v: SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bKnashds8;received=192.0.2.1
t: Bob <sip:bob@biloxi.com>;tag=a6c85cf
f: Alice <sip:alice@atlanta.com>;tag=1928301774
i: a84b4c76e66710
Contact: <sip:bob@192.0.2.4>
CSeq: 314159 INVITE
l: 0

`);

describe('SIP messages', () => {
  it('parses a request with a folded, comma-joined Via and a body cut to Content-Length', () => {
    const m = parseDatagram(Buffer.from(INVITE + 'trailing garbage')) as SipRequest;
    expect(m.kind).toBe('request');
    expect(m.method).toBe('INVITE');
    expect(m.uri).toBe('sip:bob@biloxi.com');
    expect(headers(m, 'via')).toEqual(['SIP/2.0/UDP bigbox3.site3.atlanta.com;branch=z9hG4bK77ef4c2312983.1', 'SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bKnashds8;received=192.0.2.1']);
    expect(param(header(m, 'from'), 'tag')).toBe('1928301774');
    expect(cseq(m)).toEqual({ seq: 314159, method: 'INVITE' });
    expect(m.body.startsWith('v=0')).toBe(true);
    expect(Buffer.byteLength(m.body)).toBe(146);
    expect(m.body).not.toContain('garbage');
  });

  it('expands compact header names and reads a response', () => {
    const m = parseDatagram(Buffer.from(RINGING)) as SipResponse;
    expect(m).toMatchObject({ kind: 'response', status: 180, reason: 'Ringing' });
    expect(header(m, 'call-id')).toBe('a84b4c76e66710');
    expect(param(header(m, 'to'), 'tag')).toBe('a6c85cf');
    expect(addressUri(header(m, 'contact')!)).toBe('sip:bob@192.0.2.4');
  });

  it('writes what it reads (canonical names, Content-Length from the body)', () => {
    const m = parseDatagram(Buffer.from(INVITE));
    const again = parseDatagram(serialize(m));
    expect(again).toEqual(m);
    expect(serialize(m).toString()).toContain('\r\nCall-ID: a84b4c76e66710\r\nCSeq: 314159 INVITE\r\n');
  });

  it('frames messages out of a stream split anywhere, skipping keep-alive CRLFs', () => {
    const seen: SipMessage[] = [];
    const framer = new StreamFramer((m) => seen.push(m));
    const bytes = Buffer.concat([Buffer.from('\r\n\r\n'), Buffer.from(INVITE), Buffer.from(RINGING), Buffer.from(INVITE)]);
    for (let i = 0; i < bytes.length; i += 37) framer.push(bytes.subarray(i, i + 37));
    expect(seen.map((m) => (m.kind === 'request' ? m.method : m.status))).toEqual(['INVITE', 180, 'INVITE']);
    expect(Buffer.byteLength(seen[2]!.body)).toBe(146);
  });

  it('refuses a stream message without Content-Length and a malformed start line', () => {
    expect(() => new StreamFramer(() => {}).push(Buffer.from('OPTIONS sip:a@b SIP/2.0\r\nCall-ID: x\r\n\r\n'))).toThrow(/Content-Length/);
    expect(() => parseDatagram(Buffer.from('HELLO\r\n\r\n'))).toThrow(/start line/);
  });

  it('frames a message fed one byte at a time, and several messages in one chunk', () => {
    const seen: SipMessage[] = [];
    const framer = new StreamFramer((m) => seen.push(m));
    for (const byte of Buffer.from(INVITE)) framer.push(Buffer.from([byte]));
    framer.push(Buffer.from(RINGING + INVITE + RINGING));
    expect(seen.map((m) => (m.kind === 'request' ? m.method : m.status))).toEqual(['INVITE', 180, 'INVITE', 180]);
    expect(seen[0]).toEqual(parseDatagram(Buffer.from(INVITE)));
  });

  it('refuses a Content-Length past the message limit as soon as the head is read, with the head to answer', () => {
    const seen: SipMessage[] = [];
    const framer = new StreamFramer((m) => seen.push(m));
    const head = 'OPTIONS sip:gw@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TCP 10.0.0.9:5060;branch=z9hG4bKbig\r\nCall-ID: big\r\nCSeq: 1 OPTIONS\r\nContent-Length: 900000000\r\n\r\n';
    let thrown: unknown;
    try {
      framer.push(Buffer.from(head + 'x'.repeat(100)));
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(SipTooLarge);
    expect((thrown as SipTooLarge).head).toMatchObject({ kind: 'request', method: 'OPTIONS' });
    expect(seen).toEqual([]);
    // The limit counts head and body together: a body that just fits is read, one byte more is not.
    const small = sipLimits(2048);
    const headOf = (n: number) => `MESSAGE sip:a@b SIP/2.0\r\nCall-ID: c\r\nContent-Length: ${n}\r\n\r\n`;
    const fits = 2048 - Buffer.byteLength(headOf(1000));
    new StreamFramer((m) => seen.push(m), small).push(Buffer.from(headOf(fits) + 'y'.repeat(fits)));
    expect(seen).toHaveLength(1);
    expect(() => new StreamFramer(() => {}, small).push(Buffer.from(headOf(fits + 1)))).toThrow(SipTooLarge);
  });

  it('refuses a head longer than the limit without its end, and more headers than the limit', () => {
    const framer = new StreamFramer(() => {});
    const line = `X-Filler: ${'a'.repeat(1000)}\r\n`;
    expect(() => {
      framer.push(Buffer.from('OPTIONS sip:a@b SIP/2.0\r\n'));
      for (let i = 0; i < 40; i++) framer.push(Buffer.from(line));
    }).toThrow(/headers longer than 16384 bytes/);
    const many = `OPTIONS sip:a@b SIP/2.0\r\n${'Via: SIP/2.0/UDP h;branch=z9hG4bKa\r\n'.repeat(DEFAULT_SIP_LIMITS.maxHeaders + 1)}Content-Length: 0\r\n\r\n`;
    expect(() => new StreamFramer(() => {}).push(Buffer.from(many))).toThrow(/more than 256 headers/);
    expect(() => parseDatagram(Buffer.from(many))).toThrow(SipTooLarge);
    expect(() => parseDatagram(Buffer.alloc(3000, 0x41), sipLimits(2048))).toThrow(SipTooLarge);
  });

  it('stamps the top Via with the real source, replacing what the client wrote in received and rport', () => {
    expect(stampVia('SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bKx;rport', '203.0.113.7', 40123)).toBe('SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bKx;received=203.0.113.7;rport=40123');
    expect(stampVia('SIP/2.0/UDP victim.example.com:5060;received=198.51.100.1;rport=9;branch=z9hG4bKy', '203.0.113.7', 40123))
      .toBe('SIP/2.0/UDP victim.example.com:5060;branch=z9hG4bKy;received=203.0.113.7;rport=40123');
  });

  it('reads SIP URIs with port and transport', () => {
    expect(parseSipUri('sip:trunk.example.com')).toEqual({ scheme: 'sip', user: undefined, host: 'trunk.example.com', port: undefined, transport: undefined });
    expect(parseSipUri('sip:+14155550100@10.0.0.1:5070;transport=TCP')).toEqual({ scheme: 'sip', user: '+14155550100', host: '10.0.0.1', port: 5070, transport: 'tcp' });
    expect(parseSipUri('sips:[2001:db8::1]:5061')).toMatchObject({ scheme: 'sips', host: '2001:db8::1', port: 5061 });
    expect(parseSipUri('https://example.com')).toBeUndefined();
  });
});

describe('digest authentication', () => {
  it('answers the RFC 2617 §3.5 example exactly', () => {
    const challenge = parseChallenge('Digest realm="testrealm@host.com", qop="auth,auth-int", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", opaque="5ccc069c403ebaf9f0171e9517f40e41"')!;
    const value = digestAuthorization({ challenge, method: 'GET', uri: '/dir/index.html', username: 'Mufasa', password: 'Circle Of Life', cnonce: '0a4f113b', nc: 1 });
    expect(value).toContain('response="6629fae49393a05397450978507c4ef1"');
    expect(value).toContain('qop=auth, nc=00000001, cnonce="0a4f113b"');
    expect(value).toContain('opaque="5ccc069c403ebaf9f0171e9517f40e41"');
  });

  it('answers a SIP challenge without qop (RFC 2069 form) and with SHA-256 (RFC 8760)', () => {
    const plain = parseChallenge('Digest realm="atlanta.com", nonce="84a4cc6f3082121f32b42a2187831a9e"')!;
    // MD5(MD5("bob:atlanta.com:zanzibar") ":" nonce ":" MD5("INVITE:sip:bob@biloxi.com")), computed independently with Python's hashlib.
    expect(digestAuthorization({ challenge: plain, method: 'INVITE', uri: 'sip:bob@biloxi.com', username: 'bob', password: 'zanzibar' }))
      .toContain('response="ff64cdc2be144a16d4b4205a29a7692c"');
    const sha = parseChallenge('Digest realm="r", nonce="n", algorithm=SHA-256, qop="auth"')!;
    expect(digestAuthorization({ challenge: sha, method: 'INVITE', uri: 'sip:x@y', username: 'u', password: 'p', cnonce: 'c', nc: 1 })).toMatch(/response="[0-9a-f]{64}"/);
  });
});

describe('client transactions over UDP', () => {
  afterEach(() => { vi.useRealTimers(); });
  const invite = parseDatagram(Buffer.from(INVITE)) as SipRequest;
  const response = (status: number, method = 'INVITE'): SipResponse => ({
    kind: 'response', status, reason: 'x', body: '',
    headers: [['via', headers(invite, 'via')[0]!], ['to', 'Bob <sip:bob@biloxi.com>;tag=abc'], ['from', header(invite, 'from')!], ['call-id', 'a84b4c76e66710'], ['cseq', `314159 ${method}`]],
  });

  it('INVITE: timer A doubles from T1 until a provisional answer, timer B gives up after 64·T1', () => {
    vi.useFakeTimers();
    const sent: number[] = [];
    const timeout = vi.fn();
    new InviteClientTransaction({ request: invite, reliable: false, send: () => sent.push(Date.now()), user: { final: vi.fn(), timeout } });
    const start = Date.now();
    vi.advanceTimersByTime(32_000);
    expect(sent.map((t) => t - start)).toEqual([0, 500, 1500, 3500, 7500, 15500, 31500]);
    expect(timeout).toHaveBeenCalledOnce();
  });

  it('INVITE: a provisional stops retransmission; a failure is ACKed once per retransmission, reported once', () => {
    vi.useFakeTimers();
    const sent: SipRequest[] = [];
    const final = vi.fn();
    const tx = new InviteClientTransaction({ request: invite, reliable: false, send: (m) => sent.push(m), user: { final, timeout: vi.fn() } });
    tx.receive(response(180));
    vi.advanceTimersByTime(10_000);
    expect(sent).toHaveLength(1);
    tx.receive(response(486));
    tx.receive(response(486));
    expect(final).toHaveBeenCalledOnce();
    expect(sent.slice(1).map((m) => m.method)).toEqual(['ACK', 'ACK']);
    const ack = sent[1]!;
    expect(header(ack, 'via')).toBe(header(invite, 'via'));
    expect(header(ack, 'to')).toContain('tag=abc');
    expect(header(ack, 'cseq')).toBe('314159 ACK');
    expect(ack).toEqual(ackForFailure(invite, response(486)));
    expect(tx.state).toBe('completed');
    vi.advanceTimersByTime(32_000);
    expect(tx.state).toBe('terminated');
  });

  it('INVITE: a 2xx ends the transaction at once and is the user\'s to ACK', () => {
    const final = vi.fn();
    const sent: SipRequest[] = [];
    const tx = new InviteClientTransaction({ request: invite, reliable: true, send: (m) => sent.push(m), user: { final, timeout: vi.fn() } });
    tx.receive(response(200));
    expect(tx.state).toBe('terminated');
    expect(final).toHaveBeenCalledWith(expect.objectContaining({ status: 200 }));
    expect(sent).toHaveLength(1);
  });

  it('non-INVITE: timer E doubles up to T2, timer F times out at 64·T1', () => {
    vi.useFakeTimers();
    const bye: SipRequest = { ...invite, method: 'BYE', body: '' };
    const sent: number[] = [];
    const timeout = vi.fn();
    new NonInviteClientTransaction({ request: bye, reliable: false, send: () => sent.push(Date.now()), user: { final: vi.fn(), timeout } });
    const start = Date.now();
    vi.advanceTimersByTime(32_000);
    expect(sent.map((t) => t - start)).toEqual([0, 500, 1500, 3500, 7500, 11500, 15500, 19500, 23500, 27500, 31500]);
    expect(timeout).toHaveBeenCalledOnce();
  });
});

describe('gateway references', () => {
  it('carry the dialog and refuse anything else', () => {
    const d = { v: 1 as const, cid: 'c', from: '<sip:a@b>;tag=1', to: '<sip:c@d>', branch: 'z9hG4bKx', seq: 2, uri: 'sip:c@d', dest: { host: 'd', port: 5060, transport: 'udp' as const } };
    expect(decodeRef(encodeRef(d))).toEqual(d);
    expect(decodeRef('SBXCALL0123')).toBeUndefined();
    expect(decodeRef('sip1.!!!')).toBeUndefined();
  });
});
