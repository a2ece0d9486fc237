/**
 * The LISTEN connections (event bus: live notices; outbox relay: new events) under faults: a
 * server that accepts and never answers fails the start within the connect deadline instead of
 * hanging it; a connection the database drops (a restart, a terminated backend) comes back by
 * itself and notices flow again. Before, the relay's listener was never re-established (the drain
 * fell back to its 1 s timer) and neither connect had a deadline.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import pg from 'pg';
import { Listener } from '../../src/platform/db/listen.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { eventually } from '../helpers/assertions.ts';

const log = createLogger('silent');
let silent: net.Server;
let silentPort: number;
const sockets = new Set<net.Socket>();
let admin: pg.Client;

beforeAll(async () => {
  silent = net.createServer((s) => { sockets.add(s); s.on('error', () => {}); });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  silentPort = (silent.address() as net.AddressInfo).port;
  admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await admin.connect();
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => silent.close(r));
  await admin?.end();
});

describe('a LISTEN connection', () => {
  it('fails its start within the connect deadline when the server never answers', async () => {
    const url = `postgres://postgres@127.0.0.1:${silentPort}/postgres`;
    const listener = new Listener({ url, channel: 'never', connectTimeoutMs: 300, log, onNotification: () => {} });
    const started = Date.now();
    await expect(listener.start()).rejects.toThrow(/timeout/i);
    expect(Date.now() - started).toBeLessThan(5000);
    await listener.stop();
  });

  it('comes back by itself after the database drops it, and notices flow again', async () => {
    const channel = `listen_test_${process.pid}_${Date.now()}`;
    const got: string[] = [];
    let reconnects = 0;
    const listener = new Listener({
      url: inject('pgAdminUrl'), channel, connectTimeoutMs: 2000, log,
      onNotification: (p) => { if (p) got.push(p); }, onReconnect: () => { reconnects += 1; },
    });
    await listener.start();
    try {
      await admin.query(`notify ${channel}, 'before'`);
      await eventually('the first notice', () => (got.includes('before') ? true : undefined));
      const { rows } = await admin.query(`select pg_terminate_backend(pid) as ok from pg_stat_activity where query = $1`, [`listen ${channel}`]);
      expect(rows).toHaveLength(1);
      await eventually('a new LISTEN connection', async () => {
        const { rows: again } = await admin.query(`select count(*)::int as c from pg_stat_activity where query = $1`, [`listen ${channel}`]);
        return again[0].c === 1 && reconnects === 1 ? true : undefined;
      }, 10_000);
      await admin.query(`notify ${channel}, 'after'`);
      await eventually('the notice after the reconnection', () => (got.includes('after') ? true : undefined));
    } finally {
      await listener.stop();
    }
    const { rows: left } = await admin.query(`select count(*)::int as c from pg_stat_activity where query = $1`, [`listen ${channel}`]);
    expect(left[0].c).toBe(0);
  });
});
