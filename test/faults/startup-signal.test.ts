/**
 * A stop signal during start-up (an orchestrator that scales down a process still booting):
 * before, it arrived before main.ts installed its drain and killed the process by the signal's
 * default action; now it is remembered and acted on as soon as what has started can be stopped:
 * the process exits 0 by itself, having stopped what it started, and never opens its HTTP port.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cloneTestDatabase, TEST_APP_SECRET, CHILD_NODE_ENV } from '../helpers/testApp.ts';

const dbs: { drop(): Promise<void> }[] = [];
afterAll(async () => {
  for (const db of dbs) await db.drop().catch(() => {});
});

async function stopDuringStartup(signal: 'SIGTERM' | 'SIGINT', after: RegExp): Promise<{ code: number | null; signal: string | null; out: string }> {
  const db = await cloneTestDatabase();
  dbs.push(db);
  const child = spawn(process.execPath, [path.resolve(import.meta.dirname, '../../src/main.ts')], {
    env: { ...CHILD_NODE_ENV, PATH: process.env.PATH, DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', APP_SECRET: TEST_APP_SECRET, LOG_LEVEL: 'info', DB_POOL_SIZE: '4' },
  });
  let out = '';
  let sent = false;
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on('exit', (code, sig) => resolve({ code, signal: sig })));
  const onData = (d: Buffer) => {
    out += String(d);
    if (!sent && after.test(out)) {
      sent = true;
      child.kill(signal);
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const result = await exited;
  clearTimeout(timer);
  return { ...result, out };
}

describe('a stop signal during start-up', () => {
  it('SIGTERM right after the process starts: it stops what it started and exits 0, never listening', async () => {
    const r = await stopDuringStartup('SIGTERM', /"msg":"starting"/);
    expect({ code: r.code, signal: r.signal }, r.out).toEqual({ code: 0, signal: null });
    expect(r.out).toMatch(/stop requested during start-up/);
    expect(r.out).toMatch(/"msg":"stopped/);
    expect(r.out).not.toMatch(/"msg":"listening/);
  }, 90_000);

  it('SIGINT once the app runs (its first organization just printed, the port not yet open): it drains and exits 0', async () => {
    const r = await stopDuringStartup('SIGINT', /Created organization/);
    expect({ code: r.code, signal: r.signal }, r.out).toEqual({ code: 0, signal: null });
    expect(r.out).toMatch(/"signal":"SIGINT","msg":"draining"/);
    expect(r.out).toMatch(/"msg":"stopped"/);
  }, 90_000);
});
