/**
 * Live transfers: baresip (the caller) calls a number whose voice_route is `forward`; the service
 * answers, places a second leg on the organization's trunk to a second baresip (the forward
 * target), and bridges their audio in the media engine. Each plays its own tone (rendered now);
 * each one's recording holds the other's tone and not its own. The caller's hangup ends both legs;
 * a target that answers busy ends the first with end_reason transfer_failed.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../src/platform/clock.ts';
import { decodeWav, encodeWav } from '../src/providers/voice/media/wav.ts';
import { startTestApp, type TestApp, type TestOrg } from './helpers/testApp.ts';
import { buyVoiceNumber, callReaches, callSteps, eventually } from './helpers/voice.ts';
import { liveMediaEnv, startMediaBaresip, startSipPeer, type MediaBaresip, type SipPeer } from './helpers/media-sip.ts';
import { tone, tonePowers } from './helpers/audio.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'voice-live-transfer-'));
const CALLER_HZ = 700;
const TARGET_HZ = 1100;
const TARGET = '+14155550177';

let t: TestApp;
let sip: { host: string; udpPort: number };
const baresips: MediaBaresip[] = [];
const peers: SipPeer[] = [];

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
  for (const p of peers) p.close();
});

function wav(name: string, samples: Int16Array): string {
  const file = path.join(dir, `${name}-${Date.now()}.wav`);
  writeFileSync(file, encodeWav(samples));
  return file;
}

/** An organization whose live trunk (from 127.0.0.1) ends at 127.0.0.1:`targetPort`, and a live number forwarded to TARGET. */
async function forwardingNumber(name: string, targetPort: number): Promise<{ org: TestOrg; number: string }> {
  const org = await t.createOrg('enterprise', name);
  const number = await buyVoiceNumber(t, org.testKey);
  await t.db.query(`update phone_numbers set mode = 'live' where organization_id = $1 and number = $2`, [org.orgId, number]);
  const numberId = (await t.db.query('select id from phone_numbers where number = $1', [number])).rows[0].id as string;
  const trunk = await t.rest('POST', '/v1/voice/sip-trunks', { key: org.liveKey, body: { name, encryption: 'none', codecs: ['PCMU', 'PCMA'], termination_uri: `sip:127.0.0.1:${targetPort}`, origination_uris: ['sip:127.0.0.1'] } });
  expect(trunk.status, trunk.text).toBe(201);
  const routed = await t.rest('PATCH', `/v1/numbers/${numberId}`, { key: org.liveKey, body: { voice_route: { type: 'forward', to: TARGET } } });
  expect(routed.status, routed.text).toBe(200);
  return { org, number };
}

/** The organization's calls once both legs are stored: the inbound one and its second leg. */
async function legs(org: TestOrg, log: () => string): Promise<{ first: any; second: any }> {
  return eventually('both legs', async () => {
    const r = await t.rest('GET', '/v1/voice/calls', { key: org.liveKey });
    const first = (r.body.data as any[]).find((c) => c.direction === 'inbound');
    const second = (r.body.data as any[]).find((c) => c.direction === 'outbound');
    return first && second ? { first, second } : undefined;
  }, 30_000).catch((e: Error) => { throw new Error(`${e.message}; baresip said: ${log()}`); });
}

describe('live transfer (forward)', () => {
  it('bridges the caller and the forward target both ways; the caller hanging up ends both', async () => {
    // The target answers at once and plays its tone for longer than the caller stays.
    const target = await startMediaBaresip({ user: TARGET, source: wav('target', tone(TARGET_HZ, 40)) });
    baresips.push(target);
    const o = await forwardingNumber('transfer trunk', target.port);
    // The caller plays its tone for 14 s, then hangs up (baresip ends the call when its source ends).
    const caller = await startMediaBaresip({ user: '+14155550188', source: wav('caller', tone(CALLER_HZ, 14)), dial: `sip:${o.number}@127.0.0.1:${sip.udpPort}` });
    baresips.push(caller);
    const log = () => `caller: ${caller.log()} target: ${target.log()}`;
    const { first, second } = await legs(o.org, log);
    expect(first).toMatchObject({ to: o.number, from: '+14155550188' });
    expect(second).toMatchObject({ to: TARGET, from: o.number });
    const secondFull = (await t.rest('GET', `/v1/voice/calls/${second.id}`, { key: o.org.liveKey })).body.data;
    expect(secondFull.metadata).toEqual({ transferred_call_id: first.id });

    await callReaches(t, o.org.liveKey, second.id, 'in_progress', 30_000).catch((e: Error) => { throw new Error(`${e.message}; ${log()}`); });
    const firstDone = await callReaches(t, o.org.liveKey, first.id, 'completed', 60_000).catch((e: Error) => { throw new Error(`${e.message}; ${log()}`); });
    expect(firstDone.end_reason).toBe('remote');
    const secondDone = await callReaches(t, o.org.liveKey, second.id, 'completed', 30_000);
    expect(secondDone.end_reason).toBe('transfer_ended');
    expect((await callSteps(t, first.id)).find((s) => s.type === 'transfer')!.detail).toEqual({ number: TARGET });
    // Both legs billed as calls: their voice.minutes usage and call.* events.
    const usage = await t.db.query(`select resource_id from usage_entries where kind = 'voice.minutes' and resource_id = any($1::text[])`, [[first.id, second.id]]);
    expect(usage.rows.map((r: any) => r.resource_id).sort()).toEqual([first.id, second.id].sort());
    const types = async (id: string) => (await t.db.query(`select type from events where resource_id = $1 order by sequence`, [id])).rows.map((r: any) => r.type);
    expect(await types(first.id)).toEqual(['call.initiated', 'call.answered', 'call.completed']);
    expect(await types(second.id)).toEqual(['call.initiated', 'call.ringing', 'call.answered', 'call.completed']);

    // What each heard: the other's tone, not its own.
    await target.close();
    await caller.close();
    const heardByCaller = tonePowers(decodeWav(readFileSync(caller.heard())), [CALLER_HZ, TARGET_HZ]);
    const heardByTarget = tonePowers(decodeWav(readFileSync(target.heard())), [CALLER_HZ, TARGET_HZ]);
    expect(heardByCaller[TARGET_HZ], JSON.stringify(heardByCaller)).toBeGreaterThan(0.2);
    expect(heardByCaller[CALLER_HZ], JSON.stringify(heardByCaller)).toBeLessThan(0.02);
    expect(heardByTarget[CALLER_HZ], JSON.stringify(heardByTarget)).toBeGreaterThan(0.2);
    expect(heardByTarget[TARGET_HZ], JSON.stringify(heardByTarget)).toBeLessThan(0.02);
  }, 180_000);

  it('a forward target that answers busy ends the first leg: transfer_failed, TRANSFER_FAILED', async () => {
    const busy = await startSipPeer();
    peers.push(busy);
    busy.onInvite(async () => ({ status: 486, reason: 'Busy Here' }));
    const o = await forwardingNumber('transfer busy trunk', busy.port);
    const caller = await startMediaBaresip({ user: '+14155550189', source: wav('caller-busy', tone(CALLER_HZ, 30)), dial: `sip:${o.number}@127.0.0.1:${sip.udpPort}` });
    baresips.push(caller);
    const { first, second } = await legs(o.org, () => caller.log());
    const secondDone = await callReaches(t, o.org.liveKey, second.id, 'busy', 30_000);
    expect(secondDone.end_reason).toBe('remote');
    const firstDone = await callReaches(t, o.org.liveKey, first.id, 'completed', 30_000);
    expect(firstDone).toMatchObject({ end_reason: 'transfer_failed', error_code: 'TRANSFER_FAILED' });
    expect((await callSteps(t, first.id)).find((s) => s.type === 'transfer_failed')!.detail).toEqual({ outcome: 'busy' });
  }, 120_000);
});
