/**
 * Live conferences: three baresips call a conference's dial-in number, are asked for its PIN and
 * enter it (RFC 4733 keys, then `#`); each plays its own tone (rendered now). The media thread
 * mixes the room: each party's recording holds the other two tones and not its own. A wrong PIN
 * is asked again; ending the conference hangs every party up.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { decodeWav, encodeWav } from '../src/providers/voice/media/wav.ts';
import { startTestApp, type TestApp } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, callSteps, eventually } from './helpers/voice.ts';
import { liveMediaEnv, startMediaBaresip, type MediaBaresip } from './helpers/media-sip.ts';
import { tone, tonePowers } from './helpers/audio.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'voice-live-conference-'));
const TONES = [600, 900, 1300];
const PIN = '4321';

let t: TestApp;
let sip: { host: string; udpPort: number };
const baresips: MediaBaresip[] = [];

beforeAll(async () => {
  t = await startTestApp({
    workers: true, clock: systemClock,
    env: liveMediaEnv(path.join(dir, 'media')),
  });
  sip = await t.app.services.sipGateway.listen();
}, 60_000);
afterAll(async () => {
  await t?.close();
  for (const b of baresips) await b.close();
});

describe('live conference', () => {
  it('three parties enter the PIN by keys; each hears the other two and not itself; ending the conference hangs them up', async () => {
    const org = await t.createOrg('enterprise', 'conference org');
    const number = await buyVoiceNumber(t, org.testKey);
    await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [org.orgId, number]);
    const trunk = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name: 'conference trunk', encryption: 'none', termination_uri: 'sip:127.0.0.1:5999', origination_uris: ['sip:127.0.0.1'] } });
    expect(trunk.status, trunk.text).toBe(201);
    const created = await t.rest('POST', '/v1/voice/conferences', { key: org.liveKey, body: { name: 'standup', pin: PIN, dial_in_number: number } });
    expect(created.status, created.text).toBe(201);
    const conf = created.body.data;

    const parties: { baresip: MediaBaresip; from: string; hz: number; callId?: string }[] = [];
    for (const [i, hz] of TONES.entries()) {
      const file = path.join(dir, `party-${hz}.wav`);
      writeFileSync(file, encodeWav(tone(hz, 60)));
      const from = `+1415555020${i}`;
      const baresip = await startMediaBaresip({ user: from, source: file, dial: `sip:${number}@127.0.0.1:${sip.udpPort}` });
      baresips.push(baresip);
      parties.push({ baresip, from, hz });
    }
    const log = () => parties.map((p) => `${p.from}: ${p.baresip.log()}`).join('\n');
    await eventually('three inbound calls', async () => {
      const r = await t.rest('GET', '/v1/voice/calls', { key: org.liveKey });
      for (const p of parties) p.callId = (r.body.data as any[]).find((c) => c.from === p.from)?.id;
      return parties.every((p) => p.callId) ? true : undefined;
    }, 30_000).catch((e: Error) => { throw new Error(`${e.message}; ${log()}`); });
    for (const p of parties) await callReaches(t, org.liveKey, p.callId!, 'in_progress', 30_000);

    // The first party gets the PIN wrong once: asked again, still not in.
    parties[0]!.baresip.type('9999#');
    await eventually('the wrong PIN refused', async () => ((await callSteps(t, parties[0]!.callId!)).some((s) => s.type === 'conference_pin_invalid') ? true : undefined), 30_000);
    for (const p of parties) p.baresip.type(`${PIN}#`);
    await eventually('three participants joined', async () => {
      const r = await t.rest('GET', `/v1/voice/conferences/${conf.id}/participants`, { key: org.liveKey });
      return (r.body.data as any[]).filter((x) => x.status === 'joined').length === 3 ? r.body.data : undefined;
    }, 30_000).catch((e: Error) => { throw new Error(`${e.message}; ${log()}`); });
    const room = (await t.rest('GET', `/v1/voice/conferences/${conf.id}`, { key: org.liveKey })).body.data;
    expect(room).toMatchObject({ status: 'in_progress', participants_count: 3 });

    // Mixed for a while (no assertion rests on this wait: the recordings are read after the end).
    await new Promise((r) => setTimeout(r, 12_000));
    const ended = await t.rest('POST', `/v1/voice/conferences/${conf.id}/end`, { key: org.liveKey });
    expect(ended.status, ended.text).toBeLessThan(300);
    for (const p of parties) await callReaches(t, org.liveKey, p.callId!, 'completed', 30_000);

    for (const p of parties) {
      await p.baresip.close();
      const heard = tonePowers(decodeWav(readFileSync(p.baresip.heard())), TONES);
      const others = TONES.filter((hz) => hz !== p.hz);
      for (const hz of others) expect(heard[hz], `${p.hz} heard ${JSON.stringify(heard)}`).toBeGreaterThan(0.08);
      expect(heard[p.hz], `${p.hz} heard ${JSON.stringify(heard)}`).toBeLessThan(0.02);
    }
  }, 240_000);
});
