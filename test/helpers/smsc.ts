/**
 * SMSC peers for the SMPP tests, each a separate process: the `smpp` npm package's server mode
 * (test/peers/smsc-node.ts) and Perl's Net::SMPP (Debian libnet-smpp-perl, test/peers/smsc.pl).
 * Both speak one line protocol (see smsc-node.ts): events on stdout, commands on stdin.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';

export const SMSC_KINDS = ['node-smpp', 'net-smpp'] as const;
export type SmscKind = (typeof SMSC_KINDS)[number];

export type SmscEvent = { event: string; [key: string]: any };
export type Submit = {
  id: string; from: string; to: string; data_coding: number; esm_class: number; registered_delivery: number;
  short_message: string; sar: [number, number, number] | null;
};

export type Smsc = {
  kind: SmscKind;
  port: number;
  systemId: string;
  password: string;
  events: SmscEvent[];
  /** Submits the SMSC accepted (answered with a message id), in order. */
  submits(): Submit[];
  /** Waits until the SMSC accepted `count` submits to `to` (digits, no `+`), and answers them. */
  acceptedTo(to: string, count: number): Promise<Submit[]>;
  /** Waits until the SMSC accepted the submit it answered with `id`. */
  accepted(id: string): Promise<Submit>;
  command(cmd: Record<string, unknown>): Promise<void>;
  /** Waits (bounded) until `pred` holds over the events. */
  waitFor<T>(what: string, probe: (events: SmscEvent[]) => T | undefined, timeoutMs?: number): Promise<T>;
  /** SIGKILL: the process dies with its connections. */
  kill(): Promise<void>;
  close(): Promise<void>;
};

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export async function startSmsc(kind: SmscKind, opts: { port?: number; systemId?: string; password?: string } = {}): Promise<Smsc> {
  const systemId = opts.systemId ?? 'esme';
  const password = opts.password ?? 'secret';
  const args = [String(opts.port ?? 0), systemId, password];
  let child: ChildProcess;
  if (kind === 'net-smpp') {
    if (!existsSync('/usr/share/perl5/Net/SMPP.pm')) throw new Error('Net::SMPP is not installed: npm test installs it (scripts/test-peers.sh), or apt-get install libnet-smpp-perl');
    child = spawn('perl', [path.join(ROOT, 'test/peers/smsc.pl'), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  } else {
    child = spawn(process.execPath, [path.join(ROOT, 'test/peers/smsc-node.ts'), ...args], { stdio: ['pipe', 'pipe', 'inherit'], cwd: ROOT });
  }
  const events: SmscEvent[] = [];
  const waiters = new Set<() => void>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      events.push(JSON.parse(line) as SmscEvent);
    } catch {
      return;
    }
    for (const w of waiters) w();
  });
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once('exit', () => { exited = true; resolve(); }));

  async function waitFor<T>(what: string, probe: (events: SmscEvent[]) => T | undefined, timeoutMs = 15_000): Promise<T> {
    const now = probe(events);
    if (now !== undefined) return now;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`${kind}: timed out waiting for ${what}; last events: ${JSON.stringify(events.slice(-5))}`));
      }, timeoutMs);
      const check = () => {
        const v = probe(events);
        if (v === undefined) return;
        clearTimeout(timer);
        waiters.delete(check);
        resolve(v);
      };
      waiters.add(check);
      void exit.then(() => {
        if (!waiters.has(check)) return;
        clearTimeout(timer);
        waiters.delete(check);
        reject(new Error(`${kind} exited while waiting for ${what}`));
      });
    });
  }

  const listening = await waitFor('listening', (e) => e.find((x) => x.event === 'listening'));
  let commands = 0;
  return {
    kind, port: listening.port as number, systemId, password, events,
    submits: () => events.filter((e) => e.event === 'submit') as unknown as Submit[],
    acceptedTo: (to, count) => waitFor(`${count} submits to ${to}`, (e) => {
      const found = e.filter((x) => x.event === 'submit' && x.to === to) as unknown as Submit[];
      return found.length >= count ? found : undefined;
    }),
    accepted: (id) => waitFor(`the submit ${id}`, (e) => e.find((x) => x.event === 'submit' && x.id === id) as unknown as Submit | undefined),
    async command(cmd) {
      const n = ++commands;
      child.stdin!.write(`${JSON.stringify(cmd)}\n`);
      await waitFor(`ack of ${String(cmd.cmd)}`, (e) => (e.filter((x) => x.event === 'ok').length >= n ? true : undefined));
    },
    waitFor,
    async kill() {
      if (exited) return;
      child.kill('SIGKILL');
      await exit;
    },
    async close() {
      if (exited) return;
      child.stdin!.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 2_000);
      await exit;
      clearTimeout(timer);
    },
  };
}
