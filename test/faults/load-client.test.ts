/**
 * The fault harness's load client (bench/faults-load.ts): how it labels failures and how it keeps
 * connections, since the soak's verdict counts every socket error.
 */
import http from 'node:http';
import net from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { keepAliveAgent, sendSms, summarize } from '../../bench/faults-load.ts';
import { fdGrowth, fdKinds, fdsBesidesDatabase, parseProcNetTcp } from '../../bench/faults-overload.ts';

const servers: http.Server[] = [];
afterAll(() => { for (const s of servers) s.close(); });

async function server(handler: http.RequestListener, keepAliveTimeout: number): Promise<{ port: number; clientClosedAt: Promise<number> }> {
  const srv = http.createServer(handler);
  srv.keepAliveTimeout = keepAliveTimeout;
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const started = Date.now();
  // The first connection's end from the client side (a FIN the server reads) and when it came.
  const clientClosedAt = new Promise<number>((resolve) => srv.once('connection', (s) => s.once('end', () => resolve(Date.now() - started))));
  return { port: (srv.address() as { port: number }).port, clientClosedAt };
}

describe('load client', () => {
  it('closes an idle keep-alive connection before the server would (by its Keep-Alive hint)', async () => {
    const { port, clientClosedAt } = await server((req, res) => { req.resume(); req.on('end', () => res.end('{"data":{"id":"msg_1"}}')); }, 2000);
    const agent = keepAliveAgent(4);
    const s = await sendSms(agent, port, 'key', 'run-1');
    expect(s.status).toBe(200);
    // The server announces timeout=2 and closes at ~3 s; the client closes at ~1 s.
    expect(await clientClosedAt).toBeLessThan(2000);
    agent.destroy();
  });

  it('labels socket errors with their code', async () => {
    const { port } = await server((req) => req.socket.destroy(), 5000);
    const agent = keepAliveAgent(1);
    const s = await sendSms(agent, port, 'key', 'run-2');
    expect(s.status).toBe(0);
    expect(summarize([s, { ...s, status: 201, code: undefined }], 1).by_answer).toEqual({ 'socket ECONNRESET': 1, 201: 1 });
    agent.destroy();
  });
});

describe('descriptor census (the soak\'s handle check)', () => {
  it('parses /proc/net/tcp: inode → ports, listening or not', () => {
    const text = [
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
      '   0: 0100007F:1538 00000000:0000 0A 00000000:00000000 00:00000000 00000000   107        0 8695 1 0 100 0 0 10 0',
      '   1: 0100007F:A1B2 0100007F:1538 01 00000000:00000000 00:00000000 00000000     0        0 9001 1 0 20 4 30 10 -1',
    ].join('\n');
    expect([...parseProcNetTcp(text)]).toEqual([['8695', { local: 5432, remote: 0, listening: true }], ['9001', { local: 0xa1b2, remote: 5432, listening: false }]]);
  });

  it('tells listening, inbound, database and other outbound sockets apart, and leaves the database out of the judged count', async () => {
    const dbPort = Number(new URL(inject('pgAdminUrl')).port || 5432);
    const before = fdKinds(process.pid, { dbPort });
    const srv = net.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const inbound = new Promise<net.Socket>((r) => srv.once('connection', r));
    const client = net.connect((srv.address() as net.AddressInfo).port, '127.0.0.1');
    await new Promise((r) => client.once('connect', r));
    const accepted = await inbound;
    const db = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await db.connect();
    try {
      const after = fdKinds(process.pid, { dbPort });
      expect(fdGrowth(before, after).split(', ').sort()).toEqual(
        ['socket database +1', 'socket inbound +1', 'socket listen +1', `socket → :${(srv.address() as net.AddressInfo).port} +1`].sort());
      expect(fdsBesidesDatabase(after) - fdsBesidesDatabase(before)).toBe(3);
    } finally {
      await db.end();
      client.destroy();
      accepted.destroy();
      srv.close();
    }
  });
});
