/**
 * Inbound calls on a live trunk: baresip calls one of the organization's numbers through the
 * service's SIP listener, from an address the trunk's origination_uris name. The number's
 * voice_route (an IVR) answers: the call is `direction: inbound`, baresip hears the greeting and
 * the menu (correlated with the rendered speech), and its RFC 4733 key 2 takes option 2. Raw UDP
 * INVITEs check the refusals: a source no trunk names 403, an unknown number 404, a number without a
 * route 480.
 */
import dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { EspeakTts } from '../src/providers/voice/media/tts.ts';
import { decodeWav, encodeWav } from '../src/providers/voice/media/wav.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, eventually, pressAfterPrompt } from './helpers/voice.ts';
import { liveMediaEnv, startMediaBaresip, type MediaBaresip } from './helpers/media-sip.ts';
import { bestCorrelation, rms, tone } from './helpers/audio.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'voice-live-inbound-'));
const mediaDir = path.join(dir, 'media');
const farSource = path.join(dir, 'far.wav');
const GREETING = 'Thank you for calling the inbound test line.';
const MENU = 'Press one for sales. Press two for support.';

let t: TestApp;
let sip: { host: string; udpPort: number };
const baresips: MediaBaresip[] = [];

beforeAll(async () => {
  writeFileSync(farSource, encodeWav(tone(700, 40, 3000)));
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: liveMediaEnv(mediaDir, { VOICE_MEDIA_INACTIVITY_SECONDS: '10' }),
  });
  sip = await t.app.services.sipGateway.listen();
}, 60_000);
afterAll(async () => {
  await t?.close();
  for (const b of baresips) await b.close();
});

/** An organization with a live trunk whose origination_uris name 127.0.0.1, and a live voice number. */
async function orgWithNumber(name: string, origination = 'sip:127.0.0.1'): Promise<{ org: TestOrg; number: string; numberId: string }> {
  const org = await t.createOrg('enterprise', name);
  const number = await buyVoiceNumber(t, org.testKey);
  await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [org.orgId, number]);
  const numberId = (await t.db.query('select id from phone_numbers where number = $1', [number])).rows[0].id as string;
  const r = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name, encryption: 'none', termination_uri: 'sip:127.0.0.1:5999', origination_uris: [origination] } });
  expect(r.status, r.text).toBe(201);
  return { org, number, numberId };
}


/** A bare UDP INVITE from 127.0.0.1 to the service's listener: the final status it gets. */
async function rawInvite(to: string): Promise<number> {
  const host = '127.0.0.1';
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, host, () => r()));
  const port = socket.address().port;
  try {
    const sdp = ['v=0', `o=- 1 1 IN IP4 ${host}`, 's=-', `c=IN IP4 ${host}`, 't=0 0', 'm=audio 40000 RTP/AVP 0 101', 'a=rtpmap:0 PCMU/8000', 'a=rtpmap:101 telephone-event/8000', 'a=sendrecv', ''].join('\r\n');
    const uri = `sip:${to}@127.0.0.1:${sip.udpPort}`;
    const text = [`INVITE ${uri} SIP/2.0`, `Via: SIP/2.0/UDP ${host}:${port};branch=z9hG4bK${randomBytes(6).toString('hex')};rport`, 'Max-Forwards: 70',
      `From: <sip:+14155550900@${host}>;tag=${randomBytes(4).toString('hex')}`, `To: <${uri}>`, `Call-ID: ${randomBytes(8).toString('hex')}`, 'CSeq: 1 INVITE',
      `Contact: <sip:caller@${host}:${port}>`, 'Content-Type: application/sdp', `Content-Length: ${Buffer.byteLength(sdp)}`, '', sdp].join('\r\n');
    return await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no final answer to the INVITE')), 10_000);
      socket.on('message', (data) => {
        const status = Number(data.toString('utf8').split(' ')[1]);
        if (status >= 200) { clearTimeout(timer); resolve(status); }
      });
      socket.send(Buffer.from(text), sip.udpPort, '127.0.0.1');
    });
  } finally {
    socket.close();
  }
}

describe('inbound calls on a live trunk', () => {
  it('refuses what it cannot take: an unknown source 403, an unknown number 404, a number without a route 480; no call is stored', async () => {
    // First, while no trunk names 127.0.0.1: this organization's trunk originates elsewhere.
    const o = await orgWithNumber('refusals trunk', 'sip:198.51.100.7');
    const before = (await t.db.query(`select count(*)::int as n from calls where direction = 'inbound'`)).rows[0].n;
    expect(await rawInvite(o.number)).toBe(403);
    const trunk = (await t.db.query('select id from sip_trunks where organization_id = $1', [o.org.orgId])).rows[0].id;
    const put = await t.rest('PUT', `/v1/voice/sip-trunks/${trunk}`, { key: o.org.liveKey, body: { origination_uris: ['sip:127.0.0.1'] } });
    expect(put.status, put.text).toBe(200);
    expect(await rawInvite('+14155550000')).toBe(404);
    expect(await rawInvite(o.number)).toBe(480);
    expect((await t.db.query(`select count(*)::int as n from calls where direction = 'inbound'`)).rows[0].n).toBe(before);
  }, 60_000);

  it('baresip calls a number routed to an IVR: answered as an inbound call, it hears the greeting and menu, and its RFC 4733 key 2 takes option 2', async () => {
    const o = await orgWithNumber('inbound trunk');
    const ivr = await t.rest('POST', '/v1/voice/ivr', {
      key: o.org.liveKey,
      body: { name: 'Inbound menu', greeting: GREETING, timeout_seconds: 30, menu: { prompt: MENU, options: [{ key: '1', action: 'hangup' }, { key: '2', action: 'transfer_number', target: '+14155550199' }] } },
    });
    expect(ivr.status, ivr.text).toBe(201);
    const routed = await t.rest('PATCH', `/v1/numbers/${o.numberId}`, { key: o.org.liveKey, body: { voice_route: { type: 'ivr', ivr_id: ivr.body.data.id } } });
    expect(routed.status, routed.text).toBe(200);

    const baresip = await startMediaBaresip({ user: '+14155550177', source: farSource, dial: `sip:${o.number}@127.0.0.1:${sip.udpPort}` });
    baresips.push(baresip);
    const call = await eventually('the inbound call', async () => {
      const r = await t.rest('GET', '/v1/voice/calls', { key: o.org.liveKey });
      return (r.body.data as any[]).find((c) => c.direction === 'inbound');
    }, 20_000).catch((e: Error) => { throw new Error(`${e.message}; baresip said: ${baresip.log()}`); });
    expect(call).toMatchObject({ direction: 'inbound', to: o.number, from: '+14155550177' });
    expect((await t.rest('GET', `/v1/voice/calls/${call.id}`, { key: o.org.liveKey })).body.data).toMatchObject({ direction: 'inbound', ivr_id: ivr.body.data.id });
    await callReaches(t, o.org.liveKey, call.id, 'in_progress', 20_000);
    const steps = await pressAfterPrompt(t, call.id, (key) => baresip.type(key), '2', 'ivr_transfer_number');
    expect(steps.find((s) => s.type === 'ivr_transfer_number')!.detail).toEqual({ number: '+14155550199' });
    await new Promise((r) => setTimeout(r, 1000));
    // The caller hangs up: the call completes, with its events and minutes as an outbound call's.
    await baresip.close();
    const done = await callReaches(t, o.org.liveKey, call.id, 'completed', 20_000);
    expect(done.direction).toBe('inbound');
    const events = (await t.db.query(`select type from events where resource_id = $1 order by created_at, id`, [call.id])).rows.map((r) => r.type);
    expect(events).toEqual(expect.arrayContaining(['call.initiated', 'call.answered', 'call.completed']));
    const usage = await t.db.query(`select quantity from usage_entries where resource_id = $1 and kind = 'voice.minutes'`, [call.id]);
    expect(usage.rows.length).toBe(1);

    // What baresip heard holds the spoken greeting and menu (the rendered speech, through G.711).
    const tts = new EspeakTts({ cacheDir: path.join(mediaDir, 'tts') });
    const heard = decodeWav(readFileSync(baresip.heard()));
    expect(rms(heard)).toBeGreaterThan(300);
    expect(bestCorrelation(heard, decodeWav(readFileSync(tts.cacheFile({ text: GREETING, language: 'en-US' }))))).toBeGreaterThan(0.8);
    expect(bestCorrelation(heard, decodeWav(readFileSync(tts.cacheFile({ text: MENU, language: 'en-US' }))))).toBeGreaterThan(0.8);
  }, 120_000);

});
