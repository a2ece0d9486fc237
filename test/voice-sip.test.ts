/**
 * Live calls through the SIP gateway (providers/voice/sip) against real SIP peers: baresip from
 * Debian's packages (answers every call; UDP and TCP) and a scripted UA for busy, failures,
 * no answer, digest challenges and cancellation. Their audio (RTP, prompts, keys, recordings) is
 * test/voice-live-media.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, eventually, expectError, VOICE_ENV } from './helpers/voice.ts';
import { startBaresip, startScriptedUa, type Baresip } from './helpers/sip.ts';

let t: TestApp;
let baresip: Baresip;
let ua: Awaited<ReturnType<typeof startScriptedUa>>;
const credentials = { username: 'acme', password: 's3cret-trunk' };
/** One organization per trunk (live calls go out on the organization's trunk). */
const orgs: Record<'udp' | 'tcp' | 'scripted' | 'tls' | 'none', { org: TestOrg; from: string }> = {} as never;
/** A TLS trunk endpoint with a self-signed certificate for 127.0.0.1: it answers every INVITE 486 and records what it read. */
let tlsTrunk: { port: number; received: string; caFile: string; close(): void };

async function startTlsTrunk(): Promise<typeof tlsTrunk> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sip-tls-'));
  const [keyFile, certFile] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', keyFile, '-out', certFile], { stdio: 'ignore' });
  const state = { received: '', answered: false };
  const server = tls.createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (socket) => {
    socket.on('data', (chunk) => {
      state.received += chunk.toString();
      const invite = /INVITE [\s\S]*?\r\n\r\n/.exec(state.received)?.[0];
      if (!invite || state.answered) return;
      state.answered = true;
      const h = (n: string) => new RegExp(`^${n}:\\s*(.*)$`, 'im').exec(invite)![1];
      socket.write([`SIP/2.0 486 Busy Here`, `Via: ${h('Via')}`, `From: ${h('From')}`, `To: ${h('To')};tag=tls1`, `Call-ID: ${h('Call-ID')}`, `CSeq: ${h('CSeq')}`, 'Content-Length: 0', '', ''].join('\r\n'));
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { port: (server.address() as { port: number }).port, get received() { return state.received; }, caFile: certFile, close: () => server.close() };
}

async function orgWithTrunk(name: string, trunk: Record<string, unknown> | null): Promise<{ org: TestOrg; from: string }> {
  const org = await t.createOrg('enterprise', name);
  // This build has no live numbers carrier: a sandbox number is moved into live mode, as a number
  // the organization brought (ported) to its trunk would be.
  const from = await buyVoiceNumber(t, org.testKey);
  await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [org.orgId, from]);
  if (trunk) {
    const r = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name, encryption: 'none', ...trunk } });
    expect(r.status, r.text).toBe(201);
  }
  return { org, from };
}

beforeAll(async () => {
  [baresip, ua, tlsTrunk] = await Promise.all([startBaresip({ seconds: 60, users: ['+14155550100', '+14155550101'] }), startScriptedUa(credentials), startTlsTrunk()]);
  t = await startTestApp({ workers: true, clock: systemClock, env: { ...VOICE_ENV, SIP_BIND_HOST: '127.0.0.1', SIP_TLS_CA_FILE: tlsTrunk.caFile } });
  orgs.udp = await orgWithTrunk('UDP trunk', { termination_uri: `sip:127.0.0.1:${baresip.port}` });
  orgs.tcp = await orgWithTrunk('TCP trunk', { termination_uri: `sip:127.0.0.1:${baresip.port};transport=tcp` });
  orgs.scripted = await orgWithTrunk('Scripted trunk', { termination_uri: `sip:127.0.0.1:${ua.port}`, auth_username: credentials.username, auth_password: credentials.password });
  // No encryption given: the default tls_srtp signals over TLS.
  orgs.tls = await orgWithTrunk('TLS trunk', { termination_uri: `sip:127.0.0.1:${tlsTrunk.port}`, encryption: undefined });
  orgs.none = await orgWithTrunk('No trunk', null);
}, 60_000);
afterAll(async () => {
  await t?.close();
  await baresip?.close();
  ua?.close();
  tlsTrunk?.close();
});

const place = (which: keyof typeof orgs, body: Record<string, unknown>) =>
  t.rest('POST', '/v1/voice/calls', { key: orgs[which].org.liveKey, body: { from: orgs[which].from, ...body } });
async function placeOk(which: keyof typeof orgs, body: Record<string, unknown>): Promise<any> {
  const r = await place(which, body);
  expect(r.status, r.text).toBe(201);
  return r.body.data;
}
const key = (which: keyof typeof orgs) => orgs[which].org.liveKey;
const sipLines = (name: string) => baresip.log().split('\n').filter((l) => l.startsWith(name));

describe('live calls on a SIP trunk', () => {
  it('refuses a live call without a trunk: 503 CHANNEL_UNAVAILABLE, nothing stored', async () => {
    const before = await t.db.query('select count(*)::int as n from calls');
    const r = await place('none', { to: '+14155550100' });
    expectError(r, 503, 'CHANNEL_UNAVAILABLE');
    expect(r.body.error.details.reason).toBe('no_sip_trunk');
    expect((await t.db.query('select count(*)::int as n from calls')).rows[0].n).toBe(before.rows[0].n);
  });

  it('baresip over UDP: rings, answers (ACKed), and our hangup sends a BYE it confirms', async () => {
    const call = await placeOk('udp', { to: '+14155550100' });
    const live = await callReaches(t, key('udp'), call.id, 'in_progress', 15_000);
    expect(live.answered_at).toBeTruthy();
    const steps = (await t.db.query('select steps, gateway, gateway_reference from calls where id = $1', [call.id])).rows[0];
    expect(steps.gateway).toBe('sip');
    expect(steps.gateway_reference).toMatch(/^sip1\./);
    expect(steps.steps.map((s: any) => s.detail?.status).filter(Boolean)).toEqual(['initiating', 'ringing', 'in_progress']);
    const hung = await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: key('udp') });
    expect(hung.status, hung.text).toBe(200);
    expect(hung.body.data.status).toBe('completed');
    // baresip's SIP trace: the INVITE, our ACK of its 200, our BYE and its 200 for it.
    await eventually('BYE at baresip', () => (baresip.log().includes(`BYE sip:`) && /SIP\/2\.0 200 OK[\s\S]*CSeq: 2 BYE/.test(baresip.log()) ? true : undefined), 10_000);
    expect(sipLines('INVITE sip:+14155550100@127.0.0.1').length).toBeGreaterThan(0);
    expect(sipLines('ACK sip:').length).toBeGreaterThan(0);
  }, 30_000);

  it('baresip over TCP: answered, and max_duration ends the call here and at the far end (BYE over TCP)', async () => {
    const call = await placeOk('tcp', { to: '+14155550101', max_duration: 2 });
    await callReaches(t, key('tcp'), call.id, 'in_progress', 15_000);
    const done = await callReaches(t, key('tcp'), call.id, 'completed', 15_000);
    expect(done.duration_seconds).toBeGreaterThanOrEqual(1);
    const sipId = (await t.db.query(`select gateway_reference from calls where id = $1`, [call.id])).rows[0].gateway_reference;
    const dialog = JSON.parse(Buffer.from(sipId.slice(5), 'base64url').toString());
    expect(dialog.dest.transport).toBe('tcp');
    await eventually('BYE over TCP at baresip', () => (new RegExp(`TCP [^\\n]*\\n(?:[^\\n]*\\n){0,2}BYE sip:[\\s\\S]*?Call-ID: ${dialog.cid.replace('.', '\\.')}`).test(baresip.log()) ? true : undefined), 10_000);
  }, 30_000);

  it('answers the trunk\'s digest challenge with its credentials, and the far end\'s BYE completes the call', async () => {
    const call = await placeOk('scripted', { to: '+14155550401' });
    await callReaches(t, key('scripted'), call.id, 'in_progress', 15_000);
    const invites = ua.requests.filter((r) => r.method === 'INVITE' && r.text.includes(`Call-ID: ${call.id}.`));
    expect(invites).toHaveLength(2);
    expect(invites[0]!.text).not.toMatch(/^Authorization:/im);
    expect(invites[1]!.text).toMatch(/^Authorization: Digest username="acme", realm="trunk.test"/im);
    expect(invites[1]!.text).toMatch(/^CSeq: 2 INVITE/im);
    // The 401 was ACKed in its transaction; the 200 in the dialog.
    expect(ua.requests.filter((r) => r.method === 'ACK' && r.text.includes(`Call-ID: ${call.id}.`)).map((r) => /^CSeq: (\d+)/im.exec(r.text)![1])).toEqual(['1', '2']);
    ua.bye(call.id);
    const done = await callReaches(t, key('scripted'), call.id, 'completed', 10_000);
    expect(done.ended_at).toBeTruthy();
    const ended = (await t.db.query(`select end_reason from calls where id = $1`, [call.id])).rows[0];
    expect(ended.end_reason).toBe('remote');
  }, 30_000);

  it('maps failures: 486 → busy, 480 → no_answer, 503 → failed with SIP_ERROR and sip_code 503', async () => {
    const [busy, away, down] = await Promise.all(['+14155550486', '+14155550480', '+14155550503'].map((to) => placeOk('scripted', { to })));
    await callReaches(t, key('scripted'), busy.id, 'busy', 15_000);
    await callReaches(t, key('scripted'), away.id, 'no_answer', 15_000);
    const failed = await callReaches(t, key('scripted'), down.id, 'failed', 15_000);
    const row = (await t.db.query(`select error_code, sip_code from calls where id = $1`, [down.id])).rows[0];
    expect(row).toEqual({ error_code: 'SIP_ERROR', sip_code: 503 });
    expect(JSON.stringify(failed)).toContain('503');
  }, 30_000);

  it('a hangup while ringing sends CANCEL; the call ends cancelled and the 487 is ACKed', async () => {
    const call = await placeOk('scripted', { to: '+14155550180' });
    await callReaches(t, key('scripted'), call.id, 'ringing', 15_000);
    const hung = await t.rest('POST', `/v1/voice/calls/${call.id}/hangup`, { key: key('scripted') });
    expect(hung.status, hung.text).toBe(200);
    expect(hung.body.data.status).toBe('cancelled');
    const mine = () => ua.requests.filter((r) => r.text.includes(`Call-ID: ${call.id}.`)).map((r) => r.method);
    await eventually('CANCEL and ACK of the 487', () => (mine().includes('CANCEL') && mine().includes('ACK') ? true : undefined), 10_000);
    expect(mine()).toEqual(['INVITE', 'CANCEL', 'ACK']);
  }, 30_000);

  it('a trunk with the default encryption (tls_srtp) is reached over TLS, its certificate checked', async () => {
    const call = await placeOk('tls', { to: '+14155550100' });
    await callReaches(t, key('tls'), call.id, 'busy', 15_000);
    expect(tlsTrunk.received).toMatch(new RegExp(`^INVITE sips:\\+14155550100@127\\.0\\.0\\.1:${tlsTrunk.port} SIP/2\\.0`, 'm'));
    expect(tlsTrunk.received).toMatch(/^Via: SIP\/2\.0\/TLS /m);
    expect(tlsTrunk.received).toMatch(/^ACK sips:/m);
  }, 30_000);

  it('a trunk that does not exist is refused at placement: the call fails with VOICE_GATEWAY_ERROR (TCP connection refused)', async () => {
    const org = await orgWithTrunk('Dead trunk', { termination_uri: 'sip:127.0.0.1:9;transport=tcp' });
    const r = await t.rest('POST', '/v1/voice/calls', { key: org.org.liveKey, body: { from: org.from, to: '+14155550100' } });
    expect(r.status, r.text).toBe(201);
    await callReaches(t, org.org.liveKey, r.body.data.id, 'failed', 15_000);
    expect((await t.db.query(`select error_code from calls where id = $1`, [r.body.data.id])).rows[0].error_code).toBe('VOICE_GATEWAY_ERROR');
  }, 30_000);
});

describe('a hangup from another instance', () => {
  it('ends the dialog from the call\'s gateway reference alone (BYE with the dialog\'s tags, to the remote target)', async () => {
    const { SipVoiceGateway } = await import('../src/providers/voice/sip/gateway.ts');
    const events: { type: string; reference?: string }[] = [];
    // The trunk is on 127.0.0.1: the loopback switch (WEBHOOKS_ALLOW_LOOPBACK) lets the gateway reach it.
    const options = { bindHost: '127.0.0.1', port: 0, policy: { allowLoopback: true }, log: () => {}, sink: { schedule: async (e: { type: string; reference?: string }) => { events.push(e); } } };
    const placing = new SipVoiceGateway(options);
    const other = new SipVoiceGateway({ ...options, sink: { schedule: async () => {} } });
    try {
      const trunk = { uri: `sip:127.0.0.1:${ua.port}`, username: null, password: null, encryption: 'none' as const, codecs: ['PCMU'] };
      await placing.place({ callId: 'call_other_instance', from: '+14155550001', to: '+14155550102', record: false, trunk });
      const answered = await eventually('answered', () => events.find((e) => e.type === 'answered'), 5_000);
      await other.hangup('call_other_instance', answered.reference!);
      const bye = await eventually('BYE at the UA', () => ua.requests.find((r) => r.method === 'BYE' && r.text.includes('Call-ID: call_other_instance.')), 5_000);
      const invite = ua.requests.find((r) => r.method === 'INVITE' && r.text.includes('Call-ID: call_other_instance.'))!;
      const fromTag = /^From:.*;tag=(\S+)/im.exec(invite.text)![1];
      expect(bye.text).toMatch(new RegExp(`^From:.*;tag=${fromTag}`, 'im'));
      expect(bye.text).toMatch(/^To:.*;tag=ua/im);
      expect(bye.text).toMatch(/^CSeq: 2 BYE/im);
      expect(bye.uri).toBe(`sip:+14155550102@127.0.0.1:${ua.port}`);
    } finally {
      await placing.close();
      await other.close();
    }
  });
});
