/**
 * `node src/main.ts` as a process: first start on an empty database bootstraps an organization
 * and prints one test key; SIGTERM lets an in-flight request finish and exits 0; a second start
 * does not bootstrap again.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cloneTestDatabase, dropTestDatabase, TEST_APP_SECRET, CHILD_NODE_ENV } from './helpers/testApp.ts';

let databaseUrl: string;
let dbName: string;
let receiver: http.Server;
let receiverPort: number;

beforeAll(async () => {
  ({ url: databaseUrl, name: dbName } = await cloneTestDatabase());
  // A slow webhook receiver: answers after 1.5 s.
  receiver = http.createServer((req, res) => {
    req.resume();
    setTimeout(() => { res.writeHead(200); res.end('ok'); }, 1500);
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  receiverPort = (receiver.address() as { port: number }).port;
});

afterAll(async () => {
  receiver?.close();
  await dropTestDatabase(dbName);
});

type Running = { child: ChildProcessWithoutNullStreams; port: number; output: () => string; exited: Promise<number | null> };

async function startMain(): Promise<Running> {
  const child = spawn(process.execPath, [path.resolve(import.meta.dirname, '../src/main.ts')], {
    env: { ...CHILD_NODE_ENV, PATH: process.env.PATH, DATABASE_URL: databaseUrl, PORT: '0', HOST: '127.0.0.1', APP_SECRET: TEST_APP_SECRET, LOG_LEVEL: 'info', WEBHOOKS_ALLOW_LOOPBACK: '1', DB_POOL_SIZE: '4' },
  });
  let out = '';
  child.stdout.on('data', (d) => { out += String(d); });
  child.stderr.on('data', (d) => { out += String(d); });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = /"port":(\d+),"host":"127\.0\.0\.1","msg":"listening/.exec(out);
    if (m) return { child, port: Number(m[1]), output: () => out, exited };
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`main did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('npm start', () => {
  it('bootstraps once, serves, and drains on SIGTERM', async () => {
    const first = await startMain();
    const key = /svc_test_sk_[0-9A-Za-z]{40}/.exec(first.output())?.[0];
    expect(key, first.output()).toBeDefined();
    const base = `http://127.0.0.1:${first.port}`;
    const me = await fetch(`${base}/v1/settings/organization`, { headers: { 'X-API-Key': key! } });
    expect(me.status).toBe(200);
    expect((await me.json()).data).toMatchObject({ role: 'owner', mode: 'test' });

    const created = await fetch(`${base}/v1/webhooks`, {
      method: 'POST', headers: { 'X-API-Key': key!, 'Content-Type': 'application/json' },
      body: JSON.stringify({ url: `http://127.0.0.1:${receiverPort}/slow`, events: ['message.*'] }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()).data;

    // An in-flight request (the test delivery waits 1.5 s on the receiver) when SIGTERM arrives.
    const inFlight = fetch(`${base}/v1/webhooks/${id}/test`, { method: 'POST', headers: { 'X-API-Key': key! } });
    await new Promise((r) => setTimeout(r, 300));
    first.child.kill('SIGTERM');
    const answered = await inFlight;
    expect(answered.status).toBe(200);
    expect((await answered.json()).data).toMatchObject({ success: true, response_status: 200 });
    expect(await first.exited).toBe(0);
    expect(first.output()).toContain('"msg":"draining"');
    expect(first.output()).toContain('"msg":"stopped"');

    // A second start finds the organization and prints no key.
    const second = await startMain();
    expect(second.output()).not.toMatch(/svc_test_sk_/);
    const again = await fetch(`http://127.0.0.1:${second.port}/v1/settings/organization`, { headers: { 'X-API-Key': key! } });
    expect(again.status).toBe(200);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 120_000); // two Node starts and a drain: slow on a loaded machine
});
