/**
 * The fuzz harness's SIP part (issue 43): the live gateway's signalling listener, as the app builds
 * it, over real sockets on 127.0.0.1, fed generated malformed, truncated, oversized and reflected
 * datagrams and streams (fast-check). The listener stays up and logs no failure of its own; what it
 * answers is a SIP status line, sent only to the packet's source (never to the address a Via names);
 * and a valid OPTIONS (200) and INVITE (603: this gateway routes no inbound calls) afterwards are
 * answered over UDP and TCP. Cases: FUZZ_RUNS × 10 datagrams and × 2 streams (the long form: npm run fuzz).
 */
import dgram from 'node:dgram';
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SipVoiceGateway } from '../src/providers/voice/sip/gateway.ts';
import { HOSTILE_STRINGS } from './helpers/fuzz.ts';
import { eventually } from './helpers/voice.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 3);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : process.env.FUZZ_RUNS ? Date.now() % 2 ** 31 : 43;
const MAX_MESSAGE_BYTES = 8_192;

const problems: string[] = [];
let gw: SipVoiceGateway;
let udpPort: number;
let tcpPort: number;

beforeAll(async () => {
  gw = new SipVoiceGateway({
    bindHost: '127.0.0.1', port: 0, policy: { allowLoopback: true }, limits: { idleTimeoutMs: 500, maxMessageBytes: MAX_MESSAGE_BYTES },
    // Warnings are the listener refusing input; anything it did not expect would surface as a thrown error instead.
    log: () => {}, sink: { schedule: async () => {} },
  });
  ({ udpPort, tcpPort } = await gw.listen());
});
afterAll(async () => { await gw?.close(); });

const request = (method: string, n: number, transport: string, via: string, extra: string[] = [], body = '') =>
  [`${method} sip:+14155550100@127.0.0.1 SIP/2.0`, `Via: SIP/2.0/${transport} ${via}`, 'Max-Forwards: 70', 'From: <sip:fuzz@127.0.0.1>;tag=f', 'To: <sip:+14155550100@127.0.0.1>',
    `Call-ID: fuzz-${n}-${Math.random().toString(36).slice(2)}`, `CSeq: ${n} ${method}`, ...extra, `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n');

/** A message after a valid one: one line replaced, dropped or repeated, hostile values, a wrong Content-Length, cut short, or bytes. */
const messageArb = (transport: string, reflectTo: number): fc.Arbitrary<Buffer> => {
  const method = fc.constantFrom('OPTIONS', 'INVITE', 'BYE', 'CANCEL', 'ACK', 'INFO', 'REGISTER', 'FOO', '', 'OPTIONS OPTIONS');
  const value = fc.oneof(fc.constantFrom(...HOSTILE_STRINGS.map((s) => s.slice(0, 5_000))), fc.string({ unit: 'binary', maxLength: 60 }), fc.constant('x'.repeat(MAX_MESSAGE_BYTES * 2)));
  // The Via names another port (ours, listening): an answer there would be a reflection.
  const via = fc.constantFrom(`127.0.0.1:${reflectTo};branch=z9hG4bKf`, `127.0.0.1:${reflectTo};branch=z9hG4bKf;received=127.0.0.1;rport=${reflectTo}`, '', ';;;', `[::1]:${reflectTo}`, 'a'.repeat(3_000));
  const text = fc.tuple(method, fc.nat(2 ** 31), via, fc.array(fc.tuple(fc.constantFrom('Content-Length', 'CSeq', 'Call-ID', 'Via', 'From', 'To', 'Contact', 'Content-Type', 'X-Fuzz', 'Max-Forwards'), value).map(([h, v]) => `${h}: ${v}`), { maxLength: 4 }),
    fc.oneof(fc.constant(''), value, fc.constant('v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 9 RTP/AVP 0\r\n')))
    .map(([m, n, v, extra, body]) => request(m, n, transport, v, extra, body));
  return fc.oneof(
    { weight: 4, arbitrary: text.map((t) => Buffer.from(t, 'utf8')) },
    // Cut short anywhere.
    { weight: 2, arbitrary: fc.tuple(text, fc.nat()).map(([t, at]) => Buffer.from(t.slice(0, at % (t.length + 1)), 'utf8')) },
    // A Content-Length that says more, less, or nonsense.
    { weight: 2, arbitrary: fc.tuple(text, fc.constantFrom('-1', '999999999999', '1e3', '0x10', ' 5', '5, 6', '', '900000000')).map(([t, cl]) => Buffer.from(t.replace(/Content-Length: \d+/, `Content-Length: ${cl}`), 'utf8')) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2_000 }).map((b) => Buffer.from(b)) },
    { weight: 1, arbitrary: fc.constantFrom(Buffer.alloc(MAX_MESSAGE_BYTES + 1, 0x41), Buffer.from('\r\n\r\n'), Buffer.from('SIP/2.0 200 OK\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n'), Buffer.from('\u0000'.repeat(100))) },
  );
};

/** Connected (events.once would also reject on a later reset, which these tests expect). */
const connected = (c: net.Socket) => new Promise<void>((resolve, reject) => { c.once('connect', resolve); c.once('error', reject); });

const STATUS_LINE = /^SIP\/2\.0 [1-6]\d\d [^\r\n]*\r\n/;

async function validExchange(n: number): Promise<void> {
  // UDP: OPTIONS and INVITE from a fresh socket, answered at its source.
  const s = dgram.createSocket('udp4');
  const got: string[] = [];
  s.on('message', (m) => got.push(m.toString('latin1')));
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  const me = `127.0.0.1:${s.address().port};branch=z9hG4bKok${n}`;
  const optionsReq = request('OPTIONS', n, 'UDP', me);
  const inviteReq = request('INVITE', n + 1, 'UDP', `${me}i`, [`Contact: <sip:fuzz@127.0.0.1:${s.address().port}>`, 'Content-Type: application/sdp']);
  const ok = () => got.some((t) => /^SIP\/2\.0 200 /.test(t) && t.includes(`CSeq: ${n} OPTIONS`)) && got.some((t) => /^SIP\/2\.0 603 /.test(t) && t.includes(`CSeq: ${n + 1} INVITE`));
  // Sent again every 500 ms until answered, as a UA does (RFC 3261 timers A and E): after a flood,
  // the listener's receive buffer may have dropped the first copies, which is UDP, not a failure.
  for (let i = 0; i < 20 && !ok(); i++) {
    s.send(optionsReq, udpPort, '127.0.0.1');
    s.send(inviteReq, udpPort, '127.0.0.1');
    await new Promise((r) => setTimeout(r, 500));
  }
  if (!ok()) throw new Error(`UDP OPTIONS 200 and INVITE 603 not answered in 10 s; got ${JSON.stringify(got.map((t) => t.split('\r\n')[0]))}`);
  s.close();
  // TCP: OPTIONS over a new connection.
  const c = net.connect({ host: '127.0.0.1', port: tcpPort });
  let text = '';
  c.on('data', (b: Buffer) => { text += b.toString('latin1'); });
  c.on('error', () => {});
  await connected(c);
  c.write(request('OPTIONS', n + 2, 'TCP', `127.0.0.1:5999;branch=z9hG4bKtcp${n}`));
  await eventually('TCP OPTIONS 200', () => (/^SIP\/2\.0 200 /.test(text) && text.includes(`CSeq: ${n + 2} OPTIONS`) ? true : undefined), 5_000);
  c.destroy();
}

describe('fuzzing the SIP listener', () => {
  it('UDP: malformed, truncated, oversized and reflected datagrams are answered at their source or not at all; valid requests still work', async () => {
    const source = dgram.createSocket('udp4');
    const reflected = dgram.createSocket('udp4');
    const answers: string[] = [];
    const elsewhere: string[] = [];
    source.on('message', (m) => answers.push(m.toString('latin1')));
    reflected.on('message', (m) => elsewhere.push(m.toString('latin1')));
    await new Promise<void>((r) => source.bind(0, '127.0.0.1', r));
    await new Promise<void>((r) => reflected.bind(0, '127.0.0.1', r));
    const datagrams = fc.sample(messageArb('UDP', reflected.address().port), { numRuns: RUNS * 10, seed: SEED });
    for (const d of datagrams) {
      // A datagram over 64 KB cannot be sent at all; the listener's limit is far below.
      await new Promise<void>((r) => source.send(d.subarray(0, 65_000), udpPort, '127.0.0.1', () => r()));
    }
    await validExchange(1_000);
    // Whatever was answered came back to the source, as a status line.
    await new Promise((r) => setTimeout(r, 200));
    for (const a of answers) if (!STATUS_LINE.test(a)) problems.push(`UDP answer is not a status line: ${JSON.stringify(a.slice(0, 120))}`);
    expect(elsewhere, 'answers sent to the address a Via named').toEqual([]);
    source.close();
    reflected.close();
    process.stderr.write(`fuzz SIP (seed ${SEED}): ${datagrams.length} UDP datagrams, ${answers.length} answered\n`);
    expect(problems).toEqual([]);
  }, 60_000 + RUNS * 10 * 200);

  it('TCP: malformed, truncated, oversized and slow streams leave the listener serving; answers are status lines', async () => {
    const streams = fc.sample(fc.array(messageArb('TCP', 9), { minLength: 1, maxLength: 3 }), { numRuns: RUNS * 2, seed: SEED + 1 });
    let n = 2_000;
    for (const parts of streams) {
      const c = net.connect({ host: '127.0.0.1', port: tcpPort });
      let text = '';
      let closed = false;
      c.on('data', (b: Buffer) => { text += b.toString('latin1'); });
      c.on('error', () => {});
      const ended = new Promise<void>((r) => c.on('close', () => { closed = true; r(); }));
      await connected(c);
      for (const p of parts) if (!closed) c.write(p);
      // Then stop talking (a truncated message waits): the idle timeout closes it, or we do.
      // (A reset is one way to close: the listener refuses what it will not read.)
      await Promise.race([ended, new Promise((r) => setTimeout(r, 1_500))]);
      c.destroy();
      if (text && !STATUS_LINE.test(text)) problems.push(`TCP answer is not a status line: ${JSON.stringify(text.slice(0, 120))}`);
      await validExchange(n += 10);
    }
    // A slow stream: a valid OPTIONS one byte at a time past the idle timeout is closed, unanswered.
    const slow = net.connect({ host: '127.0.0.1', port: tcpPort });
    let slowText = '';
    let slowClosed = false;
    slow.on('data', (b: Buffer) => { slowText += b.toString('latin1'); });
    slow.on('error', () => {});
    slow.on('close', () => { slowClosed = true; });
    await connected(slow);
    const bytes = Buffer.from(request('OPTIONS', 3_000, 'TCP', '127.0.0.1:5999;branch=z9hG4bKslow'));
    for (let i = 0; i < bytes.length && !slowClosed; i++) {
      slow.write(bytes.subarray(i, i + 1));
      await new Promise((r) => setTimeout(r, 40));
    }
    expect(slowClosed).toBe(true);
    expect(slowText).toBe('');
    await validExchange(4_000);
    process.stderr.write(`fuzz SIP (seed ${SEED}): ${streams.length} TCP streams\n`);
    expect(problems).toEqual([]);
  }, 60_000 + RUNS * 2 * 3_000);
});
