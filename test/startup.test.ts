/**
 * Start-up problems a newcomer meets, each said in one line: the HTTP port in use, and an embedded
 * PostgreSQL port held by the cluster of another data directory (each directory gets its own port).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedPort, startEmbeddedPostgres, type EmbeddedDatabase } from '../src/platform/db/embedded.ts';
import { cloneTestDatabase, dropTestDatabase, TEST_APP_SECRET, CHILD_NODE_ENV } from './helpers/testApp.ts';

let databaseUrl: string;
let dbName: string;

beforeAll(async () => {
  ({ url: databaseUrl, name: dbName } = await cloneTestDatabase());
});

afterAll(async () => {
  await dropTestDatabase(dbName);
});

describe('npm start with the HTTP port in use', () => {
  it('exits 1 with one line naming PORT, and prints no first-start key', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const child = spawn(process.execPath, [path.resolve(import.meta.dirname, '../src/main.ts')], {
        env: { ...CHILD_NODE_ENV, PATH: process.env.PATH, DATABASE_URL: databaseUrl, PORT: String(port), HOST: '127.0.0.1', APP_SECRET: TEST_APP_SECRET, LOG_LEVEL: 'silent', DB_POOL_SIZE: '2' },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => { stdout += String(d); });
      child.stderr.on('data', (d) => { stderr += String(d); });
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(code).toBe(1);
      expect(stderr.trim().split('\n')).toEqual([`error: PORT ${port} is already in use on 127.0.0.1: set PORT to a free port or stop the process that holds it`]);
      expect(stdout).not.toMatch(/svc_test_sk_/);
    } finally {
      blocker.close();
    }
  }, 60_000);
});

describe('embedded PostgreSQL per data directory', () => {
  const dirs: string[] = [];
  let first: EmbeddedDatabase | undefined;
  afterAll(async () => {
    await first?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('gives each data directory its own recorded port, and refuses a cluster of another directory in one line', async () => {
    const a = mkdtempSync(path.join(os.tmpdir(), 'omni-pg-a-'));
    const b = mkdtempSync(path.join(os.tmpdir(), 'omni-pg-b-'));
    dirs.push(a, b);
    const portA = await embeddedPort(a, undefined);
    expect(readFileSync(path.join(a, 'pg-port'), 'utf8').trim()).toBe(String(portA));
    first = await startEmbeddedPostgres(a, portA, 'omni_probe');
    expect(first.port).toBe(portA);
    // The same directory keeps its port (and reuses its running cluster, as the admin CLI does).
    expect(await embeddedPort(a, undefined)).toBe(portA);
    const again = await startEmbeddedPostgres(a, portA, 'omni_probe');
    await again.stop();
    // Another directory never lands on a port held by the first one's cluster.
    const portB = await embeddedPort(b, undefined);
    expect(portB).not.toBe(portA);
    expect(existsSync(path.join(b, 'pg-port'))).toBe(true);
    // Forced onto the first one's port (EMBEDDED_PG_PORT), it says so in one line.
    const refused = await startEmbeddedPostgres(b, portA).then(() => undefined, (e: Error) => e);
    expect(refused?.name).toBe('StartupError');
    expect(refused?.message).not.toContain('\n');
    expect(refused?.message).toContain(`port ${portA} is taken by the embedded PostgreSQL of`);
    expect(refused?.message).toContain('EMBEDDED_PG_PORT');
  }, 90_000);
});
