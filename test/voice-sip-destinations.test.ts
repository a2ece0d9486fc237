/**
 * Where the live SIP gateway may send (the webhooks' outbound address policy, without the
 * loopback switch here): trunks whose termination URI names a loopback, private, link-local,
 * metadata or reserved address are refused when saved (REST and GraphQL), and a call on a trunk
 * that points at one when it connects (stored before, or a name that resolves there) fails with
 * SIP_DESTINATION_BLOCKED without a packet reaching it. A far end's Contact naming such an
 * address gets the dialog's requests at the trunk's address instead.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { SipVoiceGateway } from '../src/providers/voice/sip/gateway.ts';
import { GatewayError } from '../src/providers/voice/types.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, eventually, expectError, VOICE_ENV } from './helpers/voice.ts';

/** Anything on 127.0.0.1 that a misdirected gateway could reach: a UDP socket and a TCP listener, recording what arrives. */
type Listener = { udpPort: number; tcpPort: number; seen: string[]; close(): void };

async function startListener(): Promise<Listener> {
  const seen: string[] = [];
  const udp = dgram.createSocket('udp4');
  udp.on('message', (m, rinfo) => seen.push(`udp from ${rinfo.port}: ${m.toString().split('\r\n')[0]}`));
  await new Promise<void>((r) => udp.bind(0, '127.0.0.1', () => r()));
  const tcp = net.createServer((socket) => {
    seen.push('tcp connection');
    socket.on('data', (c: Buffer) => seen.push(`tcp: ${c.toString().split('\r\n')[0]}`));
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', () => r()));
  return { udpPort: udp.address().port, tcpPort: (tcp.address() as net.AddressInfo).port, seen, close: () => { udp.close(); tcp.close(); } };
}

const { WEBHOOKS_ALLOW_LOOPBACK: _on, ...STRICT_ENV } = VOICE_ENV;

let t: TestApp;
let org: TestOrg;
let from: string;
let trunkId: string;
let listener: Listener;

beforeAll(async () => {
  listener = await startListener();
  // The loopback switch off, and SIP_BIND_HOST left to its default.
  t = await startTestApp({ workers: true, clock: systemClock, env: STRICT_ENV });
  org = await t.createOrg('enterprise', 'SIP destinations');
  from = await buyVoiceNumber(t, org.testKey);
  await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [org.orgId, from]);
  const trunk = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name: 'Carrier', termination_uri: 'sip:trunk.example.com', encryption: 'none' } });
  expect(trunk.status, trunk.text).toBe(201);
  trunkId = trunk.body.data.id;
}, 60_000);
afterAll(async () => {
  await t?.close();
  listener?.close();
});

const trunkCount = async () => (await t.db.query('select count(*)::int as n from sip_trunks where organization_id = $1', [org.orgId])).rows[0].n;

describe('saving a trunk', () => {
  it.each([
    'sip:127.0.0.1:6303;transport=tcp',
    'sip:169.254.169.254:80',
    'sip:10.0.0.1:5060',
    'sips:edge@192.168.1.20:5061',
    'sip:[::1]:5060',
    'sip:[::ffff:127.0.0.1]:5060',
    'sip:[64:ff9b::a9fe:a9fe]:5060',
    'sip:[2002:7f00:1::]:5060',
    'sip:127.1:5060',
    'sip:localhost:5060',
    'sip:pbx.internal',
  ])('refuses %s: 422 VALIDATION_ERROR naming termination_uri, nothing stored', async (uri) => {
    const before = await trunkCount();
    const r = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name: 'Bad', termination_uri: uri, encryption: 'none' } });
    expectError(r, 422, 'VALIDATION_ERROR', 'termination_uri');
    expect(r.body.error.details.reason).toBe('blocked_address');
    expect(await trunkCount()).toBe(before);
  });

  it('names the loopback switch when a loopback address is refused, and not otherwise', async () => {
    const loopback = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.testKey, body: { name: 'Local', termination_uri: 'sip:127.0.0.1:5080' } });
    expectError(loopback, 422, 'VALIDATION_ERROR', 'termination_uri');
    expect(loopback.body.error.details.allow_loopback).toBe('WEBHOOKS_ALLOW_LOOPBACK=1');
    const metadata = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.testKey, body: { name: 'Meta', termination_uri: 'sip:169.254.169.254' } });
    expectError(metadata, 422, 'VALIDATION_ERROR', 'termination_uri');
    expect(metadata.body.error.details.allow_loopback).toBeUndefined();
  });

  it('refuses a PUT to a blocked address and keeps the trunk as it was', async () => {
    const r = await t.rest('PUT', `/v1/voice/sip-trunks/${trunkId}`, { key: org.liveKey, body: { termination_uri: 'sip:169.254.169.254:80;transport=tcp' } });
    expectError(r, 422, 'VALIDATION_ERROR', 'termination_uri');
    const got = await t.rest('GET', `/v1/voice/sip-trunks/${trunkId}`, { key: org.liveKey });
    expect(got.body.data.termination_uri).toBe('sip:trunk.example.com');
  });

  it('refuses the same through GraphQL', async () => {
    const r = await t.gql('mutation($input: CreateSipTrunkInput!) { createSipTrunk(input: $input) { id } }', { input: { name: 'Bad', terminationUri: 'sip:169.254.169.254:80' } }, { key: org.liveKey });
    expect(r.body.errors?.[0]?.extensions?.code, r.text).toBe('VALIDATION_ERROR');
    expect(r.body.data?.createSipTrunk ?? null).toBeNull();
  });
});

describe('placing a call', () => {
  /** A trunk row that names a blocked address (saved before this check, as an older version allowed). */
  async function pointTrunkAt(uri: string): Promise<void> {
    await t.db.query('update sip_trunks set termination_uri = $1 where id = $2', [uri, trunkId]);
  }

  it('fails a call whose trunk is on a blocked address with SIP_DESTINATION_BLOCKED, sending nothing (UDP, TCP, the service\'s own SIP port, metadata)', async () => {
    const own = await t.app.services.sipGateway.listen();
    // SIP_BIND_HOST's default: the listener is not reachable from other hosts unless configured.
    expect(own.host).toBe('127.0.0.1');
    for (const uri of [
      `sip:127.0.0.1:${listener.udpPort}`,
      `sip:127.0.0.1:${listener.tcpPort};transport=tcp`,
      `sip:127.0.0.1:${own.tcpPort};transport=tcp`,
      `sip:127.0.0.1:${own.udpPort}`,
      'sip:169.254.169.254:80;transport=tcp',
    ]) {
      await pointTrunkAt(uri);
      const r = await t.rest('POST', '/v1/voice/calls', { key: org.liveKey, body: { from, to: '+14155550100' } });
      expect(r.status, r.text).toBe(201);
      const failed = await callReaches(t, org.liveKey, r.body.data.id, 'failed', 15_000);
      expect(failed.error_code, uri).toBe('SIP_DESTINATION_BLOCKED');
      expect(failed.sip_code).toBeNull();
      const step = failed.steps.find((s: any) => s.type === 'gateway_error');
      expect(step?.detail?.message, uri).toContain('is not an allowed destination');
    }
    // Whatever a send would have delivered had arrived by now: nothing did.
    await new Promise((r) => setTimeout(r, 300));
    expect(listener.seen).toEqual([]);
  }, 60_000);
});

describe('the gateway at connect time', () => {
  const strict = { allowLoopback: false };
  const events: { type: string }[] = [];
  const make = (opts: Partial<ConstructorParameters<typeof SipVoiceGateway>[0]>) => new SipVoiceGateway({
    bindHost: '127.0.0.1', port: 0, policy: strict, log: () => {}, sink: { schedule: async (e: { type: string }) => { events.push(e); } }, ...opts,
  });

  it('refuses a trunk name that resolves to a blocked address when the call connects, sending nothing', async () => {
    // The name passed the check when it was saved; by the call it resolves to 127.0.0.1 (DNS rebinding).
    const gw = make({ lookup: async () => [{ address: '127.0.0.1', family: 4 }] });
    try {
      for (const transport of ['udp', 'tcp']) {
        const port = transport === 'udp' ? listener.udpPort : listener.tcpPort;
        const trunk = { uri: `sip:trunk.example.com:${port};transport=${transport}`, username: null, password: null, encryption: 'none' as const, codecs: ['PCMU'] };
        const failure = await gw.place({ callId: `call_rebind_${transport}`, from: '+14155550001', to: '+14155550100', record: false, trunk }).catch((e: unknown) => e);
        expect(failure).toBeInstanceOf(GatewayError);
        expect((failure as GatewayError).errorCode).toBe('SIP_DESTINATION_BLOCKED');
      }
      await new Promise((r) => setTimeout(r, 300));
      expect(listener.seen).toEqual([]);
    } finally {
      await gw.close();
    }
  });

  it('sends the dialog\'s ACK and BYE to the trunk when the far end\'s Contact names a blocked address', async () => {
    // A far end on 127.0.0.1 (reached with the loopback switch) that answers 200 with Contact: 169.254.169.254.
    const far = dgram.createSocket('udp4');
    const got: string[] = [];
    far.on('message', (m, rinfo) => {
      const text = m.toString();
      got.push(text.split(' ')[0]!);
      const h = (n: string) => new RegExp(`^${n}:\\s*(.*)$`, 'im').exec(text)?.[1]?.trim() ?? '';
      const method = text.split(' ')[0];
      if (method !== 'INVITE' && method !== 'BYE') return;
      const to = method === 'INVITE' ? `${h('To')};tag=far` : h('To');
      const reply = ['SIP/2.0 200 OK', `Via: ${h('Via')}`, `From: ${h('From')}`, `To: ${to}`, `Call-ID: ${h('Call-ID')}`, `CSeq: ${h('CSeq')}`,
        ...(method === 'INVITE' ? ['Contact: <sip:far@169.254.169.254:5060>'] : []), 'Content-Length: 0', '', ''].join('\r\n');
      far.send(reply, rinfo.port, rinfo.address);
    });
    await new Promise<void>((r) => far.bind(0, '127.0.0.1', () => r()));
    const gw = make({ policy: { allowLoopback: true } });
    try {
      const trunk = { uri: `sip:127.0.0.1:${far.address().port}`, username: null, password: null, encryption: 'none' as const, codecs: ['PCMU'] };
      await gw.place({ callId: 'call_far_contact', from: '+14155550001', to: '+14155550100', record: false, trunk });
      await eventually('ACK at the trunk', () => (got.includes('ACK') ? true : undefined), 5_000);
      await gw.hangup('call_far_contact', null);
      await eventually('BYE at the trunk', () => (got.includes('BYE') ? true : undefined), 5_000);
      expect(got).toEqual(['INVITE', 'ACK', 'BYE']);
    } finally {
      await gw.close();
      far.close();
    }
  });
});
