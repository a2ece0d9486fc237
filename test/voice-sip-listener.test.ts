/**
 * The live SIP gateway's signalling listener over real sockets on 127.0.0.1: a datagram is
 * answered at its source address and port, whatever its Via says.
 */
import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SipVoiceGateway } from '../src/providers/voice/sip/gateway.ts';
import { eventually } from './helpers/voice.ts';

const options = (n: number, transport = 'TCP', via = `127.0.0.1:5999;branch=z9hG4bKopt${n}`) =>
  [`OPTIONS sip:gw@127.0.0.1 SIP/2.0`, `Via: SIP/2.0/${transport} ${via}`, 'Max-Forwards: 70', 'From: <sip:probe@127.0.0.1>;tag=p', 'To: <sip:gw@127.0.0.1>',
    `Call-ID: probe-${n}`, `CSeq: ${n} OPTIONS`, 'Content-Length: 0', '', ''].join('\r\n');

let patient: SipVoiceGateway;

beforeAll(async () => {
  // The loopback switch on: these tests talk from 127.0.0.1.
  patient = new SipVoiceGateway({ bindHost: '127.0.0.1', port: 0, policy: { allowLoopback: true }, log: () => {}, sink: { schedule: async () => {} } });
  await patient.listen();
});
afterAll(async () => {
  await patient?.close();
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
