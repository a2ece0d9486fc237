/**
 * The fault harness's load client (bench/faults-load.ts): how it labels failures and how it keeps
 * connections, since the soak's verdict counts every socket error.
 */
import http from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { keepAliveAgent, sendSms, summarize } from '../../bench/faults-load.ts';

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
