/**
 * `node src/main.ts` started as a user starts it, on a fresh clone of the test database: where it
 * listens and the test key it prints on first start (the README's quick start and the guides run
 * their commands against it).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { cloneTestDatabase, dropTestDatabase, TEST_APP_SECRET, CHILD_NODE_ENV } from './testApp.ts';

export type MainProcess = { base: string; key: string; stop(): Promise<void> };

export async function startMainProcess(): Promise<MainProcess> {
  const db = await cloneTestDatabase();
  const child = spawn(process.execPath, [path.resolve(import.meta.dirname, '../../src/main.ts')], {
    env: { ...CHILD_NODE_ENV, PATH: process.env.PATH, DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', APP_SECRET: TEST_APP_SECRET, LOG_LEVEL: 'info', DB_POOL_SIZE: '4' },
  });
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.on('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    await dropTestDatabase(db.name);
  };
  let out = '';
  child.stdout!.on('data', (d) => { out += String(d); });
  child.stderr!.on('data', (d) => { out += String(d); });
  // A loaded machine (CI, tests in parallel) can take a while to start node and load the TypeScript sources.
  const deadline = Date.now() + 90_000;
  for (;;) {
    const port = /"port":(\d+),"host":"127\.0\.0\.1","msg":"listening/.exec(out)?.[1];
    const printed = /svc_test_sk_[0-9A-Za-z]{40}/.exec(out)?.[0];
    if (port && printed) return { base: `http://127.0.0.1:${port}`, key: printed, stop };
    if (Date.now() > deadline || child.exitCode !== null) {
      await stop();
      throw new Error(`main did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
