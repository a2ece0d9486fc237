/**
 * rtpengine for the media bench: the daemon started in userspace (no kernel module: `table = -1`)
 * and a client of its NG control protocol (a bencoded dictionary per UDP datagram, prefixed by a
 * cookie the reply repeats).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { existsSync } from 'node:fs';

export type Bencoded = string | number | Buffer | Bencoded[] | { [key: string]: Bencoded };

export function bencode(v: Bencoded): Buffer {
  if (typeof v === 'number') return Buffer.from(`i${Math.trunc(v)}e`);
  if (typeof v === 'string' || Buffer.isBuffer(v)) {
    const b = Buffer.isBuffer(v) ? v : Buffer.from(v, 'utf8');
    return Buffer.concat([Buffer.from(`${b.length}:`), b]);
  }
  if (Array.isArray(v)) return Buffer.concat([Buffer.from('l'), ...v.map(bencode), Buffer.from('e')]);
  const keys = Object.keys(v).sort();
  return Buffer.concat([Buffer.from('d'), ...keys.flatMap((k) => [bencode(k), bencode(v[k]!)]), Buffer.from('e')]);
}

/** Decodes one value; byte strings come back as UTF-8 strings. */
export function bdecode(b: Buffer): Bencoded {
  let at = 0;
  const value = (): Bencoded => {
    const c = String.fromCharCode(b[at]!);
    if (c === 'i') {
      const end = b.indexOf(0x65, at);
      const n = Number(b.toString('latin1', at + 1, end));
      at = end + 1;
      return n;
    }
    if (c === 'l') {
      at += 1;
      const list: Bencoded[] = [];
      while (b[at] !== 0x65) list.push(value());
      at += 1;
      return list;
    }
    if (c === 'd') {
      at += 1;
      const dict: Record<string, Bencoded> = {};
      while (b[at] !== 0x65) {
        const k = value() as string;
        dict[k] = value();
      }
      at += 1;
      return dict;
    }
    const colon = b.indexOf(0x3a, at);
    const length = Number(b.toString('latin1', at, colon));
    const s = b.toString('utf8', colon + 1, colon + 1 + length);
    at = colon + 1 + length;
    return s;
  };
  return value();
}

export class NgClient {
  readonly #socket = dgram.createSocket('udp4');
  readonly #port: number;
  readonly #waiting = new Map<string, (reply: Record<string, Bencoded>) => void>();

  constructor(port: number) {
    this.#port = port;
    this.#socket.on('message', (m) => {
      const space = m.indexOf(0x20);
      const cookie = m.toString('latin1', 0, space);
      const done = this.#waiting.get(cookie);
      this.#waiting.delete(cookie);
      done?.(bdecode(m.subarray(space + 1)) as Record<string, Bencoded>);
    });
  }

  async command(command: string, args: Record<string, Bencoded> = {}, timeoutMs = 5000): Promise<Record<string, Bencoded>> {
    const cookie = randomBytes(8).toString('hex');
    const message = Buffer.concat([Buffer.from(`${cookie} `), bencode({ command, ...args })]);
    const reply = await new Promise<Record<string, Bencoded>>((resolve, reject) => {
      const timer = setTimeout(() => { this.#waiting.delete(cookie); reject(new Error(`rtpengine: no answer to ${command}`)); }, timeoutMs);
      this.#waiting.set(cookie, (r) => { clearTimeout(timer); resolve(r); });
      this.#socket.send(message, this.#port, '127.0.0.1');
    });
    if (reply.result !== 'ok' && reply.result !== 'pong') throw new Error(`rtpengine ${command}: ${String(reply['error-reason'] ?? reply.result)}`);
    return reply;
  }

  close(): void {
    this.#socket.close();
  }
}

export type Rtpengine = { pid: number; ng: NgClient; log(): string; stop(): Promise<void> };

/** rtpengine in the foreground, userspace only, NG on `ngPort`, media ports in [portMin, portMax]. */
export async function startRtpengine(opts: { ngPort: number; portMin: number; portMax: number; recordingDir?: string; threads?: number; nice?: number }): Promise<Rtpengine> {
  if (!existsSync('/usr/bin/rtpengine')) throw new Error('rtpengine is not installed: apt-get install -y rtpengine-daemon');
  const args = [
    '--table=-1', '--interface=127.0.0.1', `--listen-ng=127.0.0.1:${opts.ngPort}`, '--foreground', '--log-stderr', '--log-level=5',
    `--port-min=${opts.portMin}`, `--port-max=${opts.portMax}`, '--timeout=60', '--delete-delay=0',
    ...(opts.threads ? [`--num-threads=${opts.threads}`] : []),
    ...(opts.recordingDir ? [`--recording-dir=${opts.recordingDir}`, '--recording-method=pcap', '--recording-format=raw'] : []),
  ];
  let out = '';
  // `nice` execs rtpengine in its own process (same pid) at the given nice value.
  const child: ChildProcess = opts.nice === undefined
    ? spawn('/usr/bin/rtpengine', args, { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn('nice', ['-n', String(opts.nice), '/usr/bin/rtpengine', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr!.on('data', (c: Buffer) => { out = (out + c.toString()).slice(-200_000); });
  const ng = new NgClient(opts.ngPort);
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`rtpengine exited: ${out}`);
    try {
      await ng.command('ping', {}, 300);
      break;
    } catch (e) {
      if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`rtpengine did not answer: ${(e as Error).message}\n${out}`, { cause: e }); }
    }
  }
  let stopped = false;
  return {
    pid: child.pid!, ng, log: () => out,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      ng.close();
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => { child.once('exit', r); setTimeout(r, 3000); });
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
