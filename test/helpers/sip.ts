/**
 * SIP peers for the live-gateway tests: a real user agent no one here wrote (baresip, from
 * Debian's packages), and a tiny scripted one for the answers baresip never gives (busy, 503,
 * no answer, digest challenges). The scripted UA is written from RFC 3261 with plain strings, not
 * with the gateway's own parser.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** A mono 8 kHz WAV of `seconds` (baresip's audio source: it hangs up when the file ends). */
function wav(file: string, seconds: number): void {
  const samples = 8000 * seconds;
  const data = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) data.writeInt16LE(Math.round(2000 * Math.sin((2 * Math.PI * 440 * i) / 8000)), i * 2);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0); header.writeUInt32LE(36 + data.length, 4); header.write('WAVE', 8); header.write('fmt ', 12);
  header.writeUInt32LE(16, 16); header.writeUInt16LE(1, 20); header.writeUInt16LE(1, 22); header.writeUInt32LE(8000, 24);
  header.writeUInt32LE(16000, 28); header.writeUInt16LE(2, 32); header.writeUInt16LE(16, 34); header.write('data', 36); header.writeUInt32LE(data.length, 40);
  writeFileSync(file, Buffer.concat([header, data]));
}

export type Baresip = { port: number; log(): string; close(): Promise<void> };

/**
 * baresip answering every call to one of `users` at once (answermode=auto) on 127.0.0.1:<port>, UDP and TCP, with a
 * SIP trace in its log. It plays `seconds` of tone and then hangs up itself (a BYE from the far end).
 */
export async function startBaresip(opts: { seconds: number; users: string[] }): Promise<Baresip> {
  if (!existsSync('/usr/bin/baresip')) throw new Error('baresip is not installed: npm test installs it (scripts/test-peers.sh), or apt-get install baresip-core');
  // baresip also binds the port after the free one (SIP/TLS), which another socket may hold: try again elsewhere.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startBaresipOnce(opts);
    } catch (e) {
      if (attempt >= 5 || !String((e as Error).message).includes('Address already in use')) throw e;
    }
  }
}

async function startBaresipOnce(opts: { seconds: number; users: string[] }): Promise<Baresip> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baresip-'));
  const port = await freePort();
  wav(path.join(dir, 'tone.wav'), opts.seconds);
  writeFileSync(path.join(dir, 'config'), [
    'poll_method epoll', `sip_listen 127.0.0.1:${port}`, `audio_player aufile,${path.join(dir, 'heard.wav')}`,
    `audio_source aufile,${path.join(dir, 'tone.wav')}`, `audio_alert aufile,${path.join(dir, 'alert.wav')}`,
    'module_path /usr/lib/baresip/modules', 'module g711.so', 'module aufile.so', 'module_app account.so', 'module_app menu.so', '',
  ].join('\n'));
  // baresip answers a call to a user it has an account for (404 otherwise).
  writeFileSync(path.join(dir, 'accounts'), opts.users.map((u) => `<sip:${u}@127.0.0.1>;regint=0;answermode=auto\n`).join(''));
  const proc = await runBaresip(dir);
  return { port, log: proc.log, close: proc.close };
}

/** A baresip process on the configuration in `dir`, once it says it is ready: its output so far, its stdin, and a stop. */
export type BaresipProcess = { log(): string; write(line: string): void; close(): Promise<void> };

/** Starts baresip on the configuration folder `dir` and waits (10 s at most) until it is ready. */
export async function runBaresip(dir: string): Promise<BaresipProcess> {
  let out = '';
  const child: ChildProcess = spawn('baresip', ['-f', dir, '-s'], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdout!.on('data', (c: Buffer) => { out += c.toString('latin1'); });
  child.stderr!.on('data', (c: Buffer) => { out += c.toString('latin1'); });
  child.stdin!.on('error', () => {});
  const deadline = Date.now() + 10_000;
  while (!out.includes('baresip is ready')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      if (child.exitCode === null) child.kill('SIGKILL');
      throw new Error(`baresip did not start: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    log: () => out,
    write: (line) => { child.stdin!.write(line); },
    close: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => { child.once('exit', r); setTimeout(r, 2000); });
    },
  };
}

export type ScriptedRequest = { method: string; uri: string; text: string };

/**
 * A UDP user agent that answers INVITEs by how the Request-URI's user (a phone number) ends:
 * `0486` busy, `0503` 503, `0480` 480, `0180` rings until cancelled, `0401` digest-challenges
 * (401, realm `trunk.test`) and then answers 200 when the credentials are right (403 when not);
 * anything else 180 + 200.
 * It answers BYE and CANCEL with 200 (and the INVITE with 487 after a CANCEL) and records every request.
 */
export async function startScriptedUa(credentials: { username: string; password: string }): Promise<{ port: number; requests: ScriptedRequest[]; close(): void; bye(callIdPrefix: string): void }> {
  const socket = dgram.createSocket('udp4');
  const requests: ScriptedRequest[] = [];
  const nonce = randomBytes(8).toString('hex');
  const answered = new Map<string, { text: string; to: string; from: string; via: string; contact: string; rinfo: dgram.RemoteInfo }>();
  const pending = new Map<string, { text: string; rinfo: dgram.RemoteInfo }>();
  const get = (text: string, name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'im').exec(text)?.[1]?.trim() ?? '';
  const send = (text: string, rinfo: dgram.RemoteInfo) => socket.send(Buffer.from(text), rinfo.port, rinfo.address);
  const respond = (req: string, status: string, rinfo: dgram.RemoteInfo, extra: string[] = [], body = '') => {
    const to = get(req, 'To');
    const lines = [`SIP/2.0 ${status}`, `Via: ${get(req, 'Via')}`, `From: ${get(req, 'From')}`, `To: ${/;tag=/.test(to) ? to : `${to};tag=ua${nonce}`}`,
      `Call-ID: ${get(req, 'Call-ID')}`, `CSeq: ${get(req, 'CSeq')}`, ...extra, `Content-Length: ${Buffer.byteLength(body)}`, '', body];
    send(lines.join('\r\n'), rinfo);
  };
  const md5 = (s: string) => createHash('md5').update(s).digest('hex');
  socket.on('message', (data, rinfo) => {
    const text = data.toString('utf8');
    const [method = '', uri = ''] = text.split('\r\n')[0]!.split(' ');
    requests.push({ method, uri, text });
    const user = /^sips?:([^@]+)@/.exec(uri)?.[1] ?? '';
    const contact = [`Contact: <sip:${user}@127.0.0.1:${port}>`];
    if (method === 'INVITE') {
      respond(text, '100 Trying', rinfo);
      if (user.endsWith('0486')) return respond(text, '486 Busy Here', rinfo);
      if (user.endsWith('0503')) return respond(text, '503 Service Unavailable', rinfo);
      if (user.endsWith('0480')) return respond(text, '480 Temporarily Unavailable', rinfo);
      if (user.endsWith('0180')) { respond(text, '180 Ringing', rinfo, contact); pending.set(get(text, 'Call-ID'), { text, rinfo }); return; }
      if (user.endsWith('0401')) {
        const auth = get(text, 'Authorization');
        if (!auth) return respond(text, '401 Unauthorized', rinfo, [`WWW-Authenticate: Digest realm="trunk.test", nonce="${nonce}", qop="auth", algorithm=MD5`]);
        const p = Object.fromEntries([...auth.matchAll(/(\w+)=(?:"([^"]*)"|([^,\s]+))/g)].map((m) => [m[1], m[2] ?? m[3]]));
        const ha1 = md5(`${credentials.username}:trunk.test:${credentials.password}`);
        const expected = md5(`${ha1}:${nonce}:${p.nc}:${p.cnonce}:auth:${md5(`INVITE:${p.uri}`)}`);
        if (p.username !== credentials.username || p.response !== expected) return respond(text, '403 Forbidden', rinfo);
      }
      respond(text, '180 Ringing', rinfo, contact);
      const sdp = 'v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 9 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n';
      respond(text, '200 OK', rinfo, [...contact, 'Content-Type: application/sdp'], sdp);
      const to = `${get(text, 'To')};tag=ua${nonce}`;
      answered.set(get(text, 'Call-ID'), { text, to, from: get(text, 'From'), via: get(text, 'Via'), contact: /<([^>]+)>/.exec(get(text, 'Contact'))![1]!, rinfo });
      return;
    }
    if (method === 'CANCEL') {
      respond(text, '200 OK', rinfo);
      const invite = pending.get(get(text, 'Call-ID'));
      if (invite) { pending.delete(get(text, 'Call-ID')); respond(invite.text, '487 Request Terminated', invite.rinfo); }
      return;
    }
    if (method === 'BYE' || method === 'OPTIONS') return respond(text, '200 OK', rinfo);
  });
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', () => r()));
  const port = socket.address().port;
  return {
    port, requests,
    close: () => socket.close(),
    /** The far end hangs up an answered call (its Call-ID starts with our call id). */
    bye(callIdPrefix: string) {
      const [callId, call] = [...answered.entries()].find(([id]) => id.startsWith(callIdPrefix)) ?? [];
      if (!call || !callId) throw new Error(`no answered call ${callIdPrefix}`);
      const target = /sip:[^@]+@([^:;>]+):(\d+)/.exec(call.contact)!;
      const lines = [`BYE ${call.contact} SIP/2.0`, `Via: SIP/2.0/UDP 127.0.0.1:${port};branch=z9hG4bK${randomBytes(6).toString('hex')}`, 'Max-Forwards: 70',
        `From: ${call.to}`, `To: ${call.from}`, `Call-ID: ${callId}`, 'CSeq: 1 BYE', 'Content-Length: 0', '', ''];
      socket.send(Buffer.from(lines.join('\r\n')), Number(target[2]), target[1]);
    },
  };
}
