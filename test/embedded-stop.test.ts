/**
 * `npm start` on the embedded PostgreSQL (DATABASE_URL unset, a data directory of its own) stops
 * with its owner (issue 45, "Stopping"): a SIGTERM to npm reaches the service, which drains and
 * stops the cluster; a SIGKILL of the service leaves the cluster to its watchdog, which stops it
 * within seconds; a SIGKILL of npm makes the service stop itself; and the next start recovers the
 * data directory (a stale `postmaster.pid` naming a live process included) with its data.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'omni-stop-'));
const started: ChildProcess[] = [];

type Run = { npm: ChildProcess; servicePid: number; postmasterPid: number; port: number; out: () => string; exited: Promise<number | null> };

/** `npm start` in the repository with DATABASE_URL unset; resolves once it listens. */
async function npmStart(): Promise<Run> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DB_POOL_SIZE: '2' };
  const npm = spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push(npm);
  let out = '';
  npm.stdout!.on('data', (d) => { out += String(d); });
  npm.stderr!.on('data', (d) => { out += String(d); });
  const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 180_000;
  let port: number | undefined;
  while (port === undefined) {
    if (Date.now() > deadline || npm.exitCode !== null) throw new Error(`npm start did not listen:\n${out}`);
    port = lines(out).find((l) => l.msg?.startsWith('listening'))?.port as number | undefined;
    await sleep(200);
  }
  const servicePid = lines(out).find((l) => l.msg === 'starting')!.pid as number;
  const postmasterPid = Number(readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  return { npm, servicePid, postmasterPid, port, out: () => out, exited };
}

function lines(out: string): { msg?: string; [k: string]: unknown }[] {
  return out.split('\n').filter((l) => l.startsWith('{')).map((l) => { try { return JSON.parse(l); } catch { return {}; } });
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === 'EPERM';
  }
}
/** Milliseconds until every pid is gone (throws after `ms`). */
async function goneWithin(pids: number[], ms: number): Promise<number> {
  const start = Date.now();
  while (pids.some(alive)) {
    if (Date.now() - start > ms) throw new Error(`still running after ${ms} ms: ${pids.filter(alive).join(', ')}`);
    await sleep(100);
  }
  return Date.now() - start;
}

afterAll(async () => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  // Whatever a failed assertion left running (only what this file started, by pid).
  const pidFile = path.join(dataDir, 'pg', 'postmaster.pid');
  if (existsSync(pidFile)) {
    const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    if (pid > 0 && alive(pid)) process.kill(pid, 'SIGINT');
    await goneWithin([pid], 15_000).catch(() => {});
  }
  rmSync(dataDir, { recursive: true, force: true });
});

describe('npm start stops with its owner', () => {
  let key = '';

  it('SIGTERM to npm reaches the service: it drains, and the embedded cluster stops with it', async () => {
    const run = await npmStart();
    key = /svc_test_sk_\w+/.exec(run.out())![0];
    expect(alive(run.postmasterPid)).toBe(true);
    run.npm.kill('SIGTERM');
    await goneWithin([run.servicePid, run.postmasterPid], 30_000);
    await run.exited;
    expect(lines(run.out()).some((l) => l.msg === 'stopped')).toBe(true);
    expect(existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  }, 240_000);

  it('SIGKILL of the service: its watchdog stops the cluster within seconds; the next start has the data', async () => {
    const run = await npmStart();
    const org = await fetch(`http://127.0.0.1:${run.port}/v1/settings/organization`, { headers: { 'X-API-Key': key } });
    expect(org.status).toBe(200);
    process.kill(run.servicePid, 'SIGKILL');
    expect(await goneWithin([run.postmasterPid], 10_000)).toBeLessThan(10_000);
    await run.exited;
  }, 240_000);

  it('SIGKILL of npm: the service notices it is orphaned, drains and stops the cluster', async () => {
    const run = await npmStart();
    run.npm.kill('SIGKILL');
    await goneWithin([run.servicePid, run.postmasterPid], 30_000);
  }, 240_000);

  it('a cluster killed outright (stale postmaster.pid naming a live process) is recovered at the next start, data kept', async () => {
    const run = await npmStart();
    // Owner and postmaster die at once: nothing cleans up, and the recorded pid is then taken by another process.
    process.kill(run.servicePid, 'SIGKILL');
    process.kill(run.postmasterPid, 'SIGKILL');
    await goneWithin([run.servicePid, run.postmasterPid], 10_000);
    // The backends notice their postmaster died and exit on their own.
    await sleep(2000);
    const pidFile = path.join(dataDir, 'pg', 'postmaster.pid');
    expect(existsSync(pidFile)).toBe(true);
    // A live process of the cluster's user (as root, postgres runs as the data directory's owner),
    // as after a reboot that handed the old pid on: postgres itself then refuses to start.
    const asOwner = process.getuid?.() === 0 ? { uid: statSync(path.join(dataDir, 'pg')).uid } : {};
    const squatter = spawn('sleep', ['600'], { ...asOwner, stdio: 'ignore' });
    started.push(squatter);
    const [, ...rest] = readFileSync(pidFile, 'utf8').split('\n');
    writeFileSync(pidFile, [String(squatter.pid), ...rest].join('\n'));

    const again = await npmStart();
    const ready = await fetch(`http://127.0.0.1:${again.port}/readyz`);
    expect(ready.status).toBe(200);
    const org = await fetch(`http://127.0.0.1:${again.port}/v1/settings/organization`, { headers: { 'X-API-Key': key } });
    expect(org.status).toBe(200);
    expect(again.out()).not.toMatch(/Created organization/);
    expect(alive(squatter.pid!)).toBe(true);
    again.npm.kill('SIGTERM');
    await goneWithin([again.servicePid, again.postmasterPid], 30_000);
  }, 300_000);
});
