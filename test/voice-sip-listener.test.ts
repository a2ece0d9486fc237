/**
 * The live SIP gateway's signalling listener over real sockets on 127.0.0.1: what it accepts is
 * bounded (message size, idle and slow connections, connections per source address) and a
 * datagram is answered at its source address and port, whatever its Via says.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SipVoiceGateway } from '../src/providers/voice/sip/gateway.ts';
import { eventually } from './helpers/voice.ts';

/** Gateways as the app builds them, with limits a test can reach; the loopback switch on (these tests talk from 127.0.0.1). */
function gateway(limits: Partial<{ idleTimeoutMs: number; maxConnectionsPerAddress: number; maxMessageBytes: number }>): SipVoiceGateway {
  return new SipVoiceGateway({ bindHost: '127.0.0.1', port: 0, policy: { allowLoopback: true }, limits, log: () => {}, sink: { schedule: async () => {} } });
}

/** A TCP client that keeps what it read and whether the far end closed. */
async function connect(port: number): Promise<{ socket: net.Socket; text(): string; closed: Promise<void>; isClosed(): boolean }> {
  const socket = net.connect({ host: '127.0.0.1', port });
  let text = '';
  let isClosed = false;
  socket.on('data', (c: Buffer) => { text += c.toString('latin1'); });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => { isClosed = true; resolve(); }));
  await once(socket, 'connect');
  return { socket, text: () => text, closed, isClosed: () => isClosed };
}

const options = (n: number, transport = 'TCP', via = `127.0.0.1:5999;branch=z9hG4bKopt${n}`) =>
  [`OPTIONS sip:gw@127.0.0.1 SIP/2.0`, `Via: SIP/2.0/${transport} ${via}`, 'Max-Forwards: 70', 'From: <sip:probe@127.0.0.1>;tag=p', 'To: <sip:gw@127.0.0.1>',
    `Call-ID: probe-${n}`, `CSeq: ${n} OPTIONS`, 'Content-Length: 0', '', ''].join('\r\n');

let quick: SipVoiceGateway;
let patient: SipVoiceGateway;
let quickPort: number;
let patientPort: number;

beforeAll(async () => {
  // 300 ms to complete a message: the idle and slow tests; the others wait as long as they need.
  quick = gateway({ idleTimeoutMs: 300 });
  patient = gateway({ idleTimeoutMs: 600_000, maxConnectionsPerAddress: 2 });
  quickPort = (await quick.listen()).tcpPort;
  patientPort = (await patient.listen()).tcpPort;
});
afterAll(async () => {
  await quick?.close();
  await patient?.close();
});

describe('the SIP listener over TCP', () => {
  it('answers a request over its connection', async () => {
    const c = await connect(patientPort);
    c.socket.write(options(1));
    await eventually('200 to OPTIONS', () => (/^SIP\/2\.0 200 OK\r\n[\s\S]*CSeq: 1 OPTIONS/m.test(c.text()) ? true : undefined), 5_000);
    c.socket.destroy();
  });

  it('answers 513 to a Content-Length past the limit and closes without reading the body', async () => {
    const c = await connect(patientPort);
    const head = options(2).replace('Content-Length: 0', 'Content-Length: 900000000');
    c.socket.write(head);
    // Then 32 MB of body, as fast as the connection takes it: the listener stops reading after the head.
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let written = 0;
    while (written < 32 * 1024 * 1024 && !c.isClosed()) {
      if (!c.socket.write(chunk)) await Promise.race([once(c.socket, 'drain').catch(() => {}), c.closed]);
      written += chunk.length;
    }
    await c.closed;
    expect(c.text()).toMatch(/^SIP\/2\.0 513 Message Too Large\r\n/);
    expect(c.text()).toMatch(/^CSeq: 2 OPTIONS$/m);
    expect(c.text()).toMatch(/^Via: SIP\/2\.0\/TCP 127\.0\.0\.1:5999;branch=z9hG4bKopt2;received=127\.0\.0\.1;rport=\d+$/m);
    expect(written).toBeLessThan(32 * 1024 * 1024);
    // The listener still serves others.
    const next = await connect(patientPort);
    next.socket.write(options(3));
    await eventually('200 after the refusal', () => (next.text().includes('CSeq: 3 OPTIONS') ? true : undefined), 5_000);
    next.socket.destroy();
  }, 30_000);

  it('closes a connection whose head grows past the limit without ending', async () => {
    const c = await connect(patientPort);
    c.socket.write('OPTIONS sip:gw@127.0.0.1 SIP/2.0\r\n');
    for (let i = 0; i < 40 && !c.isClosed(); i++) c.socket.write(`X-Filler-${i}: ${'b'.repeat(1000)}\r\n`);
    await c.closed;
    expect(c.text()).toBe('');
  });

  it('closes a connection that sends requests but never reads their answers', async () => {
    const c = await connect(patientPort);
    c.socket.pause();
    // Pipelined OPTIONS: once the kernel's buffers hold what they can, the answers would pile up in memory here.
    const batch = Buffer.from(Array.from({ length: 200 }, (_, i) => options(100 + i)).join(''));
    let sent = 0;
    while (!c.isClosed() && sent < 200_000) {
      if (!c.socket.write(batch)) await Promise.race([once(c.socket, 'drain').catch(() => {}), c.closed]);
      sent += 200;
    }
    await c.closed;
    expect(sent).toBeLessThan(200_000);
  }, 60_000);

  it('closes an idle connection after the idle timeout', async () => {
    const c = await connect(quickPort);
    await c.closed;
    expect(c.text()).toBe('');
  });

  it('closes a connection that keeps sending but never completes a message (slow)', async () => {
    const c = await connect(quickPort);
    const bytes = Buffer.from(options(4));
    // One byte every 50 ms: the connection is never idle, but its message would take seconds.
    for (let i = 0; i < bytes.length && !c.isClosed(); i++) {
      c.socket.write(bytes.subarray(i, i + 1));
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(c.isClosed()).toBe(true);
    expect(c.text()).toBe('');
  }, 30_000);

  it('accepts at most SIP_TCP_MAX_CONNECTIONS_PER_ADDRESS connections from one address; a closed one frees its place', async () => {
    const first = await connect(patientPort);
    const second = await connect(patientPort);
    first.socket.write(options(5));
    second.socket.write(options(6));
    await eventually('both answered', () => (first.text().includes('CSeq: 5') && second.text().includes('CSeq: 6') ? true : undefined), 5_000);
    const third = await connect(patientPort);
    third.socket.write(options(7));
    await third.closed;
    expect(third.text()).toBe('');
    expect(first.isClosed() || second.isClosed()).toBe(false);
    first.socket.destroy();
    await first.closed;
    const fourth = await eventually('a place again', async () => {
      const c = await connect(patientPort);
      c.socket.write(options(8));
      await Promise.race([c.closed, eventually('answer', () => (c.text().includes('CSeq: 8') ? true : undefined), 2_000).catch(() => undefined)]);
      if (c.text().includes('CSeq: 8')) return c;
      c.socket.destroy();
      return undefined;
    }, 10_000);
    fourth.socket.destroy();
    second.socket.destroy();
  }, 30_000);
});

describe('the SIP listener over UDP', () => {
  it('answers a datagram at its source address and port, not where its Via (or a received/rport it wrote) points', async () => {
    const { udpPort } = await patient.listen();
    const [source, named] = [dgram.createSocket('udp4'), dgram.createSocket('udp4')];
    const atSource: string[] = [];
    const atNamed: string[] = [];
    source.on('message', (m) => atSource.push(m.toString()));
    named.on('message', (m) => atNamed.push(m.toString()));
    await Promise.all([new Promise<void>((r) => source.bind(0, '127.0.0.1', () => r())), new Promise<void>((r) => named.bind(0, '127.0.0.1', () => r()))]);
    try {
      const namedPort = named.address().port;
      // RFC 3261 alone would answer the sent-by port; a client-written received/rport would steer it elsewhere.
      source.send(options(9, 'UDP', `127.0.0.1:${namedPort};branch=z9hG4bKudp9`), udpPort, '127.0.0.1');
      source.send(options(10, 'UDP', `127.0.0.1:${namedPort};branch=z9hG4bKudp10;received=127.0.0.1;rport=${namedPort}`), udpPort, '127.0.0.1');
      await eventually('both answers at the source', () => (atSource.length === 2 ? true : undefined), 5_000);
      for (const [i, text] of atSource.entries()) {
        expect(text).toMatch(/^SIP\/2\.0 200 OK\r\n/);
        expect(text).toMatch(new RegExp(`^Via: SIP/2\\.0/UDP 127\\.0\\.0\\.1:${namedPort};branch=z9hG4bKudp${9 + i};received=127\\.0\\.0\\.1;rport=${source.address().port}\\r$`, 'm'));
      }
      // Anything sent to the named port would have come by now (it was sent before the answers that did come).
      await new Promise((r) => setTimeout(r, 200));
      expect(atNamed).toEqual([]);
    } finally {
      source.close();
      named.close();
    }
  });
});
