/**
 * For the media tests: a minimal SIP user agent over UDP (RFC 3261 written out in plain strings,
 * not the gateway's code) that carries the media port's SDP — it places a call (INVITE, ACK, BYE)
 * or answers one — and baresip (Debian's baresip-core) as the far end that plays a WAV file as its
 * microphone, records what it hears, and sends keys typed on its console.
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { encodeWav } from '../../src/providers/voice/media/wav.ts';
import { freePort, runBaresip } from './sip.ts';
import type { TestApp, TestOrg } from './testApp.ts';
import { eventually, VOICE_ENV } from './voice.ts';

const get = (text: string, name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'im').exec(text)?.[1]?.trim() ?? '';
const bodyOf = (text: string) => text.slice(text.indexOf('\r\n\r\n') + 4);
const hex = () => randomBytes(6).toString('hex');

export type Answered = { status: number; sdp: string; bye(): Promise<void> };
export type InboundHandler = (offer: string) => Promise<{ sdp: string } | { status: number; reason: string }>;

export type SipPeer = {
  port: number;
  /** INVITE `uri` with `sdp`; resolves on the final answer (≥ 200). */
  invite(uri: string, sdp: string): Promise<Answered>;
  /** Answers INVITEs with the handler; resolves `byes` when the far end hangs up. */
  onInvite(handler: InboundHandler): void;
  byes: string[];
  close(): void;
};

export async function startSipPeer(): Promise<SipPeer> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const port = socket.address().port;
  const waiting = new Map<string, (text: string) => void>(); // by branch
  const byes: string[] = [];
  let handler: InboundHandler | undefined;
  const send = (text: string, p: number, host = '127.0.0.1') => socket.send(Buffer.from(text), p, host);
  const respond = (req: string, status: string, rinfo: dgram.RemoteInfo, extra: string[] = [], body = '', tag?: string) => {
    const to = get(req, 'To');
    send([`SIP/2.0 ${status}`, ...req.split('\r\n').filter((l) => /^via:/i.test(l)), `From: ${get(req, 'From')}`, `To: ${tag && !/;tag=/.test(to) ? `${to};tag=${tag}` : to}`,
      `Call-ID: ${get(req, 'Call-ID')}`, `CSeq: ${get(req, 'CSeq')}`, ...extra, `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n'), rinfo.port, rinfo.address);
  };
  socket.on('message', (data, rinfo) => {
    const text = data.toString('utf8');
    const first = text.slice(0, text.indexOf('\r\n'));
    if (first.startsWith('SIP/2.0')) {
      const branch = /branch=([^;\s,]+)/.exec(get(text, 'Via'))?.[1] ?? '';
      waiting.get(branch)?.(text);
      return;
    }
    const method = first.split(' ')[0];
    if (method === 'INVITE') {
      respond(text, '100 Trying', rinfo);
      const tag = hex();
      void (handler ? handler(bodyOf(text)) : Promise.resolve({ status: 603, reason: 'Decline' })).then((r) => {
        if ('sdp' in r) respond(text, '200 OK', rinfo, [`Contact: <sip:media@127.0.0.1:${port}>`, 'Content-Type: application/sdp'], r.sdp, tag);
        else respond(text, `${r.status} ${r.reason}`, rinfo, [], '', tag);
      });
    } else if (method === 'BYE') {
      byes.push(get(text, 'Call-ID'));
      respond(text, '200 OK', rinfo);
    } else if (method !== 'ACK') {
      respond(text, '200 OK', rinfo);
    }
  });

  const request = (lines: string[], body: string, to: { host: string; port: number }, branch: string, final: boolean): Promise<string> => new Promise((resolve, reject) => {
    const timer = setTimeout(() => { waiting.delete(branch); reject(new Error(`no answer to ${lines[0]}`)); }, 15_000);
    waiting.set(branch, (text) => {
      const status = Number(text.split(' ')[1]);
      if (final && status < 200) return;
      clearTimeout(timer);
      waiting.delete(branch);
      resolve(text);
    });
    send([...lines, `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n'), to.port, to.host);
  });

  return {
    port, byes,
    onInvite: (h) => { handler = h; },
    close: () => socket.close(),
    async invite(uri, sdp) {
      const target = /@([^:;>]+):(\d+)/.exec(uri)!;
      const dest = { host: target[1]!, port: Number(target[2]) };
      const callId = hex();
      const from = `<sip:media-test@127.0.0.1:${port}>;tag=${hex()}`;
      const branch = `z9hG4bK${hex()}`;
      const reply = await request([`INVITE ${uri} SIP/2.0`, `Via: SIP/2.0/UDP 127.0.0.1:${port};branch=${branch};rport`, 'Max-Forwards: 70', `From: ${from}`, `To: <${uri}>`,
        `Call-ID: ${callId}`, 'CSeq: 1 INVITE', `Contact: <sip:media-test@127.0.0.1:${port}>`, 'Content-Type: application/sdp'], sdp, dest, branch, true);
      const status = Number(reply.split(' ')[1]);
      const to = get(reply, 'To');
      const contact = /<([^>]+)>/.exec(get(reply, 'Contact'))?.[1] ?? uri;
      const remote = /@([^:;>]+):(\d+)/.exec(contact);
      const next = remote ? { host: remote[1]!, port: Number(remote[2]) } : dest;
      if (status >= 200 && status < 300) {
        send([`ACK ${contact} SIP/2.0`, `Via: SIP/2.0/UDP 127.0.0.1:${port};branch=z9hG4bK${hex()};rport`, 'Max-Forwards: 70', `From: ${from}`, `To: ${to}`, `Call-ID: ${callId}`, 'CSeq: 1 ACK', 'Content-Length: 0', '', ''].join('\r\n'), next.port, next.host);
      } else {
        send([`ACK ${uri} SIP/2.0`, `Via: SIP/2.0/UDP 127.0.0.1:${port};branch=${branch};rport`, 'Max-Forwards: 70', `From: ${from}`, `To: ${to}`, `Call-ID: ${callId}`, 'CSeq: 1 ACK', 'Content-Length: 0', '', ''].join('\r\n'), dest.port, dest.host);
      }
      return {
        status, sdp: bodyOf(reply),
        bye: async () => {
          const b = `z9hG4bK${hex()}`;
          await request([`BYE ${contact} SIP/2.0`, `Via: SIP/2.0/UDP 127.0.0.1:${port};branch=${b};rport`, 'Max-Forwards: 70', `From: ${from}`, `To: ${to}`, `Call-ID: ${callId}`, 'CSeq: 2 BYE'], '', next, b, true);
        },
      };
    },
  };
}

export type MediaBaresip = { port: number; dir: string; heard(): string; log(): string; type(keys: string): void; close(): Promise<void> };

/**
 * baresip answering calls to `user` at once on 127.0.0.1:<port> (UDP), its microphone the WAV file
 * `source` (16-bit mono 8 kHz; it hangs up when the file ends), what it hears in the file `heard()` names.
 * `srtp`: SDES-SRTP required (mediaenc=srtp-mand); `codecs`: the codec modules it loads (g711).
 * `dial`: a SIP URI it calls once it is up.
 */
export async function startMediaBaresip(opts: { user: string; source: string; srtp?: boolean; codecs?: string[]; dial?: string }): Promise<MediaBaresip> {
  if (!existsSync('/usr/bin/baresip')) throw new Error('baresip is not installed: npm test installs it (scripts/test-peers.sh), or apt-get install baresip-core');
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts);
    } catch (e) {
      if (attempt >= 5 || !String((e as Error).message).includes('Address already in use')) throw e;
    }
  }
}

async function startOnce(opts: { user: string; source: string; srtp?: boolean; codecs?: string[]; dial?: string }): Promise<MediaBaresip> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baresip-media-'));
  const port = await freePort();
  // baresip 1.0 records through its sndfile filter: what it hears, decoded, to dump-<time>-dec.wav in snd_path.
  const heard = () => {
    const file = readdirSync(dir).find((f) => f.endsWith('-dec.wav'));
    if (!file) throw new Error(`baresip recorded nothing in ${dir}`);
    return path.join(dir, file);
  };
  writeFileSync(path.join(dir, 'config'), [
    'poll_method epoll', `sip_listen 127.0.0.1:${port}`, 'audio_player aubridge,sink', `snd_path ${dir}`, `audio_source aufile,${opts.source}`, `audio_alert aufile,${path.join(dir, 'alert.wav')}`,
    'rtp_ports 42000-42999', 'module_path /usr/lib/baresip/modules', ...(opts.codecs ?? ['g711']).map((c) => `module ${c}.so`), 'module aufile.so', 'module aubridge.so', 'module sndfile.so',
    ...(opts.srtp ? ['module srtp.so'] : []), 'module stdio.so', 'module_app account.so', 'module_app menu.so', '',
  ].join('\n'));
  writeFileSync(path.join(dir, 'accounts'), `<sip:${opts.user}@127.0.0.1>;regint=0;answermode=auto${opts.srtp ? ';mediaenc=srtp-mand' : ''}\n`);
  const proc = await runBaresip(dir);
  if (opts.dial) proc.write(`/dial ${opts.dial}\n`);
  return { port, dir, heard, log: proc.log, type: (keys) => proc.write(keys), close: proc.close };
}

/**
 * The settings of a test app that carries live media: SIP on loopback, the media engine's files in
 * `mediaDir`, RTP ports from a range of its own (random, so files running at once do not collide),
 * the far end's silence ending a call after 20 s; `extra` adds or overrides.
 */
export function liveMediaEnv(mediaDir: string, extra: Record<string, string> = {}): Record<string, string> {
  const portMin = 50_000 + 2 * Math.floor(Math.random() * 2000);
  return {
    ...VOICE_ENV, SIP_BIND_HOST: '127.0.0.1', VOICE_MEDIA_DIR: mediaDir, VOICE_MEDIA_PORT_MIN: String(portMin), VOICE_MEDIA_PORT_MAX: String(portMin + 200),
    VOICE_MEDIA_INACTIVITY_SECONDS: '20', ...extra,
  };
}

/**
 * baresip (user `user`, its microphone `source` written as a WAV in `dir`) calls `number` on the
 * app's SIP listener; answers it and the inbound call once the service stored it (the
 * organization's first inbound call).
 */
export async function baresipCallsIn(o: {
  t: TestApp; org: TestOrg; sipPort: number; dir: string; user: string; number: string; source: Int16Array;
}): Promise<{ baresip: MediaBaresip; call: any }> {
  const file = path.join(o.dir, `caller-${Date.now()}.wav`);
  writeFileSync(file, encodeWav(o.source));
  const baresip = await startMediaBaresip({ user: o.user, source: file, dial: `sip:${o.number}@127.0.0.1:${o.sipPort}` });
  try {
    const call = await eventually('the inbound call', async () => {
      const r = await o.t.rest('GET', '/v1/voice/calls', { key: o.org.liveKey });
      return (r.body.data as any[]).find((c) => c.direction === 'inbound');
    }, 20_000).catch((e: Error) => { throw new Error(`${e.message}; baresip said: ${baresip.log()}`); });
    return { baresip, call };
  } catch (e) {
    await baresip.close();
    throw e;
  }
}
